/**
 * JSON that keeps IEEE special values and big integers readable by every reader.
 *
 * `JSON.stringify(NaN)` is `null`, which would make a diverged loss vanish. rankscope writes
 * non-finite numbers the way the proto3 JSON mapping does for doubles: the strings `"NaN"`,
 * `"Infinity"` and `"-Infinity"`. `parseNumber` reads either form back.
 *
 * Numbers from 2^53 up (in magnitude) are integers that `String` writes as digits padded with
 * zeros (`2 ** 63` → `9223372036854776000`, which is not 2^63 and is beyond int64): a reader that
 * parses integer literals exactly (Python, Go, pandas) takes it for another number or overflows.
 * `numberText` writes them in exponent form (`9.223372036854776e+18`), which every reader reads as
 * the same double. Bigints in user data (sample records, configs) are written exactly: as integer
 * literals within int64, as strings of their digits beyond (`jsonText`).
 *
 * For messages between ranks, where any field may be a number, `encodeMessage`/`decodeMessage`
 * tag non-finite numbers as `{"$f":"NaN"}` (so a genuine string `"NaN"` in a sample record stays a
 * string) and bigints as `{"$b":"123"}` (so they arrive as bigints).
 */

/** A JSON-safe value for a number: the number itself, or its proto3-JSON string when not finite. */
export function jsonNumber(value: number): number | string {
  return Number.isFinite(value) ? value : nonFiniteName(value);
}

/** The proto3-JSON name of a number that is not finite. */
function nonFiniteName(value: number): "NaN" | "Infinity" | "-Infinity" {
  if (Number.isNaN(value)) return "NaN";
  return value > 0 ? "Infinity" : "-Infinity";
}

/** 2^53: from here up, `String` writes a double as integer digits that are not all its own. */
const FIRST_INEXACT_INTEGER = 2 ** 53;
/** From here up, `String` writes an exponent itself. */
const FIRST_EXPONENT = 1e21;

/**
 * A finite number as JSON text that every reader reads back as this double: `String(v)`, except
 * that magnitudes from 2^53 to 1e21 are written in exponent form (`9.007199254740992e+15`, the
 * shortest digits that read back) instead of `String`'s zero-padded integer digits.
 */
export function numberText(value: number): string {
  const magnitude = value < 0 ? -value : value;
  return magnitude >= FIRST_INEXACT_INTEGER && magnitude < FIRST_EXPONENT ? value.toExponential() : String(value);
}

