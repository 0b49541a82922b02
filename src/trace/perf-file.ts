/**
 * Writing the perf tracer's buffered events to its rank file: the file begun once (its `[` and the
 * process's metadata), a `thread_name` event the first time a row appears, then the events as
 * lines, appended through the path's one `AppendFile`.
 */
import { createFileOnce } from "../io/atomic-write.js";
import type { EventBuffer } from "./event-buffer.js";
import { ByteChunks, eventLine, laneName, TID_BASE } from "./perf-lines.js";
import { appendFileFor, type RankFileTarget } from "./rank-file.js";
import { processMetadata, threadMetadata, TRACE_FILE_HEADER, traceEventLine } from "./trace-events.js";

/** Bounds on the byte chunks a batch is encoded into (about 256 bytes an event in between). */
const MIN_CHUNK_BYTES = 4 * 1024;
const MAX_CHUNK_BYTES = 1024 * 1024;

/** The rank files one tracer writes, and the rows each has named. */
export class PerfTraceFiles {
  /** Files begun (header and process metadata written), and their named rows. */
  private readonly begun = new Map<string, Set<number>>();

  /** True once `path` has been begun by this tracer. */
  has(path: string): boolean {
    return this.begun.has(path);
  }

  /**
   * Append `buffer`'s events to `target`'s file (beginning it first if needed); `sync` writes
   * now (exit), otherwise the writes are queued. The caller clears the buffer.
   */
  write(buffer: EventBuffer, target: RankFileTarget, sync: boolean): void {
    const n = buffer.length;
    const out = new ByteChunks(Math.min(MAX_CHUNK_BYTES, Math.max(MIN_CHUNK_BYTES, n * 256)));
    let lanes = this.begun.get(target.path);
    if (lanes === undefined) {
      lanes = new Set();
      this.begun.set(target.path, lanes);
      beginFile(target.path);
      for (const m of processMetadata(target)) out.write(traceEventLine(m));
    }
    const identity = `"rank":${target.rank},"role":${JSON.stringify(target.role)}`;
    for (let i = 0; i < n; i++) {
      const lane = buffer.laneAt(i);
      if (!lanes.has(lane)) {
        lanes.add(lane);
        out.write(traceEventLine(threadMetadata(target.pid, TID_BASE + lane, laneName(lane))));
      }
      out.write(eventLine(buffer, i, target.pid, identity));
    }
    out.seal();
    const file = appendFileFor(target.path);
    if (sync) file.writeQueuedSync(Buffer.concat(out.chunks));
    else for (const chunk of out.chunks) file.append(chunk);
  }
}

/**
 * Start a rank file with its `[`, once, whoever gets there first: the file is created exclusively,
 * so a worker thread or a second process tracing as the same rank never writes a second `[`.
 * Synchronous, once per file, off the caller's path.
 */
function beginFile(path: string): void {
  createFileOnce(path, TRACE_FILE_HEADER, "trace events are dropped and counted");
}
