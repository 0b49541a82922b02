/**
 * A run's files on the team server (`run_files`: each file stored as appended pieces): the lists
 * of `traces/` and `logs/`, a log read a byte window at a time, a trace streamed a page of pieces
 * at a time. File names are checked before any query.
 */
import { Readable } from "node:stream";
import type pg from "pg";
import { pathSegmentProblem } from "../run/run-dir.js";
import { HttpError } from "../ui/security.js";
import type { RunBytes, TraceFile, TraceFileEntry } from "../ui/source.js";

/** A file parameter must be one file name, as the dashboard's lists give it. */
function checkFileName(name: string | null): asserts name is string {
  if (name === null || name === "" || pathSegmentProblem(name) !== null) {
    throw new HttpError(
      400,
      "the file parameter must be one file name (no '/', '\\', NUL, not '.' or '..') as the list gives it",
    );
  }
}

/** The files of a run under `folder/` (`traces`, `logs`), as the dashboard lists them. */
export async function listFiles(pool: pg.Pool, id: number, folder: string): Promise<TraceFileEntry[]> {
  const result = await pool.query<{ path: string; size: number; modified: Date }>(
    "SELECT path, sum(length(data))::bigint AS size, max(received_at) AS modified FROM run_files WHERE run_id = $1 AND starts_with(path, $2) GROUP BY path ORDER BY path",
    [id, `${folder}/`],
  );
  return result.rows.map((r) => ({
    name: r.path.slice(folder.length + 1),
    size: Number(r.size),
    modified: r.modified.getTime(),
  }));
}

/** A log of the run, `logs/<name>`, read a byte window at a time. */
export function logFileBytes(pool: pg.Pool, id: number, name: string | null): RunBytes {
  checkFileName(name);
  const path = `logs/${name}`;
  return {
    name,
    size: async () => {
      const size = await pool.query<{ size: number | null }>(
        "SELECT sum(length(data))::bigint AS size FROM run_files WHERE run_id = $1 AND path = $2",
        [id, path],
      );
      const total = size.rows[0]?.size ?? null;
      if (total === null) throw new HttpError(404, "no such file in this run");
      return Number(total);
    },
    // The pieces overlapping [from, from + length): the file is stored as appended pieces.
    read: async (from, length) => {
      const pieces = await pool.query<{ file_offset: string | number; data: Buffer }>(
        "SELECT file_offset, data FROM run_files WHERE run_id = $1 AND path = $2 AND file_offset < $3 AND file_offset + length(data) > $4 ORDER BY file_offset",
        [id, path, from + length, from],
      );
      const out = Buffer.alloc(length);
      let filled = 0;
      for (const piece of pieces.rows) {
        const at = Number(piece.file_offset);
        const start = Math.max(from, at);
        const end = Math.min(from + length, at + piece.data.length);
        piece.data.copy(out, start - from, start - at, end - at);
        filled = Math.max(filled, end - from);
      }
      return out.subarray(0, filled);
    },
  };
}

/** A trace of the run, `traces/<name>`, with its size; streamed 64 pieces a query. */
export async function traceFileOf(pool: pg.Pool, id: number, name: string | null): Promise<TraceFile> {
  checkFileName(name);
  const path = `traces/${name}`;
  const size = await pool.query<{ size: number | null }>(
    "SELECT sum(length(data))::bigint AS size FROM run_files WHERE run_id = $1 AND path = $2",
    [id, path],
  );
  const total = size.rows[0]?.size ?? null;
  if (total === null) throw new HttpError(404, "no such file in this run");
  async function* pieces(): AsyncGenerator<Buffer> {
    let offset = -1;
    for (;;) {
      const page = await pool.query<{ file_offset: number; data: Buffer }>(
        "SELECT file_offset, data FROM run_files WHERE run_id = $1 AND path = $2 AND file_offset > $3 ORDER BY file_offset LIMIT 64",
        [id, path, offset],
      );
      for (const r of page.rows) yield r.data;
      const last = page.rows[page.rows.length - 1];
      if (last === undefined || page.rows.length < 64) return;
      offset = last.file_offset;
    }
  }
  return { name, size: total, open: () => Readable.from(pieces()) };
}
