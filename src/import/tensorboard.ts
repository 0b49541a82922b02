/**
 * TensorBoard log directories: every directory holding event files (`*tfevents*`) is one run, as
 * TensorBoard itself lists them, named by its path under the log directory; a run's event files
 * are read in name order (their names start with the time they were opened). Records are taken
 * out of their TFRecord framing and decoded with the `tensorboard` backend's own code
 * (`backends/tensorboard/record.ts`, `proto.ts`), both CRCs checked.
 *
 * What becomes what:
 * - scalars: `simple_value` (TF1, tensorboardX, rankscope) and scalar tensors (TF2's
 *   `tf.summary.scalar`, the `scalars` plugin: float, double, half, int32, int64, bool) → a scalar
 *   point of the tag, at the event's step and wall time;
 * - histograms: `HistogramProto` (`histo`) as it is; TF2's `histograms` tensors (k × 3: left edge,
 *   right edge, count) → buckets with their right edges as limits, count their total, min the first
 *   left edge, max the last right edge, sum and sum of squares NaN (the tensor has none);
 * - text (`text` plugin): a string tensor → sample records, `{ text }` per string, or, for a
 *   table (rank 2, two rows or more), one record per row after the first, which names the fields
 *   (the `tensorboard` backend writes samples that way);
 * - hparams (`hparams` plugin): a session's start info → the run's hyperparameters;
 * - anything else (images, audio, graphs, other plugins' tensors) is counted as skipped.
 */
import { closeSync, openSync, readdirSync, readSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { readRecord } from "../backends/tensorboard/record.js";
import { DT_STRING, EventType } from "../backends/tensorboard/proto.js";
import { GLOBAL_RANK } from "../store/schema.js";
import { ImportError, type ImportRun } from "./import-run.js";
import {
  arrayOf,
  get,
  histogramOfProto,
  histogramOfTensor,
  hparamsOf,
  numberOf,
  tensorNumbers,
  textRecords,
} from "./tensorboard-values.js";

/** One TensorBoard run: a directory with event files. */
export interface TensorBoardRun {
  readonly dir: string;
  /** Its path under the log directory ("." for the log directory itself). */
  readonly name: string;
  /** Its event files, in name order. */
  readonly files: readonly string[];
}

/** Whether a file name is an event file's (TensorBoard's own test: the name contains `tfevents`). */
function isEventFile(name: string): boolean {
  return name.includes("tfevents");
}

/** Every run under `logdir` (itself included), sorted by name. */
export function findTensorBoardRuns(logdir: string): TensorBoardRun[] {
  if (!statSync(logdir).isDirectory())
    throw new Error(`${logdir} is not a directory (give a TensorBoard log directory)`);
  const runs: TensorBoardRun[] = [];
  const walk = (dir: string): void => {
    const entries = readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1));
    const files = entries.filter((e) => e.isFile() && isEventFile(e.name)).map((e) => join(dir, e.name));
    if (files.length > 0) runs.push({ dir, name: relative(logdir, dir) || ".", files });
    for (const e of entries) if (e.isDirectory()) walk(join(dir, e.name));
  };
  walk(logdir);
  return runs;
}

/** What a run's import found besides the points. */
export interface TensorBoardCounts {
  events: number;
  /** Values of kinds not imported (images, audio, other plugins), by plugin or field. */
  readonly skipped: Map<string, number>;
}

/** A protobuf varint of `b` at `at`: its value (exact up to 2^53) and the offset after it; null past `end`. */
function varint(b: Buffer, at: number, end: number): [number, number] | null {
  let value = 0;
  let scale = 1;
  for (let i = at; i < end && i < at + 10; i++) {
    const byte = b[i] ?? 0;
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return [value, i + 1];
    scale *= 128;
  }
  return null;
}

