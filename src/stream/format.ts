/**
 * The stream's JSONL lines, one per record, written by the writer worker.
 *
 * ```
 * {"ts":"2026-11-22T01:50:00.123Z","rank":0,"key":"loss","value":0.25,"step":3}
 * {"ts":"2026-11-22T01:50:00.124Z","rank":0,"checkpoint":"logits","index":5,"dtype":"f32","length":151936,"values":[0.5,-1.25]}
 * {"ts":"2026-11-22T01:50:01.000Z","rank":0,"stream_end":"exit","written":2,"dropped":0,"ringFull":0,"writeFailed":0,"backendDropped":0}
 * ```
 * NaN and ±Infinity are written as the strings "NaN", "Infinity", "-Infinity" (as every rankscope
 * JSONL file). Values from a Float32Array are written in the shortest form that reads back as the
 * same float32 (`0.1`, not `0.10000000149011612`).
 */
import { jsonNumberText } from "../core/json.js";
import type { SlotRecord } from "./ring.js";

/** Caches the ISO text of the last timestamp: consecutive records usually share a millisecond. */
export class TimestampText {
  private lastMs = Number.NaN;
  private lastText = "";
  text(ms: number): string {
    if (ms !== this.lastMs) {
      this.lastMs = ms;
      this.lastText = Number.isFinite(ms) ? new Date(Math.floor(ms)).toISOString() : "1970-01-01T00:00:00.000Z";
    }
    return this.lastText;
  }
}

/** The shortest decimal text that reads back as the same float32. */
export function float32Text(value: number): string {
  if (!Number.isFinite(value)) return jsonNumberText(value);
  if (Number.isInteger(value) && Math.abs(value) < 1e15) return String(value);
  // 9 significant digits always read back; most values need 7 or 8, so start in the middle.
  let candidate = Number(value.toPrecision(7));
  if (Math.fround(candidate) === value) {
    const shorter = Number(value.toPrecision(6));
    return String(Math.fround(shorter) === value ? shorter : candidate);
  }
  candidate = Number(value.toPrecision(8));
  if (Math.fround(candidate) === value) return String(candidate);
  return String(Number(value.toPrecision(9)));
}

/**
 * The constant middle of a metric line for one key, computed once per key:
 * `","rank":0,"key":"loss","value":`. The writer builds metric lines as
 * `{"ts":"…` + middle + value + `,"step":…}`.
 */
export function metricLineMiddle(rank: number, key: string): string {
  return `","rank":${rank},"key":${JSON.stringify(key)},"value":`;
}

/** The JSONL line of a probe record (without the newline); `values` is the ring's float64 view. */
export function probeLine(ts: string, rank: number, checkpoint: string, slot: SlotRecord, values: Float64Array): string {
  let list = "";
  const f32 = slot.dtype === "f32";
  for (let i = 0; i < slot.count; i++) {
    const v = values[slot.valuesAt + i] as number;
    list += (i === 0 ? "" : ",") + (f32 ? float32Text(v) : jsonNumberText(v));
  }
  return `{"ts":"${ts}","rank":${rank},"checkpoint":${JSON.stringify(checkpoint)},"index":${slot.index},"dtype":"${slot.dtype}","length":${slot.length},"values":[${list}]}`;
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
export function endLine(ts: string, rank: number, reason: string, counts: StreamCounts): string {
  return `{"ts":"${ts}","rank":${rank},"stream_end":${JSON.stringify(reason)},"written":${counts.written},"dropped":${counts.dropped},"ringFull":${counts.ringFull},"writeFailed":${counts.writeFailed},"backendDropped":${counts.backendDropped}}`;
}
