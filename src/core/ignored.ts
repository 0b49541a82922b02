/**
 * What a process ignored of what it received, by kind: counted (`ignoredMessageCounts()`),
 * reported at a bounded rate, and logged per flush as `rankscope/rejected/{kind}`.
 */
import { warnAtBoundedRate } from "./diagnostics.js";
import { processWide } from "./process-wide.js";

/**
 * Counts of messages (or parts of them) this process ignored, by kind. Every kind but `late` is a
 * rejection: each is also logged per flush as `rankscope/rejected/{kind}` (`REJECTED_KEY_PREFIX`).
 */
export interface IgnoredMessageCounts {
  /** Not JSON, not a message of this protocol's shape, or a frame that cannot be read. */
  malformed: number;
  /** Another program's, another run's or another protocol version's, or from someone not registered here. */
  foreign: number;
  /** An answer after its deadline (not a rejection: its values go into that rank's next flush). */
  late: number;
  /** Over NATS: not sealed with the run secret, or its authentication tag does not verify. */
  unauthenticated: number;
  /** Received before: a replayed message, or an answer already used. */
  replayed: number;
  /** Outside the receiver's window: sealed too long ago, or older than the last 1,024 of its sender. */
  stale: number;
  /** A state that does not fit its reduction's shape (types, lengths, ranges). */
  invalidState: number;
  /** A name or id (rank, process, host, run, key, reduce) out of bounds in length or characters. */
  invalidName: number;
  /** A request the receiver's own side does not allow: a module to import, or a backend's destination or path. */
  refused: number;
}

/** The kinds of `IgnoredMessageCounts`. */
export type IgnoredKind = keyof IgnoredMessageCounts;

/** The kinds that are rejections (every kind but `late`), in the order they are logged. */
export const REJECTION_KINDS: readonly IgnoredKind[] = [
  "unauthenticated",
  "replayed",
  "stale",
  "malformed",
  "foreign",
  "invalidState",
  "invalidName",
  "refused",
];

/** How many messages this process has ignored since it started, by kind. */
export function ignoredMessageCounts(): IgnoredMessageCounts {
  return processWide("transport.ignoredByKind", (): IgnoredMessageCounts => ({
    malformed: 0,
    foreign: 0,
    late: 0,
    unauthenticated: 0,
    replayed: 0,
    stale: 0,
    invalidState: 0,
    invalidName: 0,
    refused: 0,
  }));
}

/** How often each kind is reported again while it keeps happening (the first is reported at once). */
export const IGNORED_REPORT_INTERVAL_MS = 60_000;

/** Count and report a message (or a part of one) that was ignored; reports are bounded in rate per kind. */
export function reportIgnored(reason: IgnoredKind, detail: string): void {
  ignoredMessageCounts()[reason]++;
  warnAtBoundedRate(
    `transport.${reason}`,
    `${detail}; ignored (counted in ignoredMessageCounts().${reason})`,
    IGNORED_REPORT_INTERVAL_MS,
  );
}

/**
 * The rejections of this process since the previous call, by kind (those that happened): what a
 * process logs at each flush as `rankscope/rejected/{kind}`, so an attack shows in the run's data.
 */
export function takeRejectionsSinceLastFlush(): Array<[kind: IgnoredKind, count: number]> {
  const counts = ignoredMessageCounts();
  const logged = processWide("transport.rejectionsLogged", (): Partial<Record<IgnoredKind, number>> => ({}));
  const out: Array<[IgnoredKind, number]> = [];
  for (const kind of REJECTION_KINDS) {
    const delta = counts[kind] - (logged[kind] ?? 0);
    if (delta > 0) {
      out.push([kind, delta]);
      logged[kind] = counts[kind];
    }
  }
  return out;
}

/** A value quoted in a report, cut short (a hostile message may carry 200 KB where a name goes). */
export function shortText(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 80)}… (${text.length} characters)` : text;
}
