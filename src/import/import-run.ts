/**
 * The run an import writes: its directory under the root, the record of what it was imported from
 * (`import.json`), and the store writer its points, records and hyperparameters go through.
 *
 * Importing is idempotent: a run's directory is named from its source (the caller picks the
 * experiment and trial), and `import.json` holds the source's fingerprint (a SHA-256 of its files'
 * names and bytes). A second import of an unchanged source finds a complete import with the same
 * fingerprint and changes nothing; a source that changed, or an import that stopped at a bad record,
 * is imported again from scratch. A directory that holds a run not made by an import is never
 * touched.
 *
 * A bad record stops the import with an `ImportError` naming the file and the record; what came
 * before it is written (the run's status `failed`, `import.json` saying `partial` and why).
 */
import { createHash } from "node:crypto";
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { isRecord } from "../core/json.js";
import { lineLabel } from "../core/rank-identity.js";
import type { HistogramData, SampleRecord } from "../core/reduce.js";
import { writeFileAtomicSync } from "../io/atomic-write.js";
import { pathSegmentProblem } from "../run/run-dir.js";
import { ColumnBuilder } from "../store/columns.js";
import { GLOBAL_RANK } from "../store/schema.js";
import type { HistogramWrite, LineWrite, RawPoint, SampleWrite } from "../store/write-batch.js";
import { StoreWriter } from "../store/writer.js";

/** The file in an imported run's directory that says what it was imported from. */
export const IMPORT_FILE = "import.json";

/** Points buffered before they are written in one transaction. */
const FLUSH_POINTS = 1 << 20;

/** A bad or truncated input: the file, the record (1-based, as the format counts them) and what was wrong. */
export class ImportError extends Error {
  constructor(
    readonly file: string,
    readonly record: string,
    readonly reason: string,
  ) {
    super(`${file}: ${record}: ${reason}`);
    this.name = "ImportError";
  }
}

/** What `import.json` records. */
export interface ImportRecord {
  readonly format: string;
  readonly source: string;
  readonly fingerprint: string;
  readonly status: "complete" | "partial";
  readonly error?: string;
  readonly points: number;
  readonly records: number;
}

/** Where an import goes and what it comes from. */
export interface ImportRunOptions {
  readonly root: string;
  readonly experiment: string;
  readonly trial: string;
  /** The importer's name (`csv`, `jsonl`, `tensorboard`, …). */
  readonly format: string;
  /** The source as the user named it (a file or a directory). */
  readonly source: string;
  /** `fingerprintFiles` of the source's files. */
  readonly fingerprint: string;
}

/** A SHA-256 over files' paths (as given) and bytes, in the order given. */
export function fingerprintFiles(files: readonly string[]): string {
  const hash = createHash("sha256");
  const buffer = Buffer.allocUnsafe(1 << 20);
  for (const file of files) {
    hash.update(`${file}\u0000${statSync(file).size}\u0000`);
    const fd = openSync(file, "r");
    try {
      for (let n = readSync(fd, buffer); n > 0; n = readSync(fd, buffer)) hash.update(buffer.subarray(0, n));
    } finally {
      closeSync(fd);
    }
  }
  return hash.digest("hex");
}

/** The `import.json` of a run directory, or null when there is none (or it is not one). */
export function readImportRecord(runDir: string): ImportRecord | null {
  const path = join(runDir, IMPORT_FILE);
  if (!existsSync(path)) return null;
  const parsed: unknown = JSON.parse(readFileSync(path, "utf8"));
  if (!isRecord(parsed)) return null;
  const { format, source, fingerprint, status, points, records } = parsed;
  if (typeof format !== "string" || typeof source !== "string" || typeof fingerprint !== "string") return null;
  if (status !== "complete" && status !== "partial") return null;
  return {
    format,
    source,
    fingerprint,
    status,
    points: typeof points === "number" ? points : 0,
    records: typeof records === "number" ? records : 0,
    ...(typeof parsed["error"] === "string" ? { error: parsed["error"] } : {}),
  };
}

/** A source as `import.json` names it: a URL as it is, a path made absolute. */
function sourceName(source: string): string {
  return /^[a-z]+:\/\//i.test(source) ? source : resolve(source);
}

/** A name made a valid folder name (`/` and control characters replaced), for trials taken from paths. */
export function folderName(text: string): string {
  // eslint-disable-next-line no-control-regex
  const name = text.replace(/[/\\]+/g, "-").replace(/[\u0000-\u001f\u007f]/g, "_");
  return name === "" || name === "." || name === ".." ? `_${name}` : name;
}

/** What `ImportRun.begin` found: a run to write, or an unchanged source already imported. */
export type ImportStart =
  | { readonly kind: "write"; readonly run: ImportRun }
  | { readonly kind: "unchanged"; readonly runDir: string; readonly record: ImportRecord };

/** One imported run being written. Points are buffered and written a million at a time. */
export class ImportRun {
  private scalars = new ColumnBuilder();
  private streams = new ColumnBuilder();
  private system: RawPoint[] = [];
  private histograms: HistogramWrite[] = [];
  private samples: SampleWrite[] = [];
  private readonly lines = new Set<number>([GLOBAL_RANK]);
  private newLines: LineWrite[] = [];
  private buffered = 0;
  private firstWall = Infinity;
  private lastWall = -Infinity;
  /** Points written so far (scalars, streams, system metrics). */
  points = 0;
  /** Records written so far (histograms, samples). */
  records = 0;

  private constructor(
    readonly runDir: string,
    private readonly options: ImportRunOptions,
    private readonly writer: StoreWriter,
  ) {}

