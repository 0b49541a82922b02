/**
 * The one redaction rule for secrets. Every path that stores or shows user-supplied values —
 * `config.yaml`, hyperparameters (`logHyperparams`: the store, the dashboard's Config tab,
 * TensorBoard, W&B), the wandb backend's `config` option and the text logs' structured fields —
 * passes them through `redactSecrets` first, so a key that looks like a secret is never written.
 */
import { isRecord } from "./json.js";

/** What replaces a secret's value in `config.yaml`. */
export const REDACTED = "***REDACTED***";

/** Keys whose values are secrets, matched case-insensitively against the key (any nesting level). */
export const DEFAULT_SECRET_KEY_PATTERNS: readonly RegExp[] = [
  /api[_-]?key/i,
  /secret/i,
  /passw(or)?d/i,
  /token$/i,
  /credential/i,
  /private[_-]?key/i,
  /^auth(orization)?$/i,
];

/**
 * A deep copy of `value` with the value of every key matching a secret pattern replaced by
 * `REDACTED`. Functions and symbols are dropped, bigints stay bigints (every sink writes them
 * exactly: `jsonText`, YAML integers), cycles are cut.
 */
export function redactSecrets(value: unknown, patterns: readonly RegExp[] = DEFAULT_SECRET_KEY_PATTERNS): unknown {
  const seen = new WeakSet<object>();
  const walk = (v: unknown): unknown => {
    if (typeof v === "function" || typeof v === "symbol") return undefined;
    if (v === null || typeof v !== "object") return v;
    if (seen.has(v)) return "[circular]";
    seen.add(v);
    if (v instanceof Date) return v.toISOString();
    if (Array.isArray(v)) return v.map(walk);
    if (v instanceof Map) return walk(Object.fromEntries(v));
    const out: Record<string, unknown> = {};
    for (const [k, inner] of Object.entries(v)) {
      if (patterns.some((p) => p.test(k))) {
        out[k] = inner === undefined || inner === null || inner === "" ? inner : REDACTED;
        continue;
      }
      const walked = walk(inner);
      if (walked !== undefined) out[k] = walked;
    }
    return out;
  };
  return walk(value);
}

/** `redactSecrets` of a record of fields (a config, hyperparameters, a log record): a record again. */
export function redactRecord(
  record: Readonly<Record<string, unknown>>,
  patterns: readonly RegExp[] = DEFAULT_SECRET_KEY_PATTERNS,
): Record<string, unknown> {
  const redacted = redactSecrets(record, patterns);
  return isRecord(redacted) ? redacted : {};
}

/**
 * Credentials in a URL, as `scheme://user:password@host` or `scheme://token@host` (NATS takes a lone
 * user name as a token). Both forms are secrets: the whole user part goes, up to the last `@` before
 * the host (a password may hold an unescaped `@`), so neither a password nor a token is ever shown.
 */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#,]+@/gi;

/** A query parameter whose name matches a secret pattern (`?token=…`, `&api_key=…`). */
const URL_QUERY_PARAM = /([?&])([^=&#\s]+)=([^&#\s]*)/g;

/**
 * `text` (a URL, a list of them, or a message quoting some) with every credential a URL carries
 * replaced by `REDACTED`: the user part (`nats://***REDACTED***@host:4222`), and the value of each
 * query parameter whose name matches a secret pattern — the same rule as `redactSecrets`. Cheap
 * when there is nothing to redact (no `@`, no `=`), so every diagnostic can pass through it.
 */
export function redactUrlCredentials(text: string, patterns: readonly RegExp[] = DEFAULT_SECRET_KEY_PATTERNS): string {
  let out = text.includes("@") ? text.replace(URL_USERINFO, `$1${REDACTED}@`) : text;
  if (out.includes("=") && out.includes("://")) {
    out = out.replace(URL_QUERY_PARAM, (whole, sep: string, name: string) =>
      patterns.some((p) => p.test(safeDecode(name))) ? `${sep}${name}=${REDACTED}` : whole,
    );
  }
  return out;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
