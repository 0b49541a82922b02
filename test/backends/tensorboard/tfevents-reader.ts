/**
 * An independent tfevents reader for the tests: its own CRC-32C (bit by bit, from the Castagnoli
 * polynomial), its own framing parser, and protobuf types parsed from a .proto text written from
 * TensorBoard's field numbers — nothing shared with the writer under test.
 */
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = protobuf.parse(readFileSync(join(here, "fixtures", "tensorboard-events.proto"), "utf8"), {
  keepCase: true,
}).root;
const EventType = root.lookupType("tensorboard.Event");
const HParamsType = root.lookupType("tensorboard.HParamsPluginData");
const TextPluginType = root.lookupType("tensorboard.TextPluginData");

/** CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time. */
export function crc32cBitwise(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

/** TensorFlow's mask: rotate right by 15, add 0xa282ead8 (mod 2^32). */
export function mask(crc: number): number {
  return ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) % 0x100000000;
}

/** Split a TFRecord file into its records, checking both CRCs of every one; throws on any mismatch. */
export function readRecords(file: Uint8Array): Uint8Array[] {
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  const records: Uint8Array[] = [];
  let at = 0;
  while (at < file.length) {
    if (at + 12 > file.length) throw new Error(`truncated header at byte ${at}`);
    const length = Number(view.getBigUint64(at, true));
    const lengthCrc = view.getUint32(at + 8, true);
    if (lengthCrc !== mask(crc32cBitwise(file.subarray(at, at + 8)))) throw new Error(`bad length CRC at byte ${at}`);
    const start = at + 12;
    if (start + length + 4 > file.length) throw new Error(`truncated record at byte ${at}`);
    const data = file.subarray(start, start + length);
    if (view.getUint32(start + length, true) !== mask(crc32cBitwise(data)))
      throw new Error(`bad data CRC at byte ${at}`);
    records.push(data);
    at = start + length + 4;
  }
  return records;
}

/** A decoded event, as plain objects (int64 as numbers, bytes as Uint8Array). */
export interface DecodedEvent {
  wall_time?: number;
  step?: number;
  file_version?: string;
  session_log?: { status?: number; msg?: string };
  summary?: { value: DecodedValue[] };
}

export interface DecodedValue {
  tag: string;
  simple_value?: number;
  histo?: {
    min?: number;
    max?: number;
    num?: number;
    sum?: number;
    sum_squares?: number;
    bucket_limit?: number[];
    bucket?: number[];
  };
  tensor?: {
    dtype?: number;
    tensor_shape?: { dim?: { size?: number }[] };
    string_val?: Uint8Array[];
    float_val?: number[];
  };
  metadata?: { plugin_data?: { plugin_name?: string; content?: Uint8Array }; data_class?: number };
}

export function decodeEvent(bytes: Uint8Array): DecodedEvent {
  return EventType.toObject(EventType.decode(bytes), { longs: Number, enums: Number, arrays: false, defaults: false });
}

/** Every event of a file, CRCs checked. */
export function readEvents(path: string): DecodedEvent[] {
  return readRecords(readFileSync(path)).map(decodeEvent);
}

/** Event files in a directory (not recursive), sorted by name. */
export function eventFiles(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.startsWith("events.out.tfevents."))
    .sort()
    .map((f) => join(dir, f));
}

export interface DecodedHParams {
  version?: number;
  session_start_info?: {
    hparams?: Record<string, { number_value?: number; string_value?: string; bool_value?: boolean }>;
    start_time_secs?: number;
    group_name?: string;
  };
}

export function decodeHParams(content: Uint8Array): DecodedHParams {
  return HParamsType.toObject(HParamsType.decode(content), { longs: Number, defaults: false });
}

export function decodeTextPluginData(content: Uint8Array): { version?: number } {
  return TextPluginType.toObject(TextPluginType.decode(content), { defaults: true });
}

/** Every scalar point of a list of events: tag, value, step, wall time. */
export function scalarPoints(
  events: readonly DecodedEvent[],
): { tag: string; value: number; step: number; wallTime: number }[] {
  const out: { tag: string; value: number; step: number; wallTime: number }[] = [];
  for (const e of events) {
    for (const v of e.summary?.value ?? []) {
      if (v.simple_value !== undefined)
        out.push({ tag: v.tag, value: v.simple_value, step: e.step ?? 0, wallTime: e.wall_time ?? 0 });
    }
  }
  return out;
}
