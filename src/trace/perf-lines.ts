/**
 * The perf tracer's lines: its buffered events as Chrome trace events, formatted by hand (the
 * writer's cost is mostly here) and encoded at once into byte chunks.
 */
import { isMainThread, threadId } from "node:worker_threads";
import { describeError, warn } from "../core/diagnostics.js";
import { PH_COMPLETE, PH_INSTANT, type EventBuffer } from "./event-buffer.js";

/**
 * Timestamps are written as µs since the epoch on a quarter-µs grid: at today's epoch (2^50..2^51
 * µs, until 2041) a double holds exactly quarters, so the text parses back to the value written
 * and `ts + dur` of a child never exceeds its parent's. Writing the whole part as an integer also
 * avoids formatting a 16-digit fractional double, which is several times slower.
 */
const ORIGIN_US = Math.round(performance.timeOrigin * 1000);
const ORIGIN_REST_US = performance.timeOrigin * 1000 - ORIGIN_US;
const QUARTERS = ["", ".25", ".5", ".75"] as const;

/**
 * Rows of worker threads are numbered from `threadId × 1000`, so threads of one rank writing the
 * same file never share a row.
 */
export const TID_BASE = isMainThread ? 0 : threadId * 1000;

/** A row's name, as its `thread_name` metadata says. */
export function laneName(lane: number): string {
  const thread = isMainThread ? "main" : `worker ${threadId}`;
  return lane === 0 ? thread : `${thread} async ${lane}`;
}

/**
 * Lines encoded straight into byte chunks as they are formatted. A batch built as one long string
 * keeps every line alive through young-generation collections, and copying them there cost more
 * than formatting them; encoded at once, each line is garbage immediately.
 */
export class ByteChunks {
  readonly chunks: Buffer[] = [];
  private buffer: Buffer;
  private offset = 0;

  constructor(private readonly chunkBytes: number) {
    this.buffer = Buffer.allocUnsafe(chunkBytes);
  }

  write(text: string): void {
    // A UTF-16 code unit takes at most 3 bytes in UTF-8.
    if (this.offset + text.length * 3 > this.buffer.length) {
      this.seal();
      if (text.length * 3 > this.buffer.length) {
        this.chunks.push(Buffer.from(text));
        return;
      }
    }
    this.offset += this.buffer.write(text, this.offset);
  }

  /** Close the current chunk (if it holds anything) and start a new one. */
  seal(): void {
    if (this.offset === 0) return;
    this.chunks.push(this.buffer.subarray(0, this.offset));
    this.buffer = Buffer.allocUnsafe(this.chunkBytes);
    this.offset = 0;
  }
}

/** A clock reading (ms, `performance.now()`'s scale) as quarter-µs since ORIGIN_US (monotonic in its argument). */
function quarterMicros(ms: number): number {
  return Math.round((ms * 1000 + ORIGIN_REST_US) * 4) / 4;
}

/** The epoch-µs text of a `quarterMicros` value. */
function epochText(quarters: number): string {
  const whole = Math.floor(quarters);
  return `${ORIGIN_US + whole}${QUARTERS[(quarters - whole) * 4] ?? ""}`;
}

/** Event `i` of `buffer` as a line of the rank file (`identity`: the `"rank":…,"role":…` members). */
export function eventLine(buffer: EventBuffer, i: number, pid: number, identity: string): string {
  const start = quarterMicros(buffer.startAt(i));
  const ts = epochText(start);
  const eventName = buffer.nameAt(i);
  const name = quote(eventName);
  const args = argsText(buffer.argsAt(i), eventName);
  const ph = buffer.phAt(i);
  if (ph === PH_COMPLETE) {
    const dur = quarterMicros(buffer.endAt(i)) - start;
    const error = buffer.errorAt(i);
    const errorText = error === undefined ? "" : `,"error":${JSON.stringify(error)}`;
    return `{"name":${name},"cat":"${buffer.catAt(i)}","ph":"X","ts":${ts},"dur":${dur},"pid":${pid},"tid":${TID_BASE + buffer.laneAt(i)},"args":{${args}${identity}${errorText}}},\n`;
  }
  if (ph === PH_INSTANT) {
    return `{"name":${name},"cat":"${buffer.catAt(i)}","ph":"i","s":"t","ts":${ts},"pid":${pid},"tid":${TID_BASE + buffer.laneAt(i)},"args":{${args}${identity}}},\n`;
  }
  return `{"name":${name},"ph":"C","ts":${ts},"pid":${pid},"tid":${TID_BASE},"args":{${args.slice(0, -1)}}},\n`;
}

const quoted = new Map<string, string>();

/** A name as a JSON string, cached: span names repeat. */
function quote(name: string): string {
  let text = quoted.get(name);
  if (text === undefined) {
    text = JSON.stringify(name);
    if (quoted.size < 10_000) quoted.set(name, text);
  }
  return text;
}

/** The members of a span's args as JSON text followed by a comma ("" for none). */
function argsText(args: Record<string, unknown> | undefined, name: string): string {
  if (args === undefined) return "";
  let json: string | undefined;
  try {
    json = JSON.stringify(args);
  } catch (error) {
    warn(
      "trace.args",
      `the args of trace event "${name}" are not JSON-serialisable (${describeError(error)}); the event is written without them`,
    );
    return `"argsError":${JSON.stringify(describeError(error))},`;
  }
  if (json === undefined || json[0] !== "{") {
    warn("trace.args", `the args of trace event "${name}" must be a plain object; the event is written without them`);
    return "";
  }
  return json.length > 2 ? `${json.slice(1, -1)},` : "";
}
