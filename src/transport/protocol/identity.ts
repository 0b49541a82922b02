/**
 * Rank names and run ids: short, stable, and safe in a NATS subject.
 *
 * A spawned rank is `{processName}_{replicaId}_r{localRank}` (Forge's form, e.g. `MyActor_661W_r0`).
 * The replica id is a 4-character hash of the process name and the replica's index, so the same
 * job prints the same names every run.
 */
import type { RankIdentity } from "../../core/rank-identity.js";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** A 4-character base-62 id derived from `text` (FNV-1a), stable across runs and machines. */
export function shortId(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  let id = "";
  for (let i = 0; i < 4; i++) {
    id += BASE62[hash % 62];
    hash = Math.floor(hash / 62);
  }
  return id;
}

/** `{processName}_{replicaId}_r{localRank}`. */
export function rankNameFor(processName: string, replicaId: string, localRank: number): string {
  return `${processName}_${replicaId}_r${localRank}`;
}

const TOKEN = /^[A-Za-z0-9_-]+$/;

/**
 * Longest run id, rank name, process name or host id. Each is a token of NATS subjects, and a
 * subject must fit the server's control line (4 KB by default): a longer name would make the
 * server drop the connection that publishes to it.
 */
export const MAX_NAME_LENGTH = 128;

/** True if `value` can be one token of a NATS subject: letters, digits, `_`, `-`, at most `MAX_NAME_LENGTH`. */
export function isSubjectToken(value: unknown): value is string {
  return typeof value === "string" && value.length <= MAX_NAME_LENGTH && TOKEN.test(value);
}

/** Throw a TypeError unless `value` can be one token of a NATS subject (a run id, a rank name). */
export function assertSubjectToken(what: string, given: string): void {
  const value: unknown = given;
  if (!isSubjectToken(value)) {
    const shown =
      typeof value === "string" && value.length > 60
        ? `${JSON.stringify(value.slice(0, 60))}… (${value.length} characters)`
        : JSON.stringify(value);
    throw new TypeError(
      `${what} must be 1 to ${MAX_NAME_LENGTH} letters, digits, "_" or "-" (it is part of NATS subjects), got ${shown}`,
    );
  }
}

/** Check an identity received from a user or the environment, with errors that say what is wrong. */
export function checkIdentity(identity: RankIdentity): RankIdentity {
  const { rank, localRank, localWorldSize } = identity;
  if (!Number.isInteger(rank) || rank < 0)
    throw new TypeError(`rank must be a non-negative integer, got ${String(rank)}`);
  if (!Number.isInteger(localWorldSize) || localWorldSize < 1)
    throw new TypeError(`localWorldSize must be a positive integer, got ${String(localWorldSize)}`);
  if (!Number.isInteger(localRank) || localRank < 0 || localRank >= localWorldSize) {
    throw new TypeError(`localRank must be an integer in [0, ${localWorldSize}), got ${String(localRank)}`);
  }
  assertSubjectToken("processName", identity.processName);
  assertSubjectToken("rankName", identity.rankName);
  return identity;
}
