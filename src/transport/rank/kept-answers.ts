/**
 * A rank's last flush answers, kept so one lost in transit can be sent again (`resend`), and
 * which of them a controller acknowledged (logged; see `AckMessage`). Bounded in answers and in the
 * key states they hold together; the newest is always kept. An answer dropped before any
 * controller acknowledged it is reported: if the controller that took it died, its values are lost.
 */
import { reportError } from "../../core/diagnostics.js";
import type { RankTiming } from "../../core/step-timing.js";
import type { RankSnapshot } from "../../pipeline/rank-handle.js";
import { frameKeyStates, StateDecoder, type KeyTable } from "../wire/codec.js";

/**
 * How many of its last flush answers a rank keeps, to send again one that was lost in transit, and
 * how many key states they may hold together (the newest answer is always kept).
 */
export const KEPT_FLUSH_ANSWERS = 16;
const KEPT_FLUSH_STATES = 20_000;

/** A flush answer kept as the frame it was sent as (read again with its key table only if asked to resend it). */
export interface KeptFrame {
  readonly seq: number;
  readonly step: number;
  readonly droppedKeyRecords: number;
  readonly bytes: Uint8Array;
  readonly table: KeyTable;
  readonly stateCount: number;
  readonly timing?: RankTiming;
}

/** One rank's kept flush answers. */
export class KeptAnswers {
  private readonly kept: Array<RankSnapshot | KeptFrame> = [];
  private keptStates = 0;
  /** Kept answers a controller acknowledged (logged); see `AckMessage`. */
  private readonly acked = new Set<number>();
  /** Whether a controller of this rank acknowledges answers (then dropping an unacknowledged one is a possible loss). */
  private acksSeen = false;

  constructor(private readonly rankName: string) {}

  /** The key-bound count of the last answer kept (0 before any). */
  get lastDroppedKeyRecords(): number {
    return this.kept.at(-1)?.droppedKeyRecords ?? 0;
  }

  /** Numbers of the kept flush answers no controller acknowledged, oldest first. */
  unacknowledged(): number[] {
    return this.kept.flatMap((k) => (k.seq === undefined || this.acked.has(k.seq) ? [] : [k.seq]));
  }

  /** A controller logged these answers of this rank: they need not be sent to another one. */
  acknowledge(seqs: readonly number[] | undefined): void {
    if (seqs === undefined) return;
    this.acksSeen = true;
    for (const seq of seqs) if (this.kept.some((k) => k.seq === seq)) this.acked.add(seq);
  }

  /** Keep a flush answer for a resend (the last few, bounded by their states; the newest always). */
  keep(answer: RankSnapshot | KeptFrame, states: number): void {
    this.kept.push(answer);
    this.keptStates += states;
    while (this.kept.length > 1 && (this.kept.length > KEPT_FLUSH_ANSWERS || this.keptStates > KEPT_FLUSH_STATES)) {
      const dropped = this.kept.shift();
      if (dropped === undefined) break;
      this.keptStates -= "bytes" in dropped ? dropped.stateCount : dropped.states.length;
      if (dropped.seq !== undefined && !this.acked.delete(dropped.seq) && this.acksSeen) {
        reportError(
          `transport.unackedDropped:${this.rankName}`,
          `rank ${this.rankName}: flush answer ${dropped.seq} (flush(${dropped.step})) was never acknowledged by a controller and is no longer kept (a rank keeps ${KEPT_FLUSH_ANSWERS}); if the controller that took it died before logging it, its values are lost (counted here)`,
        );
      }
    }
  }

  /** The kept answer numbered `seq` as a snapshot, or an error saying it is no longer kept. */
  resend(seq: number): RankSnapshot {
    const kept = this.kept.find((s) => s.seq === seq);
    if (kept === undefined)
      throw new Error(`flush answer ${seq} is no longer kept (a rank keeps its last ${KEPT_FLUSH_ANSWERS})`);
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