/**
 * The hot shape of an event file, decoded without building messages: an `Event` whose fields are
 * only `wall_time`, a non-negative `step` and a `summary` whose values are only a `tag` and a
 * `simple_value` (what tensorboardX's `add_scalar`, TF1's scalar summaries and rankscope's own
 * backend write, one event per point or per flush), when `scalars` accepts every tag of it (none
 * declared by another plugin). Each scalar goes to `take`; false (nothing taken) for any other event, which then goes through `EventType.decode`. Field numbers are
 * `proto.ts`'s. Decoding messages made the importer allocation-bound: 1 tag per event ran at
 * 0.86 M points per CPU-second, under issue 39's 1 M/s (BENCHMARKS.md, "Import").
 */
function simpleScalars(
  b: Buffer,
  scalars: {
    accepts(tag: string): boolean;
    take(tag: string, step: number, wall: number, value: number): void;
  },
): boolean {
  let wall = 0;
  let step = 0;
  let summary: [number, number] | null = null;
  for (let at = 0; at < b.length;) {
    const key = b[at++] ?? 0;
    if (key === 0x09 && at + 8 <= b.length) {
      wall = b.readDoubleLE(at) * 1000; // 1: wall_time, double
      at += 8;
    } else if (key === 0x10) {
      const v = varint(b, at, b.length); // 2: step, int64 (a negative one takes the general path)
      if (v === null || v[0] > Number.MAX_SAFE_INTEGER) return false;
      [step, at] = v;
    } else if (key === 0x2a) {
      const len = varint(b, at, b.length); // 5: summary
      if (len === null || len[1] + len[0] > b.length || summary !== null) return false;
      summary = [len[1], len[1] + len[0]];
      at = summary[1];
    } else return false;
  }
  if (summary === null) return false;
  const values: [string, number][] = [];
  for (let at = summary[0]; at < summary[1];) {
    if (b[at++] !== 0x0a) return false; // Summary.value (1)
    const len = varint(b, at, summary[1]);
    if (len === null) return false;
    const end = len[1] + len[0];
    let tag: string | null = null;
    let value: number | null = null;
    for (at = len[1]; at < end;) {
      const key = b[at++];
      if (key === 0x0a) {
        const t = varint(b, at, end); // Value.tag (1)
        if (t === null || t[1] + t[0] > end) return false;
        tag = b.toString("utf8", t[1], t[1] + t[0]);
        at = t[1] + t[0];
      } else if (key === 0x15 && at + 4 <= end) {
        value = b.readFloatLE(at); // Value.simple_value (2), float
        at += 4;
      } else return false;
    }
    if (tag === null || value === null) return false;
    values.push([tag, value]);
  }
  if (values.length === 0 || values.some(([tag]) => !scalars.accepts(tag))) return false;
  for (const [tag, value] of values) scalars.take(tag, step, wall, value);
  return true;
}

/** Reads one run's events into an import run. */
class EventSink {
  /** The plugin of each tag, from the first value that carried its metadata. */
  private readonly plugins = new Map<string, string>();
  readonly counts: TensorBoardCounts = { events: 0, skipped: new Map() };

  /** Where the fast path's scalars go: tags no other plugin declared. */
  private readonly scalars = {
    accepts: (tag: string): boolean => {
      const plugin = this.plugins.get(tag);
      return plugin === undefined || plugin === "scalars";
    },
    take: (tag: string, step: number, wall: number, value: number): void =>
      this.run.scalar(tag, GLOBAL_RANK, step, wall, value),
  };

  constructor(private readonly run: ImportRun) {}

  private skip(what: string): void {
    this.counts.skipped.set(what, (this.counts.skipped.get(what) ?? 0) + 1);
  }

  event(data: Buffer): void {
    this.counts.events++;
    if (simpleScalars(data, this.scalars)) return;
    const event = EventType.decode(data);
    const summary = get(event, "summary");
    if (summary === undefined || summary === null) return;
    const step = numberOf(get(event, "step"));
    const wall = numberOf(get(event, "wall_time")) * 1000;
    for (const value of arrayOf(get(summary, "value"))) this.value(value, step, wall);
  }

