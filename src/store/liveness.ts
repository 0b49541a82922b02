/**
 * Whether the process behind a store writer is still alive, as a reader can tell (docs/lifecycle.md,
 * "A killed run"): a run whose processes were killed (`kill -9`, OOM killer, power loss) never
 * marks itself ended, so readers decide from what each writer left in `writers`.
 *
 * - On the writer's own host: its pid. Gone (`ESRCH`), a zombie, or a process started after the
 *   writer registered (the pid was reused) is dead — known at once.
 * - Anywhere (another host, or a pid that cannot be checked): its heartbeat, noted every
 *   `HEARTBEAT_MS` by the writer; one older than `HEARTBEAT_STALE_MS` is dead.
 */
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import { errorCode } from "../core/errors.js";
import { HEARTBEAT_STALE_MS } from "./schema.js";

/** What a reader knows of a writer still marked running. */
export interface WriterTrace {
  readonly pid: number | null;
  readonly host: string | null;
  /** Milliseconds since the epoch. */
  readonly startedAt: number | null;
  readonly heartbeatAt: number | null;
}

/** Linux: when the system booted (ms since the epoch), to date a process from `/proc/{pid}/stat`. */
let bootMs: number | null | undefined;

function bootTimeMs(): number | null {
  if (bootMs !== undefined) return bootMs;
  try {
    const line = /^btime (\d+)$/m.exec(readFileSync("/proc/stat", "utf8"));
    bootMs = line === null ? null : Number(line[1]) * 1000;
  } catch {
    bootMs = null;
  }
  return bootMs;
}

/** Clock ticks per second of `/proc/{pid}/stat`'s start time (USER_HZ, 100 on every Linux Node supports). */
const USER_HZ = 100;

/**
 * Linux's view of a live pid: false for a zombie, or for a process that started after `startedAt`
 * (plus a second of slack) — the writer's pid was reused. True when it cannot tell.
 */
function sameLiveProcess(pid: number, startedAt: number | null): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return true;
  }
  // The command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  if (fields[0] === "Z" || fields[0] === "X") return false;
  const boot = bootTimeMs();
  const ticks = Number(fields[19]);
  if (startedAt === null || boot === null || !Number.isFinite(ticks)) return true;
  return boot + (ticks / USER_HZ) * 1000 <= startedAt + 1000;
}

/** True when the writer's process is known to be gone (see the module comment); `now` in ms since the epoch. */
export function writerGone(writer: WriterTrace, now = Date.now()): boolean {
  const beat = writer.heartbeatAt ?? writer.startedAt;
  if (writer.host !== null && writer.host === hostname() && writer.pid !== null && writer.pid > 0) {
    try {
      process.kill(writer.pid, 0);
    } catch (error) {
      // EPERM: it exists (another user's); only ESRCH means gone.
      if (errorCode(error) === "ESRCH") return true;
      return beat !== null && now - beat > HEARTBEAT_STALE_MS;
    }
    return !sameLiveProcess(writer.pid, writer.startedAt);
  }
  // Another host (or a writer of an older version, without host or heartbeat: never judged dead).
  return writer.host !== null && beat !== null && now - beat > HEARTBEAT_STALE_MS;
}
