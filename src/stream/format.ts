/**
 * The stream's JSONL lines, one per record, written by the writer worker. What a line holds, in
 * which key order, and how numbers are written is described once, in docs/stream.md ("Format");
 * a change here changes that page with it.
 *
 * Lines are written as bytes into a `LineBuffer`: the parts that repeat (a key's middle, the
 * timestamp of the current millisecond, the current step's tail) are encoded once and copied.
 */
import { recorderJsonFields, type Recorder } from "../core/rank-identity.js";
import { LineBuffer } from "./line-buffer.js";
import type { Dtype, SlotRecord } from "./ring.js";

/** Longest text of one number in a line (`-1.2345678901234567e-308`, `"-Infinity"`). */
const NUMBER_BYTES = 24;
const COMMA = 44;
const CLOSE_LIST = encode("]}\n");
const VALUES_OPEN = encode(',"values":[');
const LENGTH_FIELD = encode(',"length":');
const DTYPE_FIELDS: Readonly<Record<Dtype, Uint8Array>> = {
  number: encode(',"dtype":"number"'),
  f32: encode(',"dtype":"f32"'),
  f64: encode(',"dtype":"f64"'),
};

function encode(text: string): Uint8Array {
  return new Uint8Array(Buffer.from(text, "utf8"));
}

/** The ISO-8601 text of a timestamp in ms (the epoch for a non-finite one). */
export function isoTime(ms: number): string {
  return Number.isFinite(ms) ? new Date(Math.floor(ms)).toISOString() : "1970-01-01T00:00:00.000Z";
}

/** Who recorded a line, as its fields (`recorderJsonFields`); a bare number is a rank's. */
export function recorderFields(recorder: Recorder | number): string {
  return recorderJsonFields(typeof recorder === "number" ? { role: "rank", rank: recorder, thread: 0 } : recorder);
}

/** Writes stream lines into a LineBuffer (who recorded them is in each key's middle). */
export class StreamLineFormat {
  private headMs = Number.NaN;
  private head: Uint8Array = encode('{"ts":"');
  private tailStep = Number.NaN;
  private tail: Uint8Array = encode("}\n");
  private readonly fields: string;

  /** `recorder`: whose lines these are by default (a rank number, or a recorder). */
  constructor(recorder: Recorder | number) {
    this.fields = recorderFields(recorder);
  }

  /** The constant middle of a key's metric lines: `","rank":0,"key":"loss","value":`. */
  metricMiddle(key: string, fields = this.fields): Uint8Array {
    return encode(`",${fields},"key":${JSON.stringify(key)},"value":`);
  }

  /** The constant middle of a checkpoint's probe lines: `","rank":0,"checkpoint":"logits","index":`. */
  probeMiddle(checkpoint: string, fields = this.fields): Uint8Array {
    return encode(`",${fields},"checkpoint":${JSON.stringify(checkpoint)},"index":`);
  }

  /** `{"ts":"…` for a timestamp; consecutive records mostly share their millisecond. */
  private headFor(ms: number): Uint8Array {
    if (ms !== this.headMs) {
      this.headMs = ms;
      this.head = encode(`{"ts":"${isoTime(ms)}`);
    }
    return this.head;
  }

  /** `,"step":3}\n` for a step; consecutive records mostly share their step. */
  private tailFor(step: number): Uint8Array {
    if (step !== this.tailStep) {
      this.tailStep = step;
      const text = new LineBuffer(64);
      text.putLatin1(',"step":');
      text.putDouble(step);
      text.putLatin1("}\n");
      this.tail = text.bytes.subarray(0, text.length);
    }
    return this.tail;
  }

  /** Append a metric line. */
  putMetric(out: LineBuffer, timestamp: number, middle: Uint8Array, value: number, step: number): void {
    const head = this.headFor(timestamp);
    const tail = this.tailFor(step);
    out.reserve(head.length + middle.length + NUMBER_BYTES + tail.length);
    out.putBytes(head);
    out.putBytes(middle);
    out.putDouble(value);
    out.putBytes(tail);
  }

  /** Append a probe line; `values` is the ring's float64 view. */
  putProbe(out: LineBuffer, middle: Uint8Array, slot: SlotRecord, values: Float64Array): void {
    const head = this.headFor(slot.timestamp);
    const dtype = DTYPE_FIELDS[slot.dtype];
    out.reserve(head.length + middle.length + dtype.length + 64 + (NUMBER_BYTES + 1) * (slot.count + 2));
    out.putBytes(head);
    out.putBytes(middle);
    out.putDouble(slot.index);
    out.putBytes(dtype);
    out.putBytes(LENGTH_FIELD);
    out.putDouble(slot.length);
    out.putBytes(VALUES_OPEN);
    const f32 = slot.dtype === "f32";
    for (let i = 0; i < slot.count; i++) {
      if (i > 0) out.putByte(COMMA);
      const v = values[slot.valuesAt + i] ?? 0;
      if (f32) out.putFloat32(v);
      else out.putDouble(v);
    }
    out.putBytes(CLOSE_LIST);
  }
}

/** The shortest decimal text that reads back (through a double) as the same float32. */
export function float32Text(value: number): string {
  const out = new LineBuffer(32);
  out.putFloat32(value);
  return out.bytes.toString("latin1", 0, out.length);
}

/** The writer's counters, as in its final line and `streamStats()`. */
export interface StreamCounts {
  /** Records written to the stream file. */
  readonly written: number;
  /** Records lost for any reason: `ringFull + writeFailed`. */
  readonly dropped: number;
  /** Records dropped at the producer because the ring was full (the writer or sink was behind). */
  readonly ringFull: number;
  /** Records taken from the ring that could not be written (disk full, file or directory gone). */
  readonly writeFailed: number;
  /** Records not handed to `logStream` backends because the main thread was too far behind. */
  readonly backendDropped: number;
}

/** The final line the writer appends when it stops. */
export function endLine(ts: string, recorder: Recorder | number, reason: string, counts: StreamCounts): string {
  return `{"ts":"${ts}",${recorderFields(recorder)},"stream_end":${JSON.stringify(reason)},"written":${counts.written},"dropped":${counts.dropped},"ringFull":${counts.ringFull},"writeFailed":${counts.writeFailed},"backendDropped":${counts.backendDropped}}`;
}
