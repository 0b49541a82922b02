/**
 * rankscope keys ↔ Prometheus metric names, reversibly.
 *
 * Prometheus names are `[a-zA-Z_:][a-zA-Z0-9_:]*`. A key made only of letters, digits, `_` and `/`
 * (not starting with a digit, not starting with `U__`) keeps its letters and has each `/` written
 * as `:` — `train/loss` → `train:loss`. Any other key is escaped as Prometheus 3 escapes UTF-8 names
 * ("values" escaping), with `/` still as `:`: the prefix `U__`, letters and digits as they are,
 * `_` as `__`, `/` as `:`, every other character as `_{hex code point}_` — `eval/acc@1` →
 * `U__eval:acc_40_1`. `keyFromPrometheusName` reverses both forms.
 */

const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_/]*$/;
const ESCAPED_PREFIX = "U__";

/** The Prometheus metric name of a rankscope key (before any type suffix such as `_total`). */
export function prometheusName(key: string): string {
  if (key.length === 0) throw new TypeError("a metric key must be a non-empty string");
  if (PLAIN_KEY.test(key) && !key.startsWith(ESCAPED_PREFIX)) return key.replaceAll("/", ":");
  let out = ESCAPED_PREFIX;
  for (const char of key) {
    if (/^[A-Za-z0-9]$/.test(char)) out += char;
    else if (char === "_") out += "__";
    else if (char === "/") out += ":";
    else out += `_${char.codePointAt(0)!.toString(16)}_`;
  }
  return out;
}

/** The rankscope key a Prometheus name came from (the inverse of `prometheusName`). */
export function keyFromPrometheusName(name: string): string {
  if (!name.startsWith(ESCAPED_PREFIX)) return name.replaceAll(":", "/");
  let key = "";
  for (let i = ESCAPED_PREFIX.length; i < name.length; i++) {
    const char = name[i]!;
    if (char === ":") key += "/";
    else if (char !== "_") key += char;
    else if (name[i + 1] === "_") {
      key += "_";
      i++;
    } else {
      const end = name.indexOf("_", i + 1);
      if (end < 0)
        throw new TypeError(`"${name}" is not a name made by prometheusName: an escape "_hex_" is not closed`);
      key += String.fromCodePoint(Number.parseInt(name.slice(i + 1, end), 16));
      i = end;
    }
  }
  return key;
}
