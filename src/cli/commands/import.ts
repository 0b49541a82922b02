/**
 * `rankscope import FORMAT PATH`: runs logged elsewhere, each into a run directory of its own under
 * the root (docs/import.md). Importing an unchanged source again changes nothing; a bad record
 * stops the import with an error naming the file and the record, keeping what came before it.
 */
import type { Command } from "commander";
import { basename, extname, resolve } from "node:path";
import { folderName, fingerprintFiles, ImportRun, type ImportRecord } from "../../import/import-run.js";
import { importCsv, importJsonl } from "../../import/table.js";
import { findWandbRuns, importWandbRun } from "../../import/wandb.js";
import { findMlflowRuns, importMlflowRun } from "../../import/mlflow.js";
import { importMlflowRestRun, readMlflowServer } from "../../import/mlflow-rest.js";
import { findTensorBoardRuns, importTensorBoardRun, type TensorBoardCounts } from "../../import/tensorboard.js";
import { defaultRoot } from "../run-arg.js";

/** The formats `import` reads. */
export const IMPORT_FORMATS = ["csv", "jsonl", "tensorboard", "wandb", "mlflow"] as const;
type ImportFormat = (typeof IMPORT_FORMATS)[number];

interface ImportOptions {
  root?: string;
  experiment?: string;
  trial?: string;
}

/** One source to import and the run it becomes. */
interface Planned {
  readonly format: ImportFormat;
  readonly source: string;
  /** What makes a second import of an unchanged source change nothing (`fingerprintFiles` of its files). */
  readonly fingerprint: () => string;
  readonly experiment: string;
  readonly trial: string;
  /** Reads the source into the run; what it says besides the counts. */
  readonly read: (run: ImportRun) => string;
}

/** What a TensorBoard run's import skipped. */
function skippedText(counts: TensorBoardCounts): string {
  const parts = [...counts.skipped].map(([what, n]) => `${n} ${what}`);
  return parts.length === 0 ? "" : `; skipped ${parts.join(", ")}`;
}

/** One run per W&B offline run under the path (an offline run's directory, or a `wandb/` folder holding them). */
function planWandb(path: string, options: ImportOptions): Planned[] {
  const runs = findWandbRuns(path);
  if (runs.length === 0) throw new Error(`${path} holds no W&B offline run (offline-run-*/run-*.wandb)`);
  if (options.trial !== undefined && runs.length > 1)
    throw new Error(`--trial names one run, but ${path} holds ${runs.length}; leave it out to name each by its run id`);
  return runs.map((wb) => ({
    format: "wandb",
    source: wb.dir,
    fingerprint: () => fingerprintFiles([wb.file]),
    experiment: options.experiment ?? "wandb",
    trial: options.trial ?? folderName(wb.id),
    read: (run) => {
      const skipped = importWandbRun(wb, run);
      return skipped > 0 ? `; skipped ${skipped} values that are neither numbers nor tables` : "";
    },
  }));
}

/** One run per MLflow run of a file store (`mlruns/`, an experiment's folder or a run's). */
function planMlflow(path: string, options: ImportOptions): Planned[] {
  const runs = findMlflowRuns(path);
  if (runs.length === 0) throw new Error(`${path} holds no MLflow run ({experiment}/{run}/meta.yaml)`);
  if (options.trial !== undefined && runs.length > 1)
    throw new Error(`--trial names one run, but ${path} holds ${runs.length}; leave it out to name each by its run`);
  return runs.map((ml) => ({
    format: "mlflow",
    source: ml.dir,
    fingerprint: () => fingerprintFiles(ml.files),
    experiment: options.experiment ?? folderName(ml.experimentName === "" ? "mlflow" : ml.experimentName),
    trial: options.trial ?? folderName(ml.runName === "" ? ml.runId : `${ml.runName}-${ml.runId.slice(0, 8)}`),
    read: (run) => {
      importMlflowRun(ml, run);
      return "";
    },
  }));
}

/** One run per run of an MLflow tracking server (`http(s)://…`), each read whole first. */
async function planMlflowServer(url: string, options: ImportOptions): Promise<Planned[]> {
  const runs = await readMlflowServer(url);
  if (runs.length === 0) throw new Error(`the MLflow server at ${url} has no runs`);
  if (options.trial !== undefined && runs.length > 1)
    throw new Error(`--trial names one run, but ${url} has ${runs.length}; leave it out to name each by its run`);
  return runs.map((ml) => ({
    format: "mlflow",
    source: `${url} run ${ml.runId}`,
    fingerprint: () => ml.fingerprint,
    experiment: options.experiment ?? folderName(ml.experimentName === "" ? "mlflow" : ml.experimentName),
    trial: options.trial ?? folderName(ml.runName === "" ? ml.runId : `${ml.runName}-${ml.runId.slice(0, 8)}`),
    read: (run) => {
      importMlflowRestRun(ml, url, run);
      return "";
    },
  }));
}

