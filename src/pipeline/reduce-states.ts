/**
 * From accumulator states to what backends receive. One function serves both places a reduction
 * happens: a rank reducing its own states (`per_rank_reduce`) and the controller merging every
 * rank's states (`global_reduce`).
 */
import type { SumState } from "../core/accumulators/moments.js";
import type { KeyState } from "../core/key-state.js";
import { describeError, reportError } from "../core/diagnostics.js";
import type { HistogramMetric, Metric } from "../core/metric.js";
import { withSuffix } from "../core/attributes.js";
import type { AccumulatorState, SampleRecord } from "../core/reduce.js";
import { getReduceDefinition } from "../core/registry.js";

/** Everything one flush hands to backends. */
export interface ReducedFlush {
  readonly metrics: Metric[];
  readonly histograms: HistogramMetric[];
  readonly samples: Record<string, SampleRecord[]>;
}

/** The states of one rank at one flush. */
export interface RankStates {
  readonly rankName: string;
  readonly states: readonly KeyState[];
}

/** Where the metrics go and when they were taken. */
export interface ReduceTarget {
  readonly step: number;
  readonly timestamp: number;
  /** Set for per-rank modes, so each metric says which rank it belongs to. */
  readonly rankName?: string;
  /** Set when the metrics have an x-axis of their own (see `Metric.axis`). */
  readonly axis?: string;
}

/**
 * Merge the states of several ranks (or of several flushes of one place) key by key, without
 * reducing them: the merged states can be merged again later (a backend with `every: N` keeps
 * them until its N-th flush). Sorted by key. A key recorded with different reductions on
 * different ranks is reported (naming the key and the ranks) and left out; every other key is
 * still logged.
 */
export function mergeRankKeyStates(ranks: readonly RankStates[], step: number): KeyState[] {
  // One group per key: its reduction and states. Which rank used which reduction is looked up
  // again only for a key recorded with two (a conflict is rare; no per-key bookkeeping otherwise).
  const byKey = new Map<string, { reduce: string; states: AccumulatorState[]; conflict: boolean }>();
  for (const rank of ranks) {
    for (const s of rank.states) {
      const group = byKey.get(s.key);
      if (group === undefined) byKey.set(s.key, { reduce: s.reduce, states: [s.state], conflict: false });
      else {
        group.states.push(s.state);
        if (s.reduce !== group.reduce) group.conflict = true;
      }
    }
  }
  const merged: KeyState[] = [];
  for (const [key, group] of byKey) {
    if (group.conflict) {
      const ranksByReduce = new Map<string, string[]>();
      for (const rank of ranks) {
        for (const s of rank.states) {
          if (s.key !== key) continue;
          const names = ranksByReduce.get(s.reduce);
          if (names === undefined) ranksByReduce.set(s.reduce, [rank.rankName]);
          else names.push(rank.rankName);
        }
      }
      const detail = [...ranksByReduce].map(([reduce, names]) => `"${reduce}" on ${names.join(", ")}`).join("; ");
      reportError(
        `reduce.conflict:${key}`,
        `metric "${key}" was recorded with different reductions on different ranks (${detail}); it is not logged at step ${step}. ` +
          `Record it with one reduction everywhere, or use different keys.`,
      );
      continue;
    }
    try {
      const definition = getReduceDefinition(group.reduce);
      const only = group.states.length === 1 ? group.states[0] : undefined;
      merged.push({ key, reduce: group.reduce, state: only ?? definition.merge(group.states) });
    } catch (error) {
      reportError(
        `reduce.merge:${key}`,
        `could not merge metric "${key}" (reduce "${group.reduce}"): ${describeError(error)}`,
      );
    }
  }
  merged.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return merged;
}

/** A `sum`/`mean` state holding one value: how the controller records counts of its own. */
export function singleValueState(value: number): SumState {
  return { v: 1, count: 1, sum: value };
}

/** Turn merged (or a single rank's) states into metrics, histograms and samples, sorted by key. */
export function reduceStates(states: readonly KeyState[], target: ReduceTarget): ReducedFlush {
  const metrics: Metric[] = [];
  const histograms: HistogramMetric[] = [];
  const samples: Record<string, SampleRecord[]> = {};
  const rank = {
    ...(target.rankName === undefined ? {} : { rankName: target.rankName }),
    ...(target.axis === undefined ? {} : { axis: target.axis }),
  };
  for (const { key, reduce, state } of states) {
    if (state.count === 0) continue;
    let definition;
    try {
      definition = getReduceDefinition(reduce);
    } catch (error) {
      reportError(
        `reduce.unknown:${reduce}`,
        `metric "${key}": ${describeError(error)}; register it on the controller too`,
      );
      continue;
    }
    const value = definition.value(state);
    // `+ 0` turns −0 into 0 (IEEE: −0 + 0 = +0) and leaves every other value as it is: rankscope
    // reports −0 as 0 in every sink (docs/DESIGN.md, "Values in every sink").
    if (typeof value === "number") {
      metrics.push({ key, value: value + 0, reduce, step: target.step, timestamp: target.timestamp, ...rank });
    } else {
      for (const [suffix, scalar] of Object.entries(value)) {
        metrics.push({
          key: withSuffix(key, suffix),
          value: scalar + 0,
          reduce,
          step: target.step,
          timestamp: target.timestamp,
          ...rank,
        });
      }
    }
    if (definition.histogram !== undefined) {
      histograms.push({
        key,
        step: target.step,
        timestamp: target.timestamp,
        histogram: definition.histogram(state),
        ...rank,
      });
    }
    if (definition.samples !== undefined) samples[key] = definition.samples(state);
  }
  metrics.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { metrics, histograms, samples };
}
