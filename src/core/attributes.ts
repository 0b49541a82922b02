/**
 * Attributes on a metric (`recordMetric(key, v, reduce, { model: "a" })`): how they become part
 * of the key, and how a sink reads them back.
 *
 * One key form everywhere a key is a name (the store, TensorBoard, W&B, the console, JSONL):
 * `name{a=x,b=y}`, attribute names sorted, values escaped (`\` before `\`, `,`, `=`, `{`, `}`), so
 * one set of attributes is one key whatever order it was written in. A reduction with several
 * outputs puts its suffix on the name, before the attributes: `ttft/p99{model=a}`. Sinks with
 * labels of their own (Prometheus, OTLP) split the key back with `splitAttributedKey`.
 *
 * An attributed key is a key: it counts against the key bound (`RANKSCOPE_MAX_KEYS`), and one name
 * holds at most `RANKSCOPE_MAX_ATTRIBUTE_SETS` sets of attributes per process; past either, values
 * are dropped and counted in the same counter (`rankscope/dropped_key_records`).
 */

/** An attribute's value: text, or a number or boolean written as text. */
export type AttributeValue = string | number | boolean;

/** Attributes of a metric: `{ "gen_ai.request.model": "llama", route: "/chat" }`. */
export type MetricAttributes = Readonly<Record<string, AttributeValue>>;

/** A valid attribute name: a letter or `_`, then letters, digits, `_`, `.` or `-` (OpenTelemetry's names fit). */
const ATTRIBUTE_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

/** Default bound on the attribute sets of one metric name, per process. */
export const DEFAULT_MAX_ATTRIBUTE_SETS = 1_000;

function escapeValue(value: string): string {
  return /[\\,={}]/.test(value) ? value.replace(/[\\,={}]/g, (c) => `\\${c}`) : value;
}

function attributeText(name: string, value: unknown): string {
  if (!ATTRIBUTE_NAME.test(name)) {
    throw new TypeError(
      `attribute name ${JSON.stringify(name)} is not valid: names start with a letter or "_" and hold letters, digits, "_", "." or "-"`,
    );
  }
  if (typeof value === "string") return escapeValue(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  throw new TypeError(
    `attribute "${name}" must be a string, number or boolean, got ${value === null ? "null" : typeof value}`,
  );
}

/**
 * The key of `name` with `attributes`: `name{a=x,b=y}` (names sorted, values escaped), or `name`
 * itself when there are none. Attributes whose value is undefined are left out.
 * @throws TypeError for a name holding `{` or `}`, an invalid attribute name or value
 */
export function attributedKey(name: string, attributes: MetricAttributes): string {
  if (name.includes("{") || name.includes("}")) {
    throw new TypeError(`metric name ${JSON.stringify(name)} with attributes must not hold "{" or "}"`);
  }
  const names = Object.keys(attributes).sort();
  let block = "";
  for (const attribute of names) {
    const value: unknown = attributes[attribute];
    if (value === undefined) continue;
    block += `${block === "" ? "" : ","}${attribute}=${attributeText(attribute, value)}`;
  }
  return block === "" ? name : `${name}{${block}}`;
}

/** A key split into its name and its attributes (none for a key without a block). */
export interface KeyParts {
  readonly name: string;
  readonly attributes: Readonly<Record<string, string>>;
}

const NO_ATTRIBUTES: Readonly<Record<string, string>> = Object.freeze({});

/** The attributes of a block's text (`a=x,b=y`), or undefined when it is not one. */
function parseBlock(block: string): Record<string, string> | undefined {
  const attributes: Record<string, string> = {};
  let name = "";
  let value = "";
  let inValue = false;
  for (let i = 0; i < block.length; i++) {
    let c = block[i] ?? "";
    if (c === "\\") {
      c = block[++i] ?? "";
      if (!inValue) return undefined;
      value += c;
    } else if (c === "=" && !inValue) {
      inValue = true;
    } else if (c === ",") {
      if (!inValue || !ATTRIBUTE_NAME.test(name)) return undefined;
      attributes[name] = value;
      name = value = "";
      inValue = false;
    } else if (c === "{" || c === "}" || (c === "=" && inValue)) {
      return undefined;
    } else if (inValue) value += c;
    else name += c;
  }
  if (!inValue || !ATTRIBUTE_NAME.test(name)) return undefined;
  attributes[name] = value;
  return attributes;
}

/** The name and attributes of a key in the `name{a=x}` form; a key without a valid block is all name. */
export function splitAttributedKey(key: string): KeyParts {
  const open = key.indexOf("{");
  if (open <= 0 || key.charCodeAt(key.length - 1) !== 125 /* } */) return { name: key, attributes: NO_ATTRIBUTES };
  const attributes = parseBlock(key.slice(open + 1, -1));
  return attributes === undefined ? { name: key, attributes: NO_ATTRIBUTES } : { name: key.slice(0, open), attributes };
}

/** `key/suffix`, with the suffix on the name when the key has attributes: `ttft/p99{model=a}`. */
export function withSuffix(key: string, suffix: string): string {
  const open = key.indexOf("{");
  if (open <= 0 || key.charCodeAt(key.length - 1) !== 125 /* } */ || parseBlock(key.slice(open + 1, -1)) === undefined)
    return `${key}/${suffix}`;
  return `${key.slice(0, open)}/${suffix}${key.slice(open)}`;
}
