/**
 * W&B offline runs (`offline-run-…/run-{id}.wandb`, what `wandb.init(mode="offline")` writes):
 * the transaction log read with the `wandb` backend's own framing and `Record` descriptor
 * (`backends/wandb/offline/offline-run.ts`), one rankscope run per offline run.
 *
 * - history rows: every number of a row is a scalar point at the row's `_step` and wall time
 *   (`_timestamp`); a key declared with `define_metric(key, step_metric=x)` (by name or glob) is at
 *   the row's value of `x` instead (its last value when the row has none, as W&B's `step_sync`
 *   does), the custom x-axis the user declared;
 * - tables logged in history (`_type: "table-file"`, the table's JSON in `files/`) → sample records;
 * - config → the run's hyperparameters (W&B's own `_wandb` left out);
 * - summary: numbers set there and never logged in history (`run.summary["best"] = …`) → a point at
 *   the run's last step.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { isRecord } from "../core/json.js";
import type { SampleRecord } from "../core/reduce.js";
import { parseHistoryJson } from "../backends/wandb/client/history.js";
import { readTransactionLog, WandbRecord } from "../backends/wandb/offline/offline-run.js";
import { GLOBAL_RANK } from "../store/schema.js";
import { ImportError, type ImportRun } from "./import-run.js";
import { arrayOf, get } from "./tensorboard-values.js";

/** One W&B offline run directory. */
export interface WandbRun {
  readonly dir: string;
  readonly id: string;
  /** Its `.wandb` transaction log. */
  readonly file: string;
}

/** The offline runs under `path`: itself, or its `offline-run-*` / `run-*` directories at any depth (a `wandb/` folder). */
export function findWandbRuns(path: string): WandbRun[] {
  const runs: WandbRun[] = [];
  const walk = (dir: string, depth: number): void => {
    const entries = readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1));
    const log = entries.find((e) => e.isFile() && /^run-.+\.wandb$/.test(e.name));
    if (log !== undefined) {
      runs.push({ dir, id: log.name.slice(4, -".wandb".length), file: join(dir, log.name) });
      return;
    }
    if (depth < 4)
      for (const e of entries) if (e.isDirectory() && e.name !== "files") walk(join(dir, e.name), depth + 1);
  };
  walk(path, 0);
  return runs;
}

/** A `value_json` as its value (W&B writes NaN and ±Infinity as bare tokens). */
function valueOf(json: string): unknown {
  return parseHistoryJson(json);
}

/** Items (`key` or `nested_key`, `value_json`) as one object, nested keys as nested objects. */
function itemsObject(items: readonly unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const item of items) {
    const key = get(item, "key");
    const path = typeof key === "string" && key !== "" ? [key] : arrayOf(get(item, "nested_key")).map(String);
    const json = get(item, "value_json");
    if (path.length === 0 || typeof json !== "string") continue;
    let at = out;
    for (const part of path.slice(0, -1)) {
      const next = at[part];
      at = isRecord(next) ? next : (at[part] = {});
    }
    at[path[path.length - 1] ?? ""] = valueOf(json);
  }
  return out;
}

/** `define_metric` declarations: which key is charted against which. */
class StepMetrics {
  private readonly named = new Map<string, string>();
  private readonly globs: [RegExp, string][] = [];
  private readonly last = new Map<string, number>();

  declare(metric: unknown): void {
    const step = get(metric, "step_metric");
    if (typeof step !== "string" || step === "") return;
    const name = get(metric, "name");
    const glob = get(metric, "glob_name");
    if (typeof name === "string" && name !== "") this.named.set(name, step);
    else if (typeof glob === "string" && glob !== "")
      this.globs.push([new RegExp(`^${glob.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*")}$`), step]);
  }

  /** A row's step metrics' values (the last seen for one the row lacks). */
  seen(row: Record<string, unknown>): void {
    for (const step of [...this.named.values(), ...this.globs.map((g) => g[1])]) {
      const v = row[step];
      if (typeof v === "number") this.last.set(step, v);
    }
  }