  private value(value: unknown, step: number, wall: number): void {
    const tag = get(value, "tag");
    if (typeof tag !== "string") return;
    const declared = get(get(get(value, "metadata"), "plugin_data"), "plugin_name");
    if (typeof declared === "string" && declared !== "" && !this.plugins.has(tag)) this.plugins.set(tag, declared);
    const plugin = this.plugins.get(tag) ?? "";
    if (plugin === "hparams") {
      // The plugin's data is its metadata's content; the value may have no tensor (tensorboardX).
      const params = hparamsOf(get(get(get(value, "metadata"), "plugin_data"), "content"));
      if (params !== null) this.run.hyperparams(params);
      return;
    }
    switch (get(value, "value")) {
      case "simple_value":
        this.run.scalar(tag, GLOBAL_RANK, step, wall, numberOf(get(value, "simple_value")));
        return;
      case "histo":
        this.run.histogram(tag, step, wall, histogramOfProto(get(value, "histo")));
        return;
      case "tensor":
        this.tensor(tag, plugin, get(value, "tensor"), step, wall);
        return;
      default:
        this.skip(plugin === "" ? "values without data (images, audio or others)" : plugin);
    }
  }

  private tensor(tag: string, plugin: string, tensor: unknown, step: number, wall: number): void {
    if (plugin === "text" || (plugin === "" && numberOf(get(tensor, "dtype")) === DT_STRING)) {
      const records = textRecords(tensor);
      if (records.length > 0) this.run.sample(tag, step, wall, records);
      return;
    }
    if (plugin === "histograms") {
      const histogram = histogramOfTensor(tensor);
      if (histogram !== null) this.run.histogram(tag, step, wall, histogram);
      else this.skip("histograms (not k × 3)");
      return;
    }
    if (plugin === "scalars" || plugin === "") {
      const values = tensorNumbers(tensor);
      if (values !== null && values.length === 1) {
        this.run.scalar(tag, GLOBAL_RANK, step, wall, values[0] ?? NaN);
        return;
      }
    }
    this.skip(plugin === "" ? "tensors that are not one number" : plugin);
  }
}

/** Bytes read from an event file at a time. */
const READ_BYTES = 8 << 20;

/** Read one event file's records into `sink`. */
function readEventFile(file: string, sink: EventSink): void {
  const fd = openSync(file, "r");
  let buffer = Buffer.allocUnsafe(READ_BYTES);
  let start = 0;
  let end = 0;
  let record = 0;
  let position = 0;
  try {
    for (;;) {
      const read = readSync(fd, buffer, end, buffer.length - end, null);
      end += read;
      for (;;) {
        const found = readRecord(buffer, start, end);
        if (found.kind === "record") {
          record++;
          try {
            sink.event(found.data);
          } catch (error) {
            throw new ImportError(file, `record ${record} (byte ${position})`, `is not an Event: ${String(error)}`);
          }
          position += found.next - start;
          start = found.next;
          continue;
        }
        if (found.kind === "bad") throw new ImportError(file, `record ${record + 1} (byte ${position})`, found.reason);
        if (read === 0) {
          if (start === end) return;
          throw new ImportError(
            file,
            `record ${record + 1} (byte ${position})`,
            `is truncated: the file ends ${end - start} bytes into it (a record of ${found.need} bytes)`,
          );
        }
        // Keep the partial record at the buffer's start, growing the buffer for a record longer than it.
        const size = Math.max(buffer.length, found.need);
        const next = size > buffer.length ? Buffer.allocUnsafe(size) : buffer;
        buffer.copy(next, 0, start, end);
        buffer = next;
        end -= start;
        start = 0;
        break;
      }
    }
  } finally {
    closeSync(fd);
  }
}

/** Import one TensorBoard run's event files into `run`. */
export function importTensorBoardRun(tbRun: TensorBoardRun, run: ImportRun): TensorBoardCounts {
  const sink = new EventSink(run);
  for (const file of tbRun.files) readEventFile(file, sink);
  return sink.counts;
}
