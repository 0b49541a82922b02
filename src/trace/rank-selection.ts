/**
 * Which ranks write traces: `all`, a list `0,2`, ranges `0-3`, or a mix `0-3,8`
 * (config `ranks`, or env `RANKSCOPE_TRACE_RANKS`).
 */
import { describeValue } from "../core/collector.js";

/** A parsed selection: every rank, or a set of them. */
export type RankSelection = "all" | ReadonlySet<number>;

const VALID = `valid: "all", a list like "0,2", a range like "0-3", or a mix like "0-3,8"`;

/** Parse a selection; throws a TypeError that says what is valid. */
export function parseRankSelection(spec: string | readonly number[], where = "ranks"): RankSelection {
  if (Array.isArray(spec)) {
    for (const r of spec) {
      if (!Number.isInteger(r) || r < 0)
        throw new TypeError(`${where}: ${describeValue(r)} is not a rank number (an integer ≥ 0); ${VALID}`);
    }
    return new Set(spec);
  }
  if (typeof spec !== "string")
    throw new TypeError(`${where} must be a string or an array of rank numbers, got ${describeValue(spec)}; ${VALID}`);
  const text = spec.trim().toLowerCase();
  if (text === "all" || text === "*") return "all";
  const ranks = new Set<number>();
  for (const part of text.split(",")) {
    const item = part.trim();
    const range = /^(\d+)\s*-\s*(\d+)$/.exec(item);
    if (range !== null) {
      const from = Number(range[1]);
      const to = Number(range[2]);
      if (from > to)
        throw new TypeError(`${where}: range "${item}" runs backwards; write the smaller rank first (e.g. "0-3")`);
      if (to - from > 1_000_000)
        throw new TypeError(`${where}: range "${item}" is too large (more than a million ranks)`);
      for (let r = from; r <= to; r++) ranks.add(r);
    } else if (/^\d+$/.test(item)) {
      ranks.add(Number(item));
    } else {
      throw new TypeError(
        `${where}: ${JSON.stringify(spec)} is not a rank selection (bad part ${JSON.stringify(item)}); ${VALID}`,
      );
    }
  }
  return ranks;
}

/** True when `rank` is selected. */
export function rankSelected(selection: RankSelection, rank: number): boolean {
  return selection === "all" || selection.has(rank);
}
