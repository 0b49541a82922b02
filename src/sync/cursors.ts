/**
 * What the team server has of a run, as a sync keeps it between passes: its cursors per series,
 * records, files and metadata, read from the server's state answer (`GET /api/ingest/v1/state`).
 */

/** The server's cursors of one run. */
export interface Cursors {
  resumeStep: number;
  metaHash: string | null;
  series: Map<string, number | null>;
  records: Record<string, number>;
  files: Map<string, number>;
}

/** The key of a series in `Cursors.series`. */
export function seriesKey(kind: string, key: string, rank: number): string {
  return `${kind}\u0000${rank}\u0000${key}`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The server's state answer, checked. */
export function parseState(body: unknown): Cursors {
  const out: Cursors = { resumeStep: 0, metaHash: null, series: new Map(), records: {}, files: new Map() };
  if (!isObject(body)) return out;
  if (typeof body["resumeStep"] === "number") out.resumeStep = body["resumeStep"];
  if (typeof body["metaHash"] === "string") out.metaHash = body["metaHash"];
  for (const s of Array.isArray(body["series"]) ? body["series"] : []) {
    if (!isObject(s) || typeof s["kind"] !== "string" || typeof s["key"] !== "string" || typeof s["rank"] !== "number")
      continue;
    out.series.set(seriesKey(s["kind"], s["key"], s["rank"]), typeof s["cursor"] === "number" ? s["cursor"] : null);
  }
  const records = body["records"];
  if (isObject(records)) for (const [k, v] of Object.entries(records)) if (typeof v === "number") out.records[k] = v;
  const files = body["files"];
  if (isObject(files)) for (const [k, v] of Object.entries(files)) if (typeof v === "number") out.files.set(k, v);
  return out;
}
