/**
 * MLflow's file store (`mlruns/`, what `mlflow` writes with a local tracking URI), laid out as its
 * `FileStore` documents and reads it:
 *
 * ```
 * mlruns/{experiment_id}/meta.yaml                  name, experiment_id, lifecycle_stage, …
 * mlruns/{experiment_id}/{run_id}/meta.yaml         run_id, run_name, start_time, end_time, status, …
 * mlruns/{experiment_id}/{run_id}/metrics/{key}     one line per value: "{timestamp ms} {value} [{step}]"
 * mlruns/{experiment_id}/{run_id}/params/{key}      the value
 * mlruns/{experiment_id}/{run_id}/tags/{key}        the value
 * ```
 *
 * A key with `/` is a path of folders. `.trash` (deleted runs) and folders without a `meta.yaml`
 * (the model registry's `models/`) are not runs. MLflow's Python package is not available where
 * this was built: the layout is taken from MLflow's documentation and its `FileStore`'s reading
 * code (`_get_metric_from_line`: 2 or 3 space-separated fields, a missing step 0), and tested with
 * fixtures laid out to it (docs/import.md).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { GLOBAL_RANK } from "../store/schema.js";
import { ImportError, type ImportRun } from "./import-run.js";
import { parseValueText } from "./table.js";

/** One MLflow run in a file store. */
export interface MlflowRun {
  readonly dir: string;
  readonly runId: string;
  readonly runName: string;
  readonly experimentName: string;
  /** Every file of the run that is imported (its fingerprint). */
  readonly files: readonly string[];
}

/** A flat `meta.yaml` (MLflow writes one `key: value` per line) as strings, quotes removed. */
export function flatYaml(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split("\n")) {
    const match = /^([A-Za-z_][\w]*):\s*(.*)$/.exec(line.trimEnd());
    if (match === null) continue;
    let value = match[2] ?? "";
    if (/^'.*'$/.test(value)) value = value.slice(1, -1).replace(/''/g, "'");
    else if (/^".*"$/.test(value)) value = value.slice(1, -1);
    out.set(match[1] ?? "", value);
  }
  return out;
}

/** Files under `dir` as `[key, path]`, the key their path under `dir` with `/`. */
function keyedFiles(dir: string, prefix = ""): [string, string][] {
  if (!existsSync(dir)) return [];
  const out: [string, string][] = [];
  for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const key = prefix === "" ? e.name : `${prefix}/${e.name}`;
    if (e.isDirectory()) out.push(...keyedFiles(join(dir, e.name), key));
    else if (e.isFile()) out.push([key, join(dir, e.name)]);
  }
  return out;
}

/** The runs of a file store (`mlruns/`), or of one experiment's folder, or one run's. */
export function findMlflowRuns(path: string): MlflowRun[] {
  const runs: MlflowRun[] = [];
  const runAt = (dir: string, experimentName: string): void => {
    const meta = flatYaml(readFileSync(join(dir, "meta.yaml"), "utf8"));
    const runId = meta.get("run_id") ?? meta.get("run_uuid") ?? "";
    const files = ["meta.yaml", "metrics", "params", "tags"].flatMap((part) =>
      part === "meta.yaml" ? [join(dir, part)] : keyedFiles(join(dir, part)).map(([, f]) => f),
    );
    runs.push({ dir, runId, runName: meta.get("run_name") ?? "", experimentName, files });
  };
  const experimentAt = (dir: string): void => {
    const name = flatYaml(readFileSync(join(dir, "meta.yaml"), "utf8")).get("name") ?? "";
    for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1)))
      if (e.isDirectory() && existsSync(join(dir, e.name, "meta.yaml"))) runAt(join(dir, e.name), name);
  };
  const isRun = (dir: string): boolean => flatYaml(readFileSync(join(dir, "meta.yaml"), "utf8")).has("run_id");
  if (existsSync(join(path, "meta.yaml"))) {
    if (isRun(path)) runAt(path, flatYaml(readFileSync(join(path, "..", "meta.yaml"), "utf8")).get("name") ?? "");
    else experimentAt(path);
    return runs;
  }
  for (const e of readdirSync(path, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1)))
    if (e.isDirectory() && !e.name.startsWith(".") && existsSync(join(path, e.name, "meta.yaml")))
      experimentAt(join(path, e.name));
  return runs;
}

/** One metric file's values into `run`. */
function importMetric(key: string, file: string, run: ImportRun): void {
  const lines = readFileSync(file, "utf8").split("\n");
  for (const [i, line] of lines.entries()) {
    if (line.trim() === "") continue;
    const parts = line.trim().split(" ");
    const where = `line ${i + 1}`;
    if (parts.length !== 2 && parts.length !== 3)
      throw new ImportError(
        file,
        where,
        `has ${parts.length} fields, where MLflow writes 2 or 3 ("timestamp value [step]")${i === lines.length - 1 ? "; the file may be truncated" : ""}`,
      );
    const [timestampText = "", valueText = "", stepText = "0"] = parts;
    const timestamp = Number(timestampText);
    const step = Number(stepText);
    const value = parseValueText(valueText);
    if (!/^-?\d+$/.test(timestampText) || !/^-?\d+$/.test(stepText))
      throw new ImportError(file, where, `timestamp and step must be integers, got ${JSON.stringify(line.trim())}`);
    if (value === null) throw new ImportError(file, where, `value ${JSON.stringify(valueText)} is not a number`);
    run.scalar(key, GLOBAL_RANK, step, timestamp, value);
  }
}

/** Import one MLflow run: its metrics' every value, its params as hyperparameters, its tags under `tags`. */
export function importMlflowRun(mlflowRun: MlflowRun, run: ImportRun): void {
  const text = (file: string): string => readFileSync(file, "utf8");
  const params = Object.fromEntries(keyedFiles(join(mlflowRun.dir, "params")).map(([k, f]) => [k, text(f)]));
  const tags = Object.fromEntries(keyedFiles(join(mlflowRun.dir, "tags")).map(([k, f]) => [k, text(f)]));
  if (Object.keys(params).length > 0 || Object.keys(tags).length > 0)
    run.hyperparams({ ...params, ...(Object.keys(tags).length > 0 ? { tags } : {}) });
  for (const [key, file] of keyedFiles(join(mlflowRun.dir, "metrics"))) importMetric(key, file, run);
}