/** One run per TensorBoard run directory under the log directory. */
function planTensorBoard(logdir: string, options: ImportOptions): Planned[] {
  const runs = findTensorBoardRuns(logdir);
  if (runs.length === 0) throw new Error(`${logdir} holds no TensorBoard event files (*tfevents*)`);
  if (options.trial !== undefined && runs.length > 1)
    throw new Error(
      `--trial names one run, but ${logdir} holds ${runs.length} (${runs.map((r) => r.name).join(", ")}); leave it out to name each by its directory`,
    );
  const experiment = options.experiment ?? folderName(basename(logdir));
  return runs.map((tb) => ({
    format: "tensorboard",
    source: tb.dir,
    fingerprint: () => fingerprintFiles(tb.files),
    experiment,
    trial: options.trial ?? folderName(tb.name === "." ? basename(logdir) : tb.name),
    read: (run) => skippedText(importTensorBoardRun(tb, run)),
  }));
}

/** The run (or runs) a source becomes. */
async function plan(format: ImportFormat, path: string, options: ImportOptions): Promise<Planned[]> {
  if (format === "mlflow" && /^https?:\/\//.test(path)) return planMlflowServer(path, options);
  const file = resolve(path);
  if (format === "tensorboard") return planTensorBoard(file, options);
  if (format === "wandb") return planWandb(file, options);
  if (format === "mlflow") return planMlflow(file, options);
  const trial = options.trial ?? folderName(basename(file, extname(file)));
  const experiment = options.experiment ?? "import";
  const read = (run: ImportRun): string => {
    if (format === "csv") importCsv(file, run);
    else importJsonl(file, run);
    return "";
  };
  return [{ format, source: file, fingerprint: () => fingerprintFiles([file]), experiment, trial, read }];
}

function said(record: ImportRecord): string {
  return `${record.points.toLocaleString("en-US")} points${record.records > 0 ? ` and ${record.records.toLocaleString("en-US")} records` : ""}`;
}

/** Import one planned run; false when it stopped at an error (reported on stderr). */
function importOne(p: Planned, root: string): boolean {
  const start = ImportRun.begin({
    root,
    experiment: p.experiment,
    trial: p.trial,
    format: p.format,
    source: p.source,
    fingerprint: p.fingerprint(),
  });
  if (start.kind === "unchanged") {
    process.stdout.write(
      `${p.source}: already imported into ${start.runDir} (${said(start.record)}); nothing changed\n`,
    );
    return true;
  }
  const run = start.run;
  let note: string;
  try {
    note = p.read(run);
  } catch (error) {
    const record = run.end(error);
    process.stderr.write(
      `rankscope: ${error instanceof Error ? error.message : String(error)}\n  kept what came before it in ${run.runDir} (${said(record)}, status failed)\n`,
    );
    return false;
  }
  const record = run.end();
  process.stdout.write(`${p.source}: imported ${said(record)} into ${run.runDir}${note}\n`);
  return true;
}

export function registerImportCommand(program: Command): void {
  program
    .command("import")
    .description("bring runs logged elsewhere in, each into a run directory of its own (docs/import.md)")
    .argument("<format>", `what PATH holds: ${IMPORT_FORMATS.join(" or ")}`)
    .argument("<path>", "the file or directory to import (mlflow: also a tracking server's http(s):// URL)")
    .option("--root <dir>", "the runs root to import into (default: $RANKSCOPE_ROOT or ./runs)")
    .option("--experiment <name>", "the experiment of the imported runs (default: import)")
    .option("--trial <name>", "the trial (default: from the source's name)")
    .action(async (format: string, path: string, options: ImportOptions) => {
      const chosen = IMPORT_FORMATS.find((f) => f === format);
      if (chosen === undefined)
        throw new Error(`format ${JSON.stringify(format)} is not supported; valid: ${IMPORT_FORMATS.join(", ")}`);
      const root = options.root ?? defaultRoot();
      let ok = true;
      for (const p of await plan(chosen, path, options)) ok = importOne(p, root) && ok;
      if (!ok) process.exitCode = 1;
    });
}
