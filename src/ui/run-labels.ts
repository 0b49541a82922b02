/**
 * What the runs table shows beside a run's status: its tags and group (`run.json`, written by
 * `initBackends(config, { tags, group })`) and its parameters (the run config in `config.yaml`
 * and the logged hyperparameters, flattened to `a.b.c`, secrets redacted). Parsed files are kept
 * while their size and modification time stay the same, so the runs list polled every few seconds
 * does not parse 50 YAML files each time.
 */
import { statSync } from "node:fs";
import { join } from "node:path";
import { parse as parseYaml } from "yaml";
import { isRecord } from "../core/json.js";
import { RUN_META_FILE, VERSION_INFO_KEY, redactSecrets } from "../run/run-files.js";
import { readRunText, realPathInside } from "./security.js";
import type { RunLabels } from "./source.js";

/** Parameters per run at most, and characters per string value: the runs list stays small. */
const MAX_PARAMS = 200;
const MAX_PARAM_TEXT = 200;

type ParamValue = string | number | boolean | null;

/**
 * `{ a: { b: 1 }, c: [1, 2] }` → `{ "a.b": 1, "c": "[1,2]" }`: nested objects become dotted keys,
 * arrays and other values their JSON text, long text cut.
 */
function flattenParams(value: unknown, into: Record<string, ParamValue> = {}, prefix = ""): Record<string, ParamValue> {
  if (!isRecord(value)) {
    if (prefix !== "") into[prefix] = paramValue(value);
    return into;
  }
  for (const [k, inner] of Object.entries(value)) {
    if (Object.keys(into).length >= MAX_PARAMS) break;
    flattenParams(inner, into, prefix === "" ? k : `${prefix}.${k}`);
  }
  return into;
}

function paramValue(value: unknown): ParamValue {
  if (value === null || value === undefined) return null;
  if (typeof value === "number" || typeof value === "boolean") return value;
  const text = typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  return text.length > MAX_PARAM_TEXT ? `${text.slice(0, MAX_PARAM_TEXT)}…` : text;
}

interface Cached<T> {
  readonly stamp: string;
  readonly value: T;
}

/** Reads and caches each run's labels. */
export class RunLabelReader {
  private readonly cache = new Map<string, Cached<unknown>>();

  constructor(private readonly realRoot: string) {}

  /** Tags, group and params of the run in `runDir`; `hyperparams` are the store's (logged) ones. */
  labels(runDir: string, hyperparams: Record<string, unknown>): RunLabels {
    const meta = this.parsed(runDir, RUN_META_FILE, (text): unknown => JSON.parse(text));
    const config = this.parsed(runDir, "config.yaml", (text): unknown => parseYaml(text));
    const { tags, group } = readMeta(meta);
    const params = flattenParams(redactSecrets(config ?? {}));
    // The version info that initBackends logs with the run config has its own place (version.json), not the params columns.
    const { [VERSION_INFO_KEY]: _version, ...logged } = hyperparams;
    flattenParams(redactSecrets(logged), params);
    return { tags, group, params };
  }

  /** A run file's parsed content (null when missing, refused or unparsable), cached by size and mtime. */
  private parsed(runDir: string, name: string, parse: (text: string) => unknown): unknown {
    const path = join(runDir, name);
    let stamp: string;
    try {
      const real = realPathInside(this.realRoot, path, name);
      if (real === null) return null;
      const stat = statSync(real);
      stamp = `${stat.size}:${stat.mtimeMs}`;
    } catch {
      return null;
    }
    const known = this.cache.get(path);
    if (known !== undefined && known.stamp === stamp) return known.value;
    const text = readRunText(this.realRoot, runDir, name);
    let value: unknown;
    try {
      value = text === null ? null : parse(text);
    } catch {
      value = null;
    }
    this.cache.set(path, { stamp, value });
    return value;
  }
}

function readMeta(meta: unknown): { tags: string[]; group: string | null } {
  if (!isRecord(meta)) return { tags: [], group: null };
  const { tags, group } = meta;
  return {
    tags: Array.isArray(tags) ? tags.filter((t): t is string => typeof t === "string") : [],
    group: typeof group === "string" ? group : null,
  };
}
