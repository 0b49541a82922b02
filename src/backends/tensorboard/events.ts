/**
 * What rankscope's data becomes in a tfevents file: one `Event` per kind of data and point in time,
 * encoded with protobufjs (unframed; `record.ts` frames them).
 *
 * - Scalars: `Summary.Value.simple_value`, the form every TensorBoard reader (the Python event
 *   accumulator and the Rust data server) turns into a scalar-plugin point. It is a float32, like
 *   every scalar TensorBoard stores; NaN and ±Infinity keep their meaning.
 * - Histograms: `Summary.Value.histo` (`HistogramProto`), which TensorBoard converts for its
 *   histograms plugin.
 * - Text: a string tensor with `text` plugin metadata; samples become a table.
 * - Hyperparameters: the `hparams` plugin's `SessionStartInfo`, under the tag the plugin looks for.
 * - Resume: a `SessionLog` with status START at the resumed step.
 */
import { isRecord, jsonText, numberText } from "../../core/json.js";
import { contiguousBuckets } from "../../core/accumulators/histogram.js";
import type { HistogramData, SampleRecord } from "../../core/reduce.js";
import { DT_FLOAT, DT_STRING, EventType, FILE_VERSION, HParamsPluginDataType, SESSION_START } from "./proto.js";

/** Anything with a key, a value, a step and a time in ms: reduced metrics and stream records alike. */
export interface ScalarPoint {
  readonly key: string;
  readonly value: number;
  readonly step: number;
  /** Milliseconds since the epoch. */
  readonly timestamp: number;
}

/** Tag under which the hparams plugin looks for a session's start info. */
const SESSION_START_INFO_TAG = "_hparams_/session_start_info";

const textPluginMetadata = { plugin_data: { plugin_name: "text", content: new Uint8Array(0) } };

function encodeEvent(event: Record<string, unknown>): Uint8Array {
  return EventType.encode(event).finish();
}

/** The record every event file starts with. */
export function fileVersionEvent(wallTimeMs: number): Uint8Array {
  return encodeEvent({ wall_time: wallTimeMs / 1000, file_version: FILE_VERSION });
}

/** `SessionLog START` at `step`: TensorBoard drops points at or after it left by an earlier attempt. */
export function sessionStartEvent(step: number, wallTimeMs: number): Uint8Array {
  return encodeEvent({ wall_time: wallTimeMs / 1000, step, session_log: { status: SESSION_START } });
}

/**
 * Scalar events: consecutive points that share a step and a time go into one event (a flush's
 * metrics are one event; stream records with their own times are one event each).
 * `tagOf` maps a key to its tag.
 */
export function scalarEvents(points: readonly ScalarPoint[], tagOf: (key: string) => string = identity): Uint8Array[] {
  const events: Uint8Array[] = [];
  const encode = (first: ScalarPoint, values: { tag: string; simple_value: number }[]): void => {
    events.push(encodeEvent({ wall_time: first.timestamp / 1000, step: first.step, summary: { value: values } }));
  };
  let first: ScalarPoint | undefined;
  let values: { tag: string; simple_value: number }[] = [];
  for (const p of points) {
    if (first !== undefined && (p.step !== first.step || p.timestamp !== first.timestamp)) {
      encode(first, values);
      values = [];
      first = undefined;
    }
    first ??= p;
    values.push({ tag: tagOf(p.key), simple_value: p.value });
  }
  if (first !== undefined) encode(first, values);
  return events;
}

function identity(key: string): string {
  return key;
}

/** Buckets as `HistogramProto` wants them: `contiguousBuckets` (core/accumulators/histogram.ts). */
export const histogramBuckets = contiguousBuckets;

/** One event holding the histograms of a flush (all at `step`, at `wallTimeMs`). */
export function histogramEvent(
  histograms: readonly { tag: string; data: HistogramData }[],
  step: number,
  wallTimeMs: number,
): Uint8Array {
  const value = histograms.map(({ tag, data }) => {
    const { limits, counts } = histogramBuckets(data);
    return {
      tag,
      histo: {
        min: data.min,
        max: data.max,
        num: data.count,
        sum: data.sum,
        sum_squares: data.sumSquares,
        bucket_limit: limits,
        bucket: counts,
      },
    };
  });
  return encodeEvent({ wall_time: wallTimeMs / 1000, step, summary: { value } });
}

/** A sample field's value as table text: strings as they are, numbers as `numberText`, bigints' digits, anything else as JSON (NaN kept). */
export function cellText(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "number") return numberText(value);
  if (typeof value === "bigint") return value.toString();
  if (value === undefined) return "";
  return jsonText(value);
}

