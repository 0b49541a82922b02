/**
 * What the values of a decoded TensorBoard event hold, as rankscope's values: numbers of scalar
 * tensors (every numeric dtype, as values or packed content), histograms (`HistogramProto`, TF2's
 * k × 3 tensors), text tensors as sample records, the hparams plugin's session start as
 * hyperparameters. Messages are protobufjs's, read field by field (`get`) without casts.
 */
import type { HistogramData, SampleRecord } from "../core/reduce.js";
import {
  DT_BOOL,
  DT_DOUBLE,
  DT_FLOAT,
  DT_HALF,
  DT_INT32,
  DT_INT64,
  HParamsPluginDataType,
} from "../backends/tensorboard/proto.js";

/** A field of a decoded message (protobufjs messages are plain objects with fields as properties). */
export function get(message: unknown, name: string): unknown {
  return typeof message === "object" && message !== null ? Reflect.get(message, name) : undefined;
}

/** A number field: a number, or an int64 as protobufjs gives it (`{ low, high }`). */
export function numberOf(value: unknown): number {
  if (typeof value === "number") return value;
  const low = get(value, "low");
  const high = get(value, "high");
  if (typeof low === "number" && typeof high === "number") {
    const unsigned = get(value, "unsigned") === true;
    return (unsigned ? high >>> 0 : high) * 0x100000000 + (low >>> 0);
  }
  return 0;
}

export function arrayOf(value: unknown): readonly unknown[] {
  return Array.isArray(value) ? value : [];
}

/** An IEEE half-precision number from its 16 bits. */
function halfToNumber(bits: number): number {
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  const sign = bits & 0x8000 ? -1 : 1;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 0x1f) return fraction === 0 ? sign * Infinity : NaN;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

/** A numeric tensor's values (its `*_val` field, or its packed `tensor_content`); null for other dtypes. */
export function tensorNumbers(tensor: unknown): number[] | null {
  const dtype = numberOf(get(tensor, "dtype"));
  const content = get(tensor, "tensor_content");
  const packed = content instanceof Uint8Array && content.length > 0 ? Buffer.from(content) : null;
  const read = (size: number, at: (b: Buffer, offset: number) => number): number[] | null => {
    if (packed === null) return null;
    const out: number[] = [];
    for (let o = 0; o + size <= packed.length; o += size) out.push(at(packed, o));
    return out;
  };
  switch (dtype) {
    case DT_FLOAT:
      return read(4, (b, o) => b.readFloatLE(o)) ?? arrayOf(get(tensor, "float_val")).map(numberOf);
    case DT_DOUBLE:
      return read(8, (b, o) => b.readDoubleLE(o)) ?? arrayOf(get(tensor, "double_val")).map(numberOf);
    case DT_HALF:
      return (
        read(2, (b, o) => halfToNumber(b.readUInt16LE(o))) ??
        arrayOf(get(tensor, "half_val")).map((v) => halfToNumber(numberOf(v)))
      );
    case DT_INT32:
      return read(4, (b, o) => b.readInt32LE(o)) ?? arrayOf(get(tensor, "int_val")).map(numberOf);
    case DT_INT64:
      return read(8, (b, o) => Number(b.readBigInt64LE(o))) ?? arrayOf(get(tensor, "int64_val")).map(numberOf);
    case DT_BOOL:
      return read(1, (b, o) => b.readUInt8(o)) ?? arrayOf(get(tensor, "bool_val")).map((v) => (v === true ? 1 : 0));
    default:
      return null;
  }
}

/** A tensor's shape: its dimensions' sizes. */
function shapeOf(tensor: unknown): number[] {
  return arrayOf(get(get(tensor, "tensor_shape"), "dim")).map((d) => numberOf(get(d, "size")));
}

const utf8 = new TextDecoder();

/** A string tensor as sample records: a table's rows after its first (the field names), else `{ text }` each. */
export function textRecords(tensor: unknown): SampleRecord[] {
  const cells = arrayOf(get(tensor, "string_val")).map((b) => (b instanceof Uint8Array ? utf8.decode(b) : ""));
  const shape = shapeOf(tensor);
  const [rows, columns] = shape;
  if (shape.length === 2 && rows !== undefined && columns !== undefined && rows >= 2 && columns > 0) {
    const fields = cells.slice(0, columns);
    const records: SampleRecord[] = [];
    for (let r = 1; r < rows; r++)
      records.push(Object.fromEntries(fields.map((f, c) => [f, cells[r * columns + c] ?? ""])));
    return records;
  }
  return cells.map((text) => ({ text }));
}

/** A `HistogramProto` as rankscope's histogram. */
export function histogramOfProto(histo: unknown): HistogramData {
  const n = (name: string): number => numberOf(get(histo, name));
  return {
    count: n("num"),
    min: n("min"),
    max: n("max"),
    sum: n("sum"),
    sumSquares: n("sum_squares"),
    bucketLimits: arrayOf(get(histo, "bucket_limit")).map(numberOf),
    bucketCounts: arrayOf(get(histo, "bucket")).map(numberOf),
  };
}

/** A TF2 histogram tensor (k rows of left edge, right edge, count) as rankscope's histogram; null when it is not one. */
export function histogramOfTensor(tensor: unknown): HistogramData | null {
  const values = tensorNumbers(tensor);
  const shape = shapeOf(tensor);
  if (values === null || shape.length !== 2 || shape[1] !== 3) return null;
  const limits: number[] = [];
  const counts: number[] = [];
  for (let i = 0; i + 2 < values.length; i += 3) {
    limits.push(values[i + 1] ?? NaN);
    counts.push(values[i + 2] ?? 0);
  }
  return {
    count: counts.reduce((a, b) => a + b, 0),
    min: values.length > 0 ? (values[0] ?? NaN) : NaN,
    max: values.length > 0 ? (values[values.length - 2] ?? NaN) : NaN,
    sum: NaN,
    sumSquares: NaN,
    bucketLimits: limits,
    bucketCounts: counts,
  };
}

/** The hyperparameters of an hparams plugin's content, or null when it holds no session start. */
export function hparamsOf(content: unknown): Record<string, unknown> | null {
  if (!(content instanceof Uint8Array)) return null;
  const info = get(HParamsPluginDataType.decode(content), "session_start_info");
  const hparams = get(info, "hparams");
  if (typeof hparams !== "object" || hparams === null) return null;
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(hparams)) {
    const kind = get(value, "kind");
    out[name] = typeof kind === "string" ? get(value, kind) : null;
  }
  return out;
}
