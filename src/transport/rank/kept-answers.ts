/**
 * A rank's flush answers that its receiver (the controller, or its host agent) has not acknowledged
 * yet. Each is kept until acknowledged, and sent again with every later answer until then
 * (`carried`), so an answer lost in transit is carried into the next flush — once: the receiver
 * takes each answer number once. Bounded in answers and in the key states they hold together; the
 * newest is always kept. An answer dropped at the bound before any acknowledgement is reported and
 * counted (`transportStats().lostAnswers`): if it never reached its receiver, its values are lost.
 */
import { reportError } from "../../core/diagnostics.js";
import type { RankTiming } from "../../core/step-timing.js";
import type { RankSnapshot } from "../../pipeline/rank-handle.js";
import { transportStats } from "../protocol/messages.js";
import { frameKeyStates, StateDecoder, type KeyTable } from "../wire/codec.js";

/**
 * How many unacknowledged flush answers a rank keeps, and how many key states they may hold
 * together (the newest answer is always kept).
 */
export const KEPT_FLUSH_ANSWERS = 16;
const KEPT_FLUSH_STATES = 20_000;

/** A flush answer kept as the frame it was sent as (read again with its key table only if it must be sent again). */
export interface KeptFrame {
  readonly seq: number;
  readonly step: number;
  readonly droppedKeyRecords: number;
  readonly bytes: Uint8Array;
  readonly table: KeyTable;
  readonly stateCount: number;
  readonly timing?: RankTiming;
}

/** One rank's unacknowledged flush answers, oldest first. */
export class KeptAnswers {
  private readonly kept: Array<RankSnapshot | KeptFrame> = [];
  private keptStates = 0;

  constructor(private readonly rankName: string) {}

  /** The key-bound count of the last answer made (0 before any). */
  private lastDropped = 0;
  get lastDroppedKeyRecords(): number {
    return this.lastDropped;
  }

  /** Numbers of the kept flush answers (none acknowledged), oldest first. */
  unacknowledged(): number[] {
    return this.kept.flatMap((k) => (k.seq === undefined ? [] : [k.seq]));
  }

  /** The receiver took these answers of this rank (logged, or kept in an answer of its own): they are dropped. */
  acknowledge(seqs: readonly number[] | undefined): void {
    if (seqs === undefined || seqs.length === 0) return;
    const acked = new Set(seqs);
    for (let i = this.kept.length - 1; i >= 0; i--) {
      const k = this.kept[i];
      if (k === undefined || k.seq === undefined || !acked.has(k.seq)) continue;
      this.kept.splice(i, 1);
      this.keptStates -= statesOf(k);
    }
  }

  /**
   * Keep a flush answer until it is acknowledged. The bound is applied before the kept answers are
   * sent again (`carried`), never to answers just sent: what goes with an answer is what is kept.
   */
  keep(answer: RankSnapshot | KeptFrame, states: number): void {
    this.kept.push(answer);
    this.keptStates += states;
    this.lastDropped = answer.droppedKeyRecords;
  }

  /**
   * Every kept (unacknowledged) answer as a snapshot, oldest first: what goes again with the next
   * answer. First the oldest are dropped (reported, counted) past `KEPT_FLUSH_ANSWERS - 1` answers
   * or `KEPT_FLUSH_STATES` states, so that with the next answer at most `KEPT_FLUSH_ANSWERS` are kept.
   */
  carried(): RankSnapshot[] {
    while (this.kept.length > 0 && (this.kept.length >= KEPT_FLUSH_ANSWERS || this.keptStates > KEPT_FLUSH_STATES)) {
      const dropped = this.kept.shift();
      if (dropped === undefined) break;
      this.keptStates -= statesOf(dropped);
      transportStats().lostAnswers++;
      reportError(
        `transport.unackedDropped:${this.rankName}`,
        `rank ${this.rankName}: flush answer ${dropped.seq ?? "?"} (flush(${dropped.step})) was never acknowledged and is no longer kept (a rank keeps ${KEPT_FLUSH_ANSWERS} unacknowledged answers, ${KEPT_FLUSH_STATES} states); if it never reached its receiver, its values are lost (counted in transportStats().lostAnswers)`,
      );
    }
    return this.kept.map((k) => ("bytes" in k ? this.snapshotOf(k) : k));
  }

  /** The kept answer numbered `seq` as a snapshot, or an error saying it is no longer kept. */
  resend(seq: number): RankSnapshot {
    const kept = this.kept.find((s) => s.seq === seq);
    if (kept === undefined)
      throw new Error(`flush answer ${seq} is no longer kept (acknowledged already, or past the rank's bound)`);
    return "bytes" in kept ? this.snapshotOf(kept) : kept;
  }

  /** A kept frame as the snapshot it stands for (read with the key table it was written with). */
  private snapshotOf(kept: KeptFrame): RankSnapshot {
    const states = frameKeyStates(StateDecoder.holding(kept.table).decode(kept.bytes));
    return {
      rankName: this.rankName,
      step: kept.step,
      seq: kept.seq,
      states,
      droppedKeyRecords: kept.droppedKeyRecords,
      ...(kept.timing === undefined ? {} : { timing: kept.timing }),
    };
  }
}

function statesOf(answer: RankSnapshot | KeptFrame): number {
  return "bytes" in answer ? answer.stateCount : answer.states.length;
}