/** Serialise a number as a JSON token (`numberText`), keeping NaN and ±Infinity as proto3-JSON strings. */
export function jsonNumberText(value: number): string {
  if (Number.isFinite(value)) return numberText(value);
  return `"${nonFiniteName(value)}"`;
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** A bigint as JSON: its digits as an integer literal within int64, else a string of them (no reader overflows). */
function bigintText(value: bigint): string {
  return value >= INT64_MIN && value <= INT64_MAX ? value.toString() : `"${value.toString()}"`;
}

/** How `jsonText` writes NaN and ±Infinity. */
type NonFiniteStyle =
  /** The proto3-JSON strings `"NaN"`, `"Infinity"`, `"-Infinity"` (valid JSON). */
  | "string"
  /** The bare tokens `NaN`, `Infinity`, `-Infinity`, as W&B's and Python's JSON write them. */
  | "token";

/**
 * JSON text of plain data (sample records, configs, histograms) as rankscope's sinks write it:
 * what `JSON.stringify` writes, except numbers (`numberText`; NaN and ±Infinity per `nonFinite`)
 * and bigints (`bigintText`, where `JSON.stringify` throws). `indent` pretty-prints as
 * `JSON.stringify(v, null, indent)` does. A cycle is a TypeError.
 */
export function jsonText(value: unknown, nonFinite: NonFiniteStyle = "string", indent = ""): string {
  return writeJson(value, nonFinite, indent, "", new Set()) ?? "null";
}

function writeJson(
  value: unknown,
  nonFinite: NonFiniteStyle,
  indent: string,
  at: string,
  open: Set<object>,
): string | undefined {
  if (value !== null && typeof value === "object" && "toJSON" in value && typeof value.toJSON === "function")
    value = value.toJSON();
  switch (typeof value) {
    case "number":
      return Number.isFinite(value)
        ? numberText(value)
        : nonFinite === "string"
          ? `"${nonFiniteName(value)}"`
          : nonFiniteName(value);
    case "bigint":
      return bigintText(value);
    case "string":
    case "boolean":
      return JSON.stringify(value);
    case "object":
      break;
    default:
      return undefined; // undefined, functions and symbols: left out, as JSON.stringify does
  }
  if (value === null) return "null";
  if (open.has(value)) throw new TypeError("cannot write a value that contains itself as JSON");
  open.add(value);
  const inner = at + indent;
  const [start, separator, end] = indent === "" ? ["", ",", ""] : [`\n${inner}`, `,\n${inner}`, `\n${at}`];
  let text: string;
  if (Array.isArray(value)) {
    const items: string[] = value.map((item: unknown) => writeJson(item, nonFinite, indent, inner, open) ?? "null");
    text = items.length === 0 ? "[]" : `[${start}${items.join(separator)}${end}]`;
  } else {
    const fields: string[] = [];
    for (const [key, field] of Object.entries(value)) {
      const written = writeJson(field, nonFinite, indent, inner, open);
      if (written !== undefined) fields.push(`${JSON.stringify(key)}:${indent === "" ? "" : " "}${written}`);
    }
    text = fields.length === 0 ? "{}" : `{${start}${fields.join(separator)}${end}}`;
  }
  open.delete(value);
  return text;
}

/** Read a number written by `jsonNumber` (a number, or "NaN" / "Infinity" / "-Infinity"). */
export function parseNumber(value: unknown): number {
  if (typeof value === "number") return value;
  if (value === "NaN") return NaN;
  if (value === "Infinity") return Infinity;
  if (value === "-Infinity") return -Infinity;
  throw new TypeError(`expected a number or one of "NaN", "Infinity", "-Infinity", got ${JSON.stringify(value)}`);
}

const TAG = "$f";
const BIGINT_TAG = "$b";

/**
 * JSON-encode a message, tagging non-finite numbers and bigints so they survive the trip.
 *
 * A replacer function costs about 10× a plain `JSON.stringify` on a flush reply of 1,000 keys.
 * Plain stringify writes NaN and ±Infinity as `null` and throws on a bigint, so when its text has
 * no `null` at all there was nothing to tag and it is the answer; otherwise the message is
 * encoded again with the tags.
 */
export function encodeMessage(message: unknown): string {
  let plain: string | undefined;
  try {
    plain = JSON.stringify(message);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error; // a bigint (a cycle throws again below)
    plain = "null";
  }
  if (plain === undefined || !plain.includes("null")) return plain;
  return JSON.stringify(message, (_key, value: unknown) =>
    typeof value === "number" && !Number.isFinite(value)
      ? { [TAG]: jsonNumber(value) }
      : typeof value === "bigint"
        ? { [BIGINT_TAG]: value.toString() }
        : value,
  );
}

/** Decode a message written by `encodeMessage` (a reviver runs only when the text has tags). */
export function decodeMessage(text: string): unknown {
  if (!text.includes(`"${TAG}"`) && !text.includes(`"${BIGINT_TAG}"`)) return JSON.parse(text);
  return JSON.parse(text, (_key, value: unknown) => {
    if (value !== null && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length === 1) {
      if (TAG in value) return parseNumber(value[TAG]);
      // At most 1,000 digits: a forged huge one must not make parsing slow.
      if (BIGINT_TAG in value && typeof value[BIGINT_TAG] === "string" && /^-?\d{1,1000}$/.test(value[BIGINT_TAG]))
        return BigInt(value[BIGINT_TAG]);
    }
    return value;
  });
}

/** A `JSON.stringify` replacer that writes non-finite numbers as their proto3-JSON strings. */
export function nonFiniteReplacer(_key: string, value: unknown): unknown {
  return typeof value === "number" && !Number.isFinite(value) ? jsonNumber(value) : value;
}

/**
 * `JSON.stringify(value, nonFiniteReplacer)`, the same text, with each array of numbers written
 * in one pass: a replacer call per element cost more than the rest of reading a dashboard line
 * (a finite number's JSON is its `toString`, so a join writes it).
 */
export function stringifyNonFinite(value: unknown): string | undefined {
  if (Array.isArray(value) && value.every((v) => typeof v === "number")) return numberArrayJson(value);
  if (isPlainData(value)) {
    const parts: string[] = [];
    for (const [k, v] of Object.entries(value)) {
      const text =
        v === undefined || typeof v === "function" || typeof v === "symbol" ? undefined : stringifyNonFinite(v);
      if (text !== undefined) parts.push(`${JSON.stringify(k)}:${text}`);
    }
    return `{${parts.join(",")}}`;
  }
  return JSON.stringify(value, nonFiniteReplacer);
}

/** A plain object (a literal or `Object.create(null)`) with no `toJSON` of its own. */
function isPlainData(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return (proto === Object.prototype || proto === null) && !("toJSON" in value);
}

/** An array of numbers as JSON, non-finite ones as their strings. */
function numberArrayJson(values: readonly number[]): string {
  if (values.every(Number.isFinite)) return `[${values.join(",")}]`;
  return `[${values.map((v) => (Number.isFinite(v) ? String(v) : JSON.stringify(jsonNumber(v)))).join(",")}]`;
}

/** Whether a value is a plain JSON object (not null, not an array): a record of fields to check. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** Parse JSON text that must be an object; a TypeError naming `what` when it is not. */
export function parseRecord(
  text: string,
  what: string,
  reviver?: (key: string, value: unknown) => unknown,
): Record<string, unknown> {
  const value: unknown = JSON.parse(text, reviver);
  if (!isRecord(value)) throw new TypeError(`${what} is not a JSON object: ${text.slice(0, 80)}`);
  return value;
}
