/**
 * `RankGroup`: the ranks one `spawnRanks` call started, and the calls made on them (`fanout`,
 * `fanoutSettled`, `call`), their output and their stop. A rank that goes away is left out of a
 * `fanout` (the loss is warned about, counted and alerted by the controller), so a loop outlives it.
 */
import { randomUUID } from "node:crypto";
import { endingBySignal, untilTheEnd } from "../../core/lifecycle.js";
import type { RankIdentity } from "../../core/rank-identity.js";
import type { RankController } from "../../pipeline/default-logger.js";
import { waitAtMost } from "./remote-rank.js";
import { RankClosedError } from "./rank-carrier.js";
import type { SpawnedRank } from "./rank-start.js";

/**
 * One rank's outcome of `RankGroup.fanoutSettled`, as `Promise.allSettled` words it: `fulfilled`
 * with the value its function returned, or `rejected` with why (`lost`: the rank went away).
 */
export type RankCallResult<T = unknown> =
  | { readonly rank: number; readonly rankName: string; readonly status: "fulfilled"; readonly value: T }
  | {
      readonly rank: number;
      readonly rankName: string;
      readonly status: "rejected";
      /** What the call failed with: a `RankClosedError` for a rank that went away, else the rank's error or a `RankDeadlineError`. */
      readonly reason: unknown;
      /** True when the rank went away (its process or thread ended, its carrier closed) before it answered. */
      readonly lost: boolean;
    };

/** The ranks one `spawnRanks` call started. */
export class RankGroup {
  /** @internal */
  constructor(
    private readonly spawned: readonly SpawnedRank[],
    private readonly logger: RankController,
  ) {}

  /** Who the ranks are, in rank order. */
  get ranks(): readonly RankIdentity[] {
    return this.spawned.map((s) => s.identity);
  }

  get rankNames(): string[] {
    return this.spawned.map((s) => s.identity.rankName);
  }

  /** Ranks still running. */
  get liveRankNames(): string[] {
    return this.spawned.filter((s) => s.handle.closed === null).map((s) => s.identity.rankName);
  }

  /** The process id of a rank (child processes only). */
  pid(rankName: string): number | undefined {
    return this.find(rankName).child?.pid;
  }

  /**
   * Call an exported function of the rank module on every live rank, with JSON-serialisable
   * arguments (Forge's `fanout`). Resolves with the results of the ranks that answered, in rank
   * order. A rank that goes away before it answers (its process or thread ends, its carrier
   * closes: a `RankClosedError`) is left out of the results instead of failing the call, so a
   * training loop outlives a lost rank; the loss is never silent: it is warned about, counted at
   * every later flush (`FlushResult.lostRanks`, `rankscope/ranks_lost`), raised as a `rank_lost`
   * alert, and later calls go to the live ranks only. `fanoutSettled` says which rank gave what.
   * Rejects naming the rank when a call fails otherwise (the function threw, no answer by the
   * deadline), and with a `RankClosedError` when no rank of the group is left. Once the process
   * is ending by a signal rankscope drains, it never settles (the loop parks until the process
   * ends; docs/lifecycle.md).
   */
  async fanout<T = unknown>(fn: string, ...args: unknown[]): Promise<T[]> {
    if (endingBySignal()) return untilTheEnd();
    const settled = await quietWhileEnding(this.callEvery<T>(fn, args));
    const values: T[] = [];
    for (const result of settled) {
      if (result.status === "fulfilled") values.push(result.value);
      else if (!result.lost) throw result.reason;
    }
    if (values.length === 0 && settled.every((r) => r.status === "rejected"))
      throw new RankClosedError(
        `fanout("${fn}"): no rank of this group is left (${settled.map((r) => r.rankName).join(", ")} went away)`,
      );
    return values;
  }

  /**
   * `fanout` settled per rank, like `Promise.allSettled`: one result for every rank of the group,
   * in rank order (the same order as `ranks`), each `fulfilled` with the rank's `value` or
   * `rejected` with its `reason`. `lost` is true for a rank that went away (before or during the
   * call: a `RankClosedError`). Never rejects for one rank's failure. Once the process is ending by
   * a signal rankscope drains, it never settles (as `fanout`).
   */
  async fanoutSettled<T = unknown>(fn: string, ...args: unknown[]): Promise<RankCallResult<T>[]> {
    if (endingBySignal()) return untilTheEnd();
    return quietWhileEnding(this.callEvery<T>(fn, args));
  }

  /**
   * Call an exported function on one rank. Rejects with a `RankClosedError` when that rank went
   * away (before or during the call), naming it and why.
   */
  async call<T = unknown>(rankName: string, fn: string, ...args: unknown[]): Promise<T> {
    if (endingBySignal()) return untilTheEnd();
    return (await quietWhileEnding(this.find(rankName).handle.call(fn, args))) as T;
  }

  /** `fn` on every rank still running, settled per rank; ranks gone before the call are `lost` at once. */
  private callEvery<T>(fn: string, args: readonly unknown[]): Promise<RankCallResult<T>[]> {
    return Promise.all(
      this.spawned.map(async ({ identity: { rank, rankName }, handle }): Promise<RankCallResult<T>> => {
        try {
          return { rank, rankName, status: "fulfilled", value: (await handle.call(fn, args)) as T };
        } catch (reason) {
          return { rank, rankName, status: "rejected", reason, lost: reason instanceof RankClosedError };
        }
      }),
    );
  }

  /**
   * Wait until everything the live ranks wrote to stdout so far has been forwarded here. Their
   * per-rank console output is written by other processes; this makes it appear before what this
   * process prints next. With `output: "ordered"`, prints the held lines rank by rank.
   */
  async syncOutput(deadlineMs = 5000): Promise<void> {
    const live = this.spawned.filter((s) => s.handle.closed === null);
    await Promise.all(
      live.map(async (s) => {
        const { marker, arrived } = s.stdout.expect(randomUUID());
        try {
          await s.handle.sync(marker, deadlineMs);
          await waitAtMost(arrived, deadlineMs);
        } catch {
          // A rank that died meanwhile has nothing more to say.
        }
      }),
    );
    for (const s of this.spawned) s.stdout.release();
  }

  /** Stop these ranks (deregistering them), killing any that does not stop within the deadline. */
  async stop(deadlineMs = 5000): Promise<void> {
    await Promise.all(
      this.spawned.map(async (s) => {
        this.logger.deregisterRank(s.identity.rankName);
        await s.handle.shutdown(deadlineMs);
      }),
    );
  }

  private find(rankName: string): SpawnedRank {
    const found = this.spawned.find((s) => s.identity.rankName === rankName);
    if (found === undefined)
      throw new Error(`no rank named "${rankName}" in this group; ranks: ${this.rankNames.join(", ")}`);
    return found;
  }
}

/**
 * A call made before a signal that fails because the lifecycle is stopping the ranks never settles
 * either: the process is about to end by that signal, and the user's loop must not see a rejection
 * (it would become an uncaught exception and change how the process ends).
 */
function quietWhileEnding<T>(call: Promise<T>): Promise<T> {
  return call.catch((error: unknown) => {
    if (endingBySignal()) return untilTheEnd<T>();
    throw error;
  });
}