  /** The x of `key` in this row: its step metric's value, or undefined for the row's `_step`. */
  xOf(key: string): number | undefined | null {
    const step = this.named.get(key) ?? this.globs.find(([re]) => re.test(key))?.[1];
    if (step === undefined) return undefined;
    return this.last.get(step) ?? null;
  }
}

/** Reads one run's records into an import run. */
class RecordSink {
  private readonly steps = new StepMetrics();
  private readonly historyKeys = new Set<string>();
  private summary: Record<string, unknown> = {};
  private lastStep = 0;
  private lastWall = 0;
  skipped = 0;

  constructor(
    private readonly wandbRun: WandbRun,
    private readonly run: ImportRun,
  ) {}

  record(data: Buffer): void {
    const record = WandbRecord.decode(data);
    const kind = get(record, "record_type");
    if (kind === "history") this.history(itemsObject(arrayOf(get(get(record, "history"), "item"))));
    else if (kind === "metric") this.steps.declare(get(record, "metric"));
    else if (kind === "config") this.config(itemsObject(arrayOf(get(get(record, "config"), "update"))));
    else if (kind === "run") this.config(itemsObject(arrayOf(get(get(get(record, "run"), "config"), "update"))));
    else if (kind === "summary")
      Object.assign(this.summary, itemsObject(arrayOf(get(get(record, "summary"), "update"))));
  }

  private config(params: Record<string, unknown>): void {
    delete params["_wandb"];
    if (Object.keys(params).length > 0) this.run.hyperparams(params);
  }

  private history(row: Record<string, unknown>): void {
    const step = typeof row["_step"] === "number" ? row["_step"] : this.lastStep + 1;
    const wall = typeof row["_timestamp"] === "number" ? row["_timestamp"] * 1000 : this.lastWall;
    this.lastStep = step;
    this.lastWall = wall;
    this.steps.seen(row);
    for (const [key, value] of Object.entries(row)) {
      if (key.startsWith("_")) continue;
      this.historyKeys.add(key);
      if (typeof value === "number" || typeof value === "bigint") {
        // W&B's JSON reader gives integers beyond 2^53 as bigints: their nearest double, as W&B charts them.
        const x = this.steps.xOf(key);
        if (x === null) this.skipped++;
        else this.run.scalar(key, GLOBAL_RANK, x ?? step, wall, Number(value));
      } else if (isRecord(value) && value["_type"] === "table-file") this.table(key, value, step, wall);
      else this.skipped++;
    }
  }

  private table(key: string, value: Record<string, unknown>, step: number, wall: number): void {
    const path = value["path"];
    const file = typeof path === "string" ? join(this.wandbRun.dir, "files", path) : "";
    if (!existsSync(file)) {
      this.skipped++;
      return;
    }
    const table: unknown = parseHistoryJson(readFileSync(file, "utf8"));
    const columns = arrayOf(get(table, "columns")).map(String);
    const records: SampleRecord[] = arrayOf(get(table, "data")).map((row) =>
      Object.fromEntries(columns.map((c, i) => [c, arrayOf(row)[i] ?? null])),
    );
    this.run.sample(key, step, wall, records);
  }

  /** Summary numbers never logged in history, at the last step. */
  end(): void {
    for (const [key, value] of Object.entries(this.summary))
      if (!key.startsWith("_") && !this.historyKeys.has(key) && typeof value === "number")
        this.run.scalar(key, GLOBAL_RANK, this.lastStep, this.lastWall, value);
  }
}

/** Import one offline run into `run`; how many values were skipped (non-numbers that are not tables). */
export function importWandbRun(wandbRun: WandbRun, run: ImportRun): number {
  const { records, fault } = readTransactionLog(readFileSync(wandbRun.file));
  const sink = new RecordSink(wandbRun, run);
  for (const [i, data] of records.entries()) {
    try {
      sink.record(data);
    } catch (error) {
      throw new ImportError(wandbRun.file, `record ${i + 1}`, `is not a W&B Record: ${String(error)}`);
    }
  }
  if (fault !== undefined)
    throw new ImportError(wandbRun.file, `record ${records.length + 1} (byte ${fault.offset})`, fault.reason);
  sink.end();
  return sink.skipped;
}
