/**
 * `Reduce.SAMPLE` records as W&B tables, the way W&B's SDK logs a `wandb.Table`: the table is a run
 * file `media/table/{key}_{step}_{sha256[:20]}.table.json`, and the step's history row points to it
 * with a `table-file` reference.
 */
import { createHash } from "node:crypto";
import type { SampleRecord } from "../../core/reduce.js";
import { wandbValueJson } from "./offline/offline-run.js";

/** A key as a file path segment W&B accepts (slashes stay: they make subdirectories, as in the SDK). */
function safePathKey(key: string): string {
  const parts = key
    .split("/")
    .map((p) => p.replace(/[^A-Za-z0-9_.-]+/g, "_").replace(/^\.+$/, "_"))
    .filter((p) => p.length > 0);
  return parts.length === 0 ? "_" : parts.join("/");
}

/**
 * A table file as W&B's SDK writes one for `wandb.Table`: `{"columns":[…],"data":[[…],…]}` (the
 * union of the records' fields, in first-seen order; a missing field is null), and the history
 * value that points to it.
 */
export function tableFile(
  key: string,
  step: number,
  records: readonly SampleRecord[],
): { path: string; content: string; ref: string } {
  const columns: string[] = [];
  const seen = new Set<string>();
  for (const r of records) {
    for (const c of Object.keys(r)) {
      if (seen.has(c)) continue;
      seen.add(c);
      columns.push(c);
    }
  }
  const data = records.map((r) => columns.map((c) => r[c] ?? null));
  const content = `{"columns":${wandbValueJson(columns)},"data":${wandbValueJson(data)}}`;
  const bytes = Buffer.from(content, "utf8");
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  const path = `media/table/${safePathKey(key)}_${step}_${sha256.slice(0, 20)}.table.json`;
  const ref = `{"_type":"table-file","sha256":"${sha256}","size":${bytes.length},"path":${JSON.stringify(path)},"ncols":${columns.length},"nrows":${records.length},"log_mode":"IMMUTABLE"}`;
  return { path, content, ref };
}
