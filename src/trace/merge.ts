/**
 * `rankscope traces merge RUN`: every `traces/rank-*.jsonl` of a run (and the controller's
 * `traces/controller.jsonl`) in one `trace.json` for Perfetto — timestamps shifted to a common origin (the earliest event of any rank), metadata
 * first, then events by time.
 */
import { open, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { CONTROLLER_TRACE_PID } from "./rank-file.js";
import { readTraceFile } from "./trace-file.js";
import type { TraceEvent } from "./trace-events.js";

/** Options of `mergeTraces`. */
export interface MergeTracesOptions {
  /** Output file (default `{runDir}/traces/trace.json`). */
  out?: string;
  /** Told of progress in bytes read: `done` of `total`. */
  onProgress?: (done: number, total: number) => void;
}

/** What a merge did. */
export interface MergeTracesResult {
  readonly out: string;
  readonly files: number;
  readonly events: number;
  /** The common origin, µs since the epoch (subtracted from every `ts`). */
  readonly originUs: number;
  /** Files whose last line was cut short (their full lines are merged). */
  readonly truncatedFiles: readonly string[];
  /** Unparsable lines before the last line of a file, skipped. */
  readonly badLines: number;
}

const RANK_FILE = /^rank-(\d+)\.jsonl$/;
const CONTROLLER_FILE = "controller.jsonl";

/** Sort order of trace files: the controller first, then ranks by number. */
function fileOrder(name: string): number {
  return name === CONTROLLER_FILE ? -1 : Number(RANK_FILE.exec(name)![1]);
}

/** Order: metadata first; then by time; at equal times the outer (longer) span first. */
function compareEvents(a: TraceEvent, b: TraceEvent): number {
  const am = a.ph === "M" ? 0 : 1;
  const bm = b.ph === "M" ? 0 : 1;
  if (am !== bm) return am - bm;
  if (am === 0) return a.pid - b.pid || a.tid - b.tid;
  return (a.ts ?? 0) - (b.ts ?? 0) || a.pid - b.pid || a.tid - b.tid || (b.dur ?? 0) - (a.dur ?? 0);
}

/** Merge a run's per-rank trace files into one Chrome trace JSON file. */
export async function mergeTraces(runDir: string, options: MergeTracesOptions = {}): Promise<MergeTracesResult> {
  const dir = join(runDir, "traces");
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    throw new Error(
      `no traces folder in ${runDir}: expected per-rank files ${join("traces", "rank-{r}.jsonl")} (is this a run directory, and did it use traceScope?)`,
    );
  }
  const files = names
    .filter((name) => name === CONTROLLER_FILE || RANK_FILE.test(name))
    .sort((a, b) => fileOrder(a) - fileOrder(b))
    .map((name) => join(dir, name));
  if (files.length === 0) throw new Error(`no trace files (rank-{r}.jsonl or controller.jsonl) in ${dir}`);

  const sizes = await Promise.all(files.map(async (f) => (await stat(f)).size));
  const total = sizes.reduce((a, b) => a + b, 0);
  let done = 0;
  const events: TraceEvent[] = [];
  const truncatedFiles: string[] = [];
  let badLines = 0;
  for (const file of files) {
    const parsed = await readTraceFile(file, (bytes) => {
      done += bytes;
      options.onProgress?.(Math.min(done, total), total);
    });
    for (const e of parsed.events) events.push(e);
    if (parsed.truncated) truncatedFiles.push(file);
    badLines += parsed.badLines;
  }
  options.onProgress?.(total, total);

  let originUs = Infinity;
  for (const e of events) if (e.ph !== "M" && typeof e.ts === "number" && e.ts < originUs) originUs = e.ts;
  if (originUs === Infinity) originUs = 0;
  for (const e of events) if (typeof e.ts === "number") e.ts -= originUs;
  events.sort(compareEvents);

  const out = options.out ?? join(dir, "trace.json");
  const handle = await open(out, "w");
  const write = async (text: string): Promise<void> => {
    await handle.write(text);
  };
  const ranks = [...new Set(events.map((e) => e.pid))]
    .filter((pid) => pid !== CONTROLLER_TRACE_PID)
    .sort((a, b) => a - b);
  try {
    await write('{"traceEvents":[\n');
    let chunk = "";
    for (let i = 0; i < events.length; i++) {
      chunk += (i === 0 ? "" : ",\n") + JSON.stringify(events[i]);
      if (chunk.length > 1 << 20) {
        await write(chunk);
        chunk = "";
      }
    }
    await write(
      `${chunk}\n],"displayTimeUnit":"ms","otherData":${JSON.stringify({ originEpochUs: originUs, ranks })}}\n`,
    );
  } finally {
    await handle.close();
  }
  return { out, files: files.length, events: events.length, originUs, truncatedFiles, badLines };
}