  /**
   * Start an import: nothing to do when the run directory holds a complete import of the same
   * source; an earlier import of it (changed, or stopped at a bad record) is removed first. A
   * directory holding anything else is an Error.
   */
  static begin(options: ImportRunOptions): ImportStart {
    for (const [what, name] of [
      ["experiment", options.experiment],
      ["trial", options.trial],
    ] as const) {
      const problem = pathSegmentProblem(name);
      if (problem !== null) throw new TypeError(`${what} ${JSON.stringify(name)} ${problem}`);
    }
    const runDir = resolve(options.root, options.experiment, options.trial);
    const earlier = existsSync(runDir) ? readImportRecord(runDir) : null;
    if (earlier !== null && earlier.status === "complete" && earlier.fingerprint === options.fingerprint)
      return { kind: "unchanged", runDir, record: earlier };
    if (earlier === null && existsSync(runDir) && readdirSync(runDir).length > 0) {
      throw new Error(
        `${runDir} already holds a run that was not imported (no ${IMPORT_FILE}); give another --experiment or --trial`,
      );
    }
    if (earlier !== null && earlier.source !== sourceName(options.source))
      throw new Error(
        `${runDir} holds an import of ${earlier.source}, not of ${sourceName(options.source)}; give another --experiment or --trial`,
      );
    if (earlier !== null) rmSync(runDir, { recursive: true, force: true });
    const writer = StoreWriter.open({
      runDir,
      role: "controller",
      rank: GLOBAL_RANK,
      rankName: "global",
      experiment: options.experiment,
      trial: options.trial,
    });
    return { kind: "write", run: new ImportRun(runDir, options, writer) };
  }

  private line(rank: number): void {
    if (this.lines.has(rank)) return;
    this.lines.add(rank);
    this.newLines.push({ line: rank, name: lineLabel(rank) });
  }

  private noteWall(wall: number): void {
    if (wall < this.firstWall) this.firstWall = wall;
    if (wall > this.lastWall) this.lastWall = wall;
  }

  private added(): void {
    if (++this.buffered >= FLUSH_POINTS) this.flush();
  }

  /** A point of a scalar series (`rank`: the line, `GLOBAL_RANK` for a job's reduced values). */
  scalar(key: string, rank: number, step: number, wall: number, value: number): void {
    this.line(rank);
    this.noteWall(wall);
    this.scalars.add(key, rank, step, wall, value);
    this.added();
  }

  /** A raw value of a stream, in arrival order. */
  stream(key: string, rank: number, step: number, wall: number, value: number): void {
    this.line(rank);
    this.noteWall(wall);
    this.streams.add(key, rank, step, wall, value);
    this.added();
  }

  /** A system-monitor sample. */
  systemPoint(key: string, rank: number, step: number, wall: number, value: number): void {
    this.line(rank);
    this.noteWall(wall);
    this.system.push({ key, rank, step, wall, value });
    this.added();
  }

  /** A histogram of a key at a step. */
  histogram(key: string, step: number, wall: number, histogram: HistogramData): void {
    this.noteWall(wall);
    this.histograms.push({ key, step, wall, histogram });
    this.added();
  }

  /** Sample records (text, table rows) of a key at a step. */
  sample(key: string, step: number, wall: number, records: readonly SampleRecord[]): void {
    this.noteWall(wall);
    this.samples.push({ key, step, wall, records });
    this.added();
  }

  /** Merged into the run's hyperparameters. */
  hyperparams(params: Readonly<Record<string, unknown>>): void {
    this.flush();
    this.writer.writeHyperparams(params);
  }

  /** Write what is buffered, in one transaction. */
  flush(): void {
    if (this.buffered === 0 && this.newLines.length === 0) return;
    const scalars = this.scalars.length > 0 ? this.scalars.build() : undefined;
    const streams = this.streams.length > 0 ? this.streams.build() : undefined;
    this.writer.write({
      ...(scalars === undefined ? {} : { scalarColumns: scalars }),
      ...(streams === undefined ? {} : { streamColumns: streams }),
      system: this.system,
      histograms: this.histograms,
      samples: this.samples,
      lines: this.newLines,
    });
    this.points += (scalars?.steps.length ?? 0) + (streams?.steps.length ?? 0) + this.system.length;
    this.records += this.histograms.length + this.samples.length;
    this.scalars = new ColumnBuilder();
    this.streams = new ColumnBuilder();
    this.system = [];
    this.histograms = [];
    this.samples = [];
    this.newLines = [];
    this.buffered = 0;
  }

  /**
   * Write the rest and close the run: `finished` and `import.json` `complete`, or, with the error
   * that stopped it, `failed` and `partial` (what was imported stays). The run's start and end
   * are its data's first and last wall times.
   */
  end(error?: unknown): ImportRecord {
    try {
      this.flush();
    } finally {
      const times = this.firstWall <= this.lastWall ? { startedAt: this.firstWall, endedAt: this.lastWall } : {};
      this.writer.finish(error === undefined ? "finished" : "failed", times);
    }
    const record: ImportRecord = {
      format: this.options.format,
      source: sourceName(this.options.source),
      fingerprint: this.options.fingerprint,
      status: error === undefined ? "complete" : "partial",
      ...(error === undefined ? {} : { error: error instanceof Error ? error.message : String(error) }),
      points: this.points,
      records: this.records,
    };
    writeFileAtomicSync(join(this.runDir, IMPORT_FILE), `${JSON.stringify(record, null, 2)}\n`);
    return record;
  }
}
