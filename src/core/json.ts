/**
 * JSON that keeps IEEE special values.
 *
 * `JSON.stringify(NaN)` is `null`, which would make a diverged loss vanish. rankscope writes
 * non-finite numbers the way the proto3 JSON mapping does for doubles: the strings `"NaN"`,
 * `"Infinity"` and `"-Infinity"`. `parseNumber` reads either form back.
 *
 * For messages between ranks, where any field may be a number, `encodeMessage`/`decodeMessage`
 * tag non-finite numbers as `{"$f":"NaN"}` so a genuine string `"NaN"` in a sample record stays a
 * string.
 */

/** A JSON-safe value for a number: the number itself, or its proto3-JSON string when not finite. */
export function jsonNumber(value: number): number | string {
  if (Number.isFinite(value)) return value;
  if (Number.isNaN(value)) return "NaN";
  return value > 0 ? "Infinity" : "-Infinity";
}

/** Serialise a number as a JSON token, keeping NaN and ±Infinity as proto3-JSON strings. */
export function jsonNumberText(value: number): string {
  if (Number.isFinite(value)) return String(value);
  return `"${jsonNumber(value) as string}"`;
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

/**
 * JSON-encode a message, tagging non-finite numbers so they survive the trip.
 *
 * A replacer function costs about 10× a plain `JSON.stringify` on a flush reply of 1,000 keys.
 * Plain stringify writes NaN and ±Infinity as `null`, so when its text has no `null` at all there
 * was nothing to tag and it is the answer; otherwise the message is encoded again with the tags.
 */
export function encodeMessage(message: unknown): string {
  const plain = JSON.stringify(message);
  if (plain === undefined || !plain.includes("null")) return plain;
  return JSON.stringify(message, (_key, value: unknown) =>
    typeof value === "number" && !Number.isFinite(value) ? { [TAG]: jsonNumber(value) } : value,
  );
}

/** Decode a message written by `encodeMessage` (a reviver runs only when the text has tags). */
export function decodeMessage(text: string): unknown {
  if (!text.includes(`"${TAG}"`)) return JSON.parse(text);
  return JSON.parse(text, (_key, value: unknown) => {
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      const tagged = (value as Record<string, unknown>)[TAG];
      if (tagged !== undefined && Object.keys(value).length === 1) return parseNumber(tagged);
    }
    return value;
  });
}

/** A `JSON.stringify` replacer that writes non-finite numbers as their proto3-JSON strings. */
export function nonFiniteReplacer(_key: string, value: unknown): unknown {
  return typeof value === "number" && !Number.isFinite(value) ? jsonNumber(value) : value;
}

/** Whether a value is a plain JSON object (not null, not an array): a record of fields to check. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** Parse JSON text that must be an object; a TypeError naming `what` when it is not. */
export function parseRecord(text: string, what: string, reviver?: (key: string, value: unknown) => unknown): Record<string, unknown> {
  const value: unknown = JSON.parse(text, reviver);
  if (!isRecord(value)) throw new TypeError(`${what} is not a JSON object: ${text.slice(0, 80)}`);
  return value;
}
