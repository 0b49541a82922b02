/**
 * The Chrome trace event format as rankscope writes it (the subset Perfetto and chrome://tracing
 * read): complete events `X`, instants `i`, counters `C` and metadata `M`; `ts` and `dur` in
 * microseconds since the Unix epoch, `pid` the rank (the controller: `CONTROLLER_TRACE_PID`), `tid`
 * a lane within the rank.
 *
 * A per-rank file is an unterminated JSON array: `[` on the first line, then one event per line,
 * each followed by a comma. The trace viewers accept the missing `]`, so a file cut short by a
 * crash still opens, up to its last full line.
 */

/** Categories, as AReaL's perf tracer has them. */
export const TRACE_CATEGORIES = ["compute", "comm", "io", "sync", "scheduler", "instr", "misc"] as const;
/** What kind of work a span is. */
export type TraceCategory = (typeof TRACE_CATEGORIES)[number];

/** One event of a trace file. */
export interface TraceEvent {
  name: string;
  /** `X` complete, `i` instant, `C` counter, `M` metadata. */
  ph: "X" | "i" | "C" | "M";
  cat?: string;
  /** Start, µs since the epoch (absent on metadata). */
  ts?: number;
  /** Duration in µs (complete events). */
  dur?: number;
  pid: number;
  tid: number;
  /** Scope of an instant: `t` thread. */
  s?: "t" | "p" | "g";
  args?: Record<string, unknown>;
}

/** The first line of a per-rank trace file. */
export const TRACE_FILE_HEADER = "[\n";

/** One event as a line of a per-rank file (JSON, a comma, a newline). */
export function traceEventLine(event: TraceEvent): string {
  return `${JSON.stringify(event)},\n`;
}

/**
 * The metadata events that name a process in a viewer: `[role] Rank r` sorted by rank, or
 * `[role] Controller` sorted first.
 */
export function processMetadata(target: {
  readonly pid: number;
  readonly rank: number;
  readonly role: string;
  readonly controller: boolean;
}): TraceEvent[] {
  const { pid, rank, role, controller } = target;
  return [
    {
      name: "process_name",
      ph: "M",
      pid,
      tid: 0,
      args: { name: controller ? `[${role}] Controller` : `[${role}] Rank ${rank}` },
    },
    { name: "process_sort_index", ph: "M", pid, tid: 0, args: { sort_index: controller ? -1 : rank } },
  ];
}

/** The metadata event that names a row (thread) of a process. */
export function threadMetadata(pid: number, tid: number, name: string): TraceEvent {
  return { name: "thread_name", ph: "M", pid, tid, args: { name } };
}
