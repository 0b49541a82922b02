/**
 * The alerts engine: at every flush it judges the reduced values and the ranks' answers with the
 * configured rules, and between flushes a watchdog judges time (`stalled`). It returns (or, for
 * the watchdog, emits) the events to deliver; delivering them is `ControllerAlerts`' job.
 *
 * Evaluation is synchronous and allocation-light: a key's matching rules are found once and
 * cached, and each rule keeps its own state per key (docs/alerts.md; `npm run bench -- alerts`).
 */
import type { AlertEvent, AlertLevel, UserAlertCall } from "../core/alert.js";
import type { Metric } from "../core/metric.js";
import { Episodes, type EpisodeCounts, type EpisodeRule } from "./episodes.js";
import type { ResolvedAlertOptions } from "./options.js";
import { patternNames } from "./patterns.js";
import { ratioRules, type RatioRuleState } from "./ratio.js";
import type { ResolvedRule } from "./rule-config.js";
import {
  describeRank,
  judgeRanks,
  keyRules,
  type KeyJudge,
  type KeyRule,
  type RankRef,
  type RuleContext,
} from "./rules.js";

export type { RankRef };
export { globMatches } from "./patterns.js";

/**
 * A rank as the straggler attribution reports it at one flush (docs/stragglers.md): who it is and
 * whether it is chronic (among the slowest in at least half of the recent flushes). The
 * `straggler` rule reads only this: a rank with `chronic` true is in its condition; one that is
 * not (or is not listed) is not. A report's chronic ranks and its slowest ranks both fit it.
 */
export interface StragglerInput extends RankRef {
  readonly chronic: boolean;
}

/** A lost rank as `rank_lost` names it: why it was lost, when the transport said. */
export interface LostRankRef extends RankRef {
  readonly reason?: string;
}

/** What the controller saw at one flush, as the rules read it. */
export interface FlushObservation {
  readonly step: number;
  /** When the flush's answers were in, in milliseconds since the epoch. */
  readonly at: number;
  /** The values reduced across ranks (what the `global_reduce` backends got). */
  readonly metrics: readonly Metric[];
  /**
   * Ranks that did not answer this flush in time (`missing`) and ranks lost (their process ended
   * without a shutdown, or a NATS rank fell silent). Absent: no evidence about ranks at this flush.
   */
  readonly ranks?: { readonly missing: readonly RankRef[]; readonly lost: readonly LostRankRef[] };
  /** The straggler attribution's ranks at this flush; absent: none was made (no evidence either way). */
  readonly stragglers?: readonly StragglerInput[];
}

/** Flush intervals the `stalled` rule takes the median of. */
const STALL_HISTORY = 20;
/** Intervals needed before `stalled` judges (the first steps are often slow: compilation, warm-up). */
const STALL_MIN_INTERVALS = 3;

type StalledRule = Extract<ResolvedRule, { kind: "stalled" }>;

/** The rules and their state, for one run. */
export class AlertEngine {
  private readonly episodes: Episodes;
  private readonly keyRules: KeyRule[];
  private readonly ratioRules: RatioRuleState[];
  /** Key → the judges of the key rules that apply to it (made on the key's first flush). */
  private readonly matching = new Map<string, readonly KeyJudge[]>();
  private readonly rankLost: EpisodeRule | undefined;
  private readonly straggler: EpisodeRule | undefined;
  private readonly stalled: (StalledRule & EpisodeRule) | undefined;
  private readonly intervals: number[] = [];
  private lastFlushAt: number | null = null;
  private lastStep: number | null = null;
  private watchdog: NodeJS.Timeout | null = null;
  private closed = false;

  /** `emit` gets the events the watchdog raises between flushes. */
  constructor(
    run: string,
    options: Pick<ResolvedAlertOptions, "rules" | "minIntervalMs" | "maxPerMinute">,
    private readonly emit: (events: AlertEvent[]) => void,
  ) {
    this.episodes = new Episodes(run, options);
    this.keyRules = keyRules(options.rules);
    this.ratioRules = ratioRules(options.rules);
    const indexed = options.rules.map((rule, index) => ({ ...rule, index }));
    this.rankLost = indexed.find((r) => r.kind === "rank_lost");
    this.straggler = indexed.find((r) => r.kind === "straggler");
    this.stalled = indexed.find((r): r is StalledRule & { index: number } => r.kind === "stalled");
  }

  /** Firings sent, resolves sent, and episodes held back by the rate limits, since the start. */
  get counts(): Readonly<EpisodeCounts> {
    return this.episodes.counts;
  }

  /** Judge one flush; returns the events it raised (firing and resolved), in rule order. */
  observeFlush(observation: FlushObservation): AlertEvent[] {
    if (this.closed) return [];
    const context: RuleContext = { episodes: this.episodes, events: [], step: observation.step, at: observation.at };
    this.lastStep = observation.step;
    this.judgeStall(observation, context);
    if (this.keyRules.length > 0) {
      for (const metric of observation.metrics) {
        if (metric.axis !== undefined) continue;
        const judges = this.matching.get(metric.key) ?? this.match(metric.key);
        for (const judge of judges) judge.observe(metric.value, context);
      }
    }
    for (const rule of this.ratioRules) rule.observe(observation.metrics, context);
    this.judgeRanksLost(observation, context);
    if (this.straggler !== undefined && observation.stragglers !== undefined) {
      judgeRanks(
        this.straggler,
        observation.stragglers.filter((r) => r.chronic),
        context,
        {
          start: (ref) =>
            `${describeRank(ref)} is a chronic straggler at step ${observation.step} (among the slowest ranks in most recent flushes)`,
          end: (subject) =>
            `${describeRank({ rankName: subject.rankName ?? "?", ...subject })} is no longer a chronic straggler at step ${observation.step}`,
        },
      );
    }
    return context.events;
  }