/**
 * Records as a table: the first row names the fields (in the order they first appear), then one
 * row per record. Returned row-major with its shape, as a rank-2 string tensor wants it.
 */
function sampleTable(records: readonly SampleRecord[]): { rows: number; columns: number; cells: string[] } {
  const fields: string[] = [];
  const seen = new Set<string>();
  for (const r of records) {
    for (const f of Object.keys(r)) {
      if (!seen.has(f)) {
        seen.add(f);
        fields.push(f);
      }
    }
  }
  const cells = [...fields];
  for (const r of records) for (const f of fields) cells.push(cellText(r[f]));
  return { rows: records.length + 1, columns: fields.length, cells };
}

const utf8 = new TextEncoder();

/** One event holding sample tables (text plugin), one value per key. Keys without records are left out. */
export function textEvent(
  tables: readonly { tag: string; records: readonly SampleRecord[] }[],
  step: number,
  wallTimeMs: number,
): Uint8Array | null {
  const value = [];
  for (const { tag, records } of tables) {
    if (records.length === 0) continue;
    const table = sampleTable(records);
    if (table.columns === 0) continue;
    value.push({
      tag,
      metadata: textPluginMetadata,
      tensor: {
        dtype: DT_STRING,
        tensor_shape: { dim: [{ size: table.rows }, { size: table.columns }] },
        string_val: table.cells.map((c) => utf8.encode(c)),
      },
    });
  }
  if (value.length === 0) return null;
  return encodeEvent({ wall_time: wallTimeMs / 1000, step, summary: { value } });
}

/** The largest integer every double holds exactly (2^53). */
const MAX_EXACT = 2n ** 53n;

/** A hyperparameter value as `google.protobuf.Value`. */
type HParamValue = { number_value: number } | { string_value: string } | { bool_value: boolean };

/**
 * Flatten a config into hyperparameters the hparams plugin shows: nested objects become dotted
 * names (`optimizer.lr`), numbers/strings/booleans stay as they are, bigints are numbers up to
 * ±2^53 and their digits (text) beyond, arrays and anything else become their JSON text, null
 * becomes "null", undefined and functions are left out.
 */
export function flattenHyperparams(params: Readonly<Record<string, unknown>>): Map<string, HParamValue> {
  const out = new Map<string, HParamValue>();
  const visit = (prefix: string, value: unknown, depth: number): void => {
    if (value === undefined || typeof value === "function" || typeof value === "symbol") return;
    if (typeof value === "number") out.set(prefix, { number_value: value });
    // A double holds a bigint exactly up to 2^53; beyond, its digits, exactly, as text.
    else if (typeof value === "bigint")
      out.set(
        prefix,
        -MAX_EXACT <= value && value <= MAX_EXACT
          ? { number_value: Number(value) }
          : { string_value: value.toString() },
      );
    else if (typeof value === "boolean") out.set(prefix, { bool_value: value });
    else if (typeof value === "string") out.set(prefix, { string_value: value });
    else if (value === null) out.set(prefix, { string_value: "null" });
    else if (value instanceof Date) out.set(prefix, { string_value: value.toISOString() });
    else if (isRecord(value) && depth < 32) {
      for (const [k, v] of Object.entries(value)) visit(prefix === "" ? k : `${prefix}.${k}`, v, depth + 1);
    } else out.set(prefix, { string_value: cellText(value) });
  };
  for (const [k, v] of Object.entries(params)) visit(k, v, 0);
  return out;
}

/**
 * The hparams plugin's session start: the flattened config, so the HParams tab lists this run
 * with its values (metrics are the run's scalars). Written at step 0, as the plugin's own
 * summary writer does.
 */
export function hparamsEvent(params: Readonly<Record<string, unknown>>, wallTimeMs: number): Uint8Array {
  // version 0, the plugin's current one, is proto3's default and so not written.
  const content = HParamsPluginDataType.encode({
    session_start_info: { hparams: Object.fromEntries(flattenHyperparams(params)), start_time_secs: wallTimeMs / 1000 },
  }).finish();
  return encodeEvent({
    wall_time: wallTimeMs / 1000,
    step: 0,
    summary: {
      value: [
        {
          tag: SESSION_START_INFO_TAG,
          metadata: { plugin_data: { plugin_name: "hparams", content } },
          // The plugin's own "null tensor" (an empty float vector, dim size 0): readers skip values without one.
          tensor: { dtype: DT_FLOAT, tensor_shape: { dim: [{}] } },
        },
      ],
    },
  });
}
