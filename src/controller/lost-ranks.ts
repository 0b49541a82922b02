/**
 * Ranks the controller lost: a rank whose process or thread ended without being shut down (a
 * crash, `kill -9`), or a NATS rank that fell silent. Each loss is named once in a warning by the
 * transport that saw it; here it is kept for the rest of the run: counted at every flush
 * (`rankscope/ranks_lost`, also `FlushResult.lostRanks`) and handed to the backends that record
 * such events (`Backend.logRankLoss`: the store, for the dashboard's lost-rank marks). A silent
 * NATS rank that answers again is back: no longer counted, its loss marked as ended. The `rank_lost`
 * alert reads the ranks lost now (`refs`) at every flush.
 */
import type { KeyState } from "../core/key-state.js";
import { RANKS_LOST_KEY } from "../core/internal-keys.js";
import type { RankLoss } from "../core/metric.js";
import type { RankIdentity } from "../core/rank-identity.js";
import type { LostRankRef } from "../alerts/engine.js";
import { singleValueState } from "../pipeline/reduce-states.js";

/** The ranks lost so far and what to tell the backends. */
export class LostRanks {
  private readonly lost = new Map<string, RankLoss>();
  /** The host of a lost rank, where the transport that lost it knew it. */
  private readonly hosts = new Map<string, string>();
  private everLost = false;

  /**
   * Note a rank as lost after `lastStep` (null before the first flush); returns the event for the
   * backends, or undefined when it was already lost (a second report of the same loss).
   */
  lose(identity: RankIdentity, reason: string, lastStep: number | null, host?: string): RankLoss | undefined {
    if (this.lost.has(identity.rankName)) return undefined;
    const loss: RankLoss = {
      rank: identity.rank,
      rankName: identity.rankName,
      step: lastStep,
      timestamp: Date.now(),
      reason,
    };
    this.lost.set(identity.rankName, loss);
    if (host !== undefined) this.hosts.set(identity.rankName, host);
    this.everLost = true;
    return loss;
  }

  /** A lost rank answers again (a silent NATS rank): the event for the backends, or undefined if it was not lost. */
  back(identity: RankIdentity, step: number | null): RankLoss | undefined {
    const loss = this.lost.get(identity.rankName);
    if (loss === undefined) return undefined;
    this.lost.delete(identity.rankName);
    this.hosts.delete(identity.rankName);
    return { ...loss, step, timestamp: Date.now(), reason: "answered again", back: true };
  }

  /** Names of the ranks lost now, in the order they were lost. */
  get names(): string[] {
    return [...this.lost.keys()];
  }

  /** The ranks lost now as `rank_lost` names them (number, name, host where known, why), in the order they were lost. */
  refs(): LostRankRef[] {
    return [...this.lost.values()].map((l) => {
      const host = this.hosts.get(l.rankName);
      return { rank: l.rank, rankName: l.rankName, reason: l.reason, ...(host === undefined ? {} : { host }) };
    });
  }

  /** `rankscope/ranks_lost` for a flush: at every flush once a rank was ever lost (0 again when all came back). */
  states(): KeyState[] {
    return this.everLost ? [{ key: RANKS_LOST_KEY, reduce: "mean", state: singleValueState(this.lost.size) }] : [];
  }
}