  /** `rank_lost`: the lost ranks and those that missed this flush, one episode per rank. */
  private judgeRanksLost(observation: FlushObservation, context: RuleContext): void {
    const ranks = observation.ranks;
    if (this.rankLost === undefined || ranks === undefined) return;
    const lost = new Map(ranks.lost.map((r) => [r.rankName, r]));
    judgeRanks(this.rankLost, [...ranks.lost, ...ranks.missing.filter((r) => !lost.has(r.rankName))], context, {
      start: (ref) => {
        const loss = lost.get(ref.rankName);
        const what =
          loss === undefined ? "did not answer the flush" : `was lost (${loss.reason ?? "it stopped answering"})`;
        return `${describeRank(ref)} ${what} at step ${observation.step}`;
      },
      end: (subject) =>
        `${describeRank({ rankName: subject.rankName ?? "?", ...subject })} answers again at step ${observation.step}`,
    });
  }

  /** A user's `alert(title, text, level)`: one event, never rate limited. */
  userAlert(call: UserAlertCall): AlertEvent {
    const message = call.text === "" ? call.title : `${call.title}: ${call.text}`;
    const subject = call.rankName === undefined ? {} : { rankName: call.rankName };
    return this.episodes.single({ name: "user", level: call.level }, subject, {
      step: this.lastStep,
      at: call.at,
      message,
      title: call.title,
    });
  }

  /** The step of the last flush observed (null before the first). */
  get step(): number | null {
    return this.lastStep;
  }

  /**
   * The run ended (`shutdown()`): stop judging, and close every episode still firing as `ended`,
   * so a finished run shows no alert as firing (a rank killed for good, a key still NaN). Returns
   * those events; nothing after the first call.
   */
  endRun(at: number = Date.now()): AlertEvent[] {
    if (this.closed) return [];
    this.close();
    const step = this.lastStep;
    return this.episodes.endAll(() => ({
      step,
      at,
      message: `the run ended while this was firing${step === null ? "" : ` (last step ${step})`}`,
    }));
  }

  /** Stop the watchdog; nothing is judged after this. */
  close(): void {
    this.closed = true;
    if (this.watchdog !== null) clearTimeout(this.watchdog);
    this.watchdog = null;
  }

  /** The key rules that apply to `key`: `*` patterns never match rankscope's own keys, exact names do. */
  private match(key: string): readonly KeyJudge[] {
    const rules = this.keyRules.filter((rule) => patternNames(rule.pattern, key));
    const judges = rules.map((rule) => rule.judge(key));
    this.matching.set(key, judges);
    return judges;
  }

  /** A flush ends a stall; the watchdog is set again from the recent flush intervals. */
  private judgeStall(observation: FlushObservation, context: RuleContext): void {
    const rule = this.stalled;
    if (rule === undefined) return;
    const previous = this.lastFlushAt;
    if (previous !== null) {
      this.intervals.push(Math.max(0, observation.at - previous));
      if (this.intervals.length > STALL_HISTORY) this.intervals.shift();
      const event = this.episodes.end(rule, "", {
        step: observation.step,
        at: observation.at,
        message: `flushing again: step ${observation.step}, ${seconds(observation.at - previous)} after the last flush`,
      });
      if (event !== undefined) context.events.push(event);
    }
    this.lastFlushAt = observation.at;
    this.arm(rule);
  }

  private arm(rule: StalledRule & EpisodeRule): void {
    if (this.watchdog !== null) clearTimeout(this.watchdog);
    this.watchdog = null;
    if (this.intervals.length < STALL_MIN_INTERVALS) return;
    const median = medianOf(this.intervals);
    const afterMs = Math.max(rule.minMs, rule.factor * median);
    const since = this.lastFlushAt ?? Date.now();
    // Unref'd: a job that is done never waits for the watchdog.
    this.watchdog = setTimeout(() => {
      this.watchdog = null;
      if (this.closed) return;
      const at = Date.now();
      const message = `no flush for ${seconds(at - since)} after step ${String(this.lastStep)} (${rule.factor}× the median flush interval of ${seconds(median)}, at least ${seconds(rule.minMs)})`;
      const event = this.episodes.start(rule, "", {}, { step: this.lastStep, at, message });
      if (event !== undefined) this.emit([event]);
    }, afterMs);
    this.watchdog.unref();
  }
}

/** The level of an event as the text log names it. */
export function textLogLevel(level: AlertLevel): "info" | "warn" | "error" {
  return level === "warning" ? "warn" : level;
}

function medianOf(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

function seconds(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(ms < 1000 ? 2 : 1)} s` : `${Math.round(ms / 1000)} s`;
}
