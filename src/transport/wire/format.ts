/**
 * The compact binary wire format for accumulator states (wire version 2): what encoder and decoder
 * share — the byte layout's constants, the section kinds, the frame header and its errors.
 *
 * The format — byte layout, key table, which states go to a binary section and which to JSON,
 * sizes, versioning — is described once, in docs/scale.md ("Wire format (version 2)"); a change
 * to the constants here changes that page with it.
 *
 * Malformed input (wrong magic, a section running past the end, an unknown kind, an id outside the
 * table) throws `WireFormatError`; the receiver counts it (`transport.malformed`) and ignores it.
 */

/** The wire version this build writes and reads (2: sketches as records of varints, `sketch.ts`). */
export const WIRE_VERSION = 2;
export const MAGIC: readonly [number, number, number, number] = [0x52, 0x53, 0x57, 0x46]; // "RSWF"
/** Bytes before the header. */
export const FIXED = 20;
export const FLAG_U32_IDS = 1;
export const FLAG_F64_COUNTS = 2;

/** Section kinds (the state layouts with a binary encoding). */
export const enum SectionKind {
  Sum = 1,
  Extreme = 2,
  Moments = 3,
  Json = 4,
  Sketch = 5,
}

/** The section kind of a byte read from a frame, or undefined for an unknown one. */
export function sectionKindOf(byte: number): SectionKind | undefined {
  switch (byte) {
    case SectionKind.Sum:
      return SectionKind.Sum;
    case SectionKind.Extreme:
      return SectionKind.Extreme;
    case SectionKind.Moments:
      return SectionKind.Moments;
    case SectionKind.Json:
      return SectionKind.Json;
    case SectionKind.Sketch:
      return SectionKind.Sketch;
    default:
      return undefined;
  }
}

/**
 * A frame that cannot be read, or that carries what a receiver refuses: `kind` is what the receiver
 * counts it as (`malformed`, or `invalidName` / `invalidState` for a name out of bounds or a state
 * that does not fit its reduction).
 */
export class WireFormatError extends Error {
  override name = "WireFormatError";
  constructor(
    message: string,
    readonly kind: "malformed" | "invalidName" | "invalidState" = "malformed",
  ) {
    super(message);
  }
}

/** The section a key's states travel in when they fit one (any key may also travel as JSON). */
export function sectionKindForReduce(reduce: string): SectionKind {
  if (reduce === "mean" || reduce === "sum") return SectionKind.Sum;
  if (reduce === "max" || reduce === "min") return SectionKind.Extreme;
  if (reduce === "std") return SectionKind.Moments;
  return isSketchReduce(reduce) ? SectionKind.Sketch : SectionKind.Json;
}

/** True if `data` starts like a wire frame (and not like a JSON protocol message). */
export function isWireFrame(data: unknown): data is Uint8Array {
  return (
    data instanceof Uint8Array &&
    data.length >= 4 &&
    data[0] === MAGIC[0] &&
    data[1] === MAGIC[1] &&
    data[2] === MAGIC[2] &&
    data[3] === MAGIC[3]
  );
}

/** The header of a frame: the protocol envelope and the message's own fields. */
export interface FrameHeader {
  readonly proto: string;
  readonly v: number;
  readonly run: string;
  readonly t: string;
  /** The sender's key-table session: a new session starts with an empty table. */
  readonly session: string;
  readonly [field: string]: unknown;
}

/**
 * One session's key table: keys and reduce names by id. Append-only while the session lasts; a new
 * session gets new arrays, so a decoded frame (or a kept one) keeps the table it was written with.
 */
export interface KeyTable {
  readonly session: string;
  readonly keys: readonly string[];
  readonly reduces: readonly string[];
}

export const pad8 = (n: number): number => (n + 7) & ~7;
export const utf8Encoder = new TextEncoder();
export const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

function isFrameHeader(value: unknown): value is FrameHeader {
  return value !== null && typeof value === "object" && "session" in value && typeof value.session === "string";
}

/** Parse a frame's JSON header. Throws `WireFormatError`. */
export function parseHeader(bytes: Uint8Array): FrameHeader {
  let header: unknown;
  try {
    header = JSON.parse(utf8Decoder.decode(bytes));
  } catch {
    throw new WireFormatError("the header is not valid UTF-8 JSON");
  }
  if (!isFrameHeader(header)) throw new WireFormatError("the header carries no session");
  return header;
}

/**
 * Read only the header of a frame (to pick the `StateDecoder` of its sender, named in the header,
 * before decoding it). Throws `WireFormatError`.
 */
export function readFrameHeader(data: Uint8Array): FrameHeader {
  if (!isWireFrame(data)) throw new WireFormatError("not a rankscope wire frame (bad magic)");
  if (data.length < FIXED)
    throw new WireFormatError(`frame of ${data.length} bytes is shorter than its fixed header (${FIXED})`);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const headerLength = view.getUint32(16, true);
  if (FIXED + headerLength > data.length)
    throw new WireFormatError(
      `the header runs past the end of the frame (${FIXED + headerLength} > ${data.length} bytes)`,
    );
  return parseHeader(data.subarray(FIXED, FIXED + headerLength));
}

let sessions = 0;
/** A new key-table session id, unique across processes and restarts. */
export function newSession(): string {
  sessions++;
  return `${process.pid.toString(36)}.${Date.now().toString(36)}.${sessions.toString(36)}.${Math.floor(Math.random() * 0x7fffffff).toString(36)}`;
}

/** The first and last section kinds. */
export const FIRST_KIND = SectionKind.Sum;
export const LAST_KIND = SectionKind.Sketch;

/** True for the names of the built-in quantile sketches (`quantiles`, `quantiles(0.5,0.99)`), whose states SKETCH sections carry. */
export function isSketchReduce(reduce: string): boolean {
  return reduce === "quantiles" || reduce.startsWith("quantiles(");
}
