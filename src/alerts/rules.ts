/**
 * The rules that judge values: each keeps what it needs per key (a finite flag, a rolling window,
 * whether its episode is open) and tells the episodes when a condition starts or ends. A rule
 * sees a key's reduced value once per flush; a key not logged at a flush, and a NaN for the rules
 * about levels (`threshold`, `spike`, `rate_drop`: that is `nonfinite`'s), are no evidence either
 * way, so an open episode stays open.
 */
import type { AlertEvent } from "../core/alert.js";
import type { AlertSubject, EpisodeDetail, EpisodeRule, Episodes } from "./episodes.js";
import type { ResolvedRule } from "./rule-config.js";
import { madVerdict, RollingWindow } from "./rolling.js";

/** Where a rule's transitions go: the episodes, and the events of this flush. */
export interface RuleContext {
  readonly episodes: Episodes;
  readonly events: AlertEvent[];
  readonly step: number;
  readonly at: number;
}

/** A rule's judge of one key: the rule and that key's state (found once, so a flush looks nothing up). */
export interface KeyJudge {
  /** Judge the key's reduced value at this flush. */
  observe(value: number, context: RuleContext): void;
}

/** A rule about the reduced value of matching keys. */
export interface KeyRule extends EpisodeRule {
  /** The key or `*` pattern it applies to. */
  readonly pattern: string;
  /** The judge of `key`, made on the key's first flush. */
  judge(key: string): KeyJudge;
}

/** Open an episode about `key`, noting the event if one is sent. */
function start(rule: EpisodeRule, key: string, context: RuleContext, detail: Omit<EpisodeDetail, "step" | "at">): void {
  const event = context.episodes.start(rule, key, { key }, { ...detail, step: context.step, at: context.at });
  if (event !== undefined) context.events.push(event);
}

/** Close the episode about `key`, noting the event if one is sent. */
function end(rule: EpisodeRule, key: string, context: RuleContext, detail: Omit<EpisodeDetail, "step" | "at">): void {
  const event = context.episodes.end(rule, key, { ...detail, step: context.step, at: context.at });
  if (event !== undefined) context.events.push(event);
}

/** A value in messages: 6 significant digits, NaN and ±Infinity as themselves. */
export function formatValue(value: number): string {
  return Number.isFinite(value) ? String(Number(value.toPrecision(6))) : String(value);
}

/** `nonfinite`: a key that was finite becomes NaN or ±Infinity; resolves when it is finite again. */
class NonfiniteRule implements KeyRule {
  constructor(
    readonly index: number,
    readonly name: string,
    readonly level: AlertEvent["level"],
    readonly pattern: string,
  ) {}

  judge(key: string): KeyJudge {
    return new NonfiniteJudge(this, key);
  }
}

class NonfiniteJudge implements KeyJudge {
  /** Seen finite (becoming NaN before that is no change), and whether its episode is open. */
  private seenFinite = false;
  private open = false;
  constructor(
    private readonly rule: NonfiniteRule,
    private readonly key: string,
  ) {}

  observe(value: number, context: RuleContext): void {
    const key = this.key;
    if (Number.isFinite(value)) {
      if (this.open)
        end(this.rule, key, context, {
          value,
          message: `${key} is finite again at step ${context.step} (${formatValue(value)})`,
        });
      this.open = false;
      this.seenFinite = true;
    } else if (this.seenFinite && !this.open) {
      this.open = true;
      start(this.rule, key, context, {
        value,
        message: `${key} became ${String(value)} at step ${context.step} (it was finite before)`,
      });
    }
  }
}

/**
 * `threshold`: a value above `above` or below `below` at `flushes` flushes in a row (at which the
 * key was logged); resolves when one is back inside. The `ratio` rule judges its ratios with it.
 */
export class ThresholdRule implements KeyRule {
  constructor(
    readonly index: number,
    readonly name: string,
    readonly level: AlertEvent["level"],
    readonly pattern: string,
    readonly above: number | undefined,
    readonly below: number | undefined,
    readonly flushes = 1,
  ) {}

  judge(key: string): KeyJudge {
    return new ThresholdJudge(this, key);
  }

  /** How a value back inside is worded. */
  inside(): string {
    if (this.above !== undefined && this.below !== undefined)
      return `back within [${formatValue(this.below)}, ${formatValue(this.above)}]`;
    return this.above !== undefined
      ? `no longer above ${formatValue(this.above)}`
      : `no longer below ${formatValue(this.below ?? NaN)}`;
  }
}

/** A threshold's judge of one subject key; its messages name `label` (the key, or a ratio's `a / b`). */
export class ThresholdJudge implements KeyJudge {
  private open = false;
  /** Flushes in a row with the value outside (NaN and flushes without the key leave it as it is). */
  private outside = 0;
  constructor(
    private readonly rule: ThresholdRule,
    private readonly key: string,
    private readonly label = key,
  ) {}

  observe(value: number, context: RuleContext): void {
    if (Number.isNaN(value)) return;
    const { above, below } = this.rule;
    const high = above !== undefined && value > above;
    const low = below !== undefined && value < below;
    const key = this.key;
    this.outside = high || low ? this.outside + 1 : 0;
    const { flushes } = this.rule;
    if ((high || low) && !this.open && this.outside >= flushes) {
      this.open = true;
      const bound = high ? `above ${formatValue(above ?? NaN)}` : `below ${formatValue(below ?? NaN)}`;
      const lasting = flushes > 1 ? ` for ${flushes} flushes` : "";
      start(this.rule, key, context, {
        value,
        message: `${this.label} = ${formatValue(value)} at step ${context.step}, ${bound}${lasting}`,
      });
    } else if (!high && !low && this.open) {
      this.open = false;
      end(this.rule, key, context, {
        value,
        message: `${this.label} = ${formatValue(value)} at step ${context.step}, ${this.rule.inside()}`,
      });
    }
  }
}

/**
 * `spike`: |value − median| > k × MAD of the key's previous `window` values. Every finite value
 * joins the window, spikes included: a lasting change of level becomes the new normal and the
 * episode resolves once the window has taken it in. A window with no spread (MAD 0: a constant
 * series) judges nothing.
 */
class SpikeRule implements KeyRule {
  constructor(
    readonly index: number,
    readonly name: string,
    readonly level: AlertEvent["level"],
    readonly pattern: string,
    readonly k: number,
    readonly size: number,
    readonly minPoints: number,
  ) {}

  judge(key: string): KeyJudge {
    return new SpikeJudge(this, key);
  }
}

class SpikeJudge implements KeyJudge {
  private readonly window: RollingWindow;
  private open = false;
  constructor(
    private readonly rule: SpikeRule,
    private readonly key: string,
  ) {
    this.window = new RollingWindow(rule.size);
  }

  observe(value: number, context: RuleContext): void {
    if (!Number.isFinite(value)) return;
    const { window, rule, key } = this;
    if (window.size >= rule.minPoints) {
      const median = window.median();
      // Whether MAD < |value − median| / k, by counting (O(log N)); the MAD itself only when too
      // close to tell, and for the message of a firing.
      const verdict = madVerdict(window, median, Math.abs(value - median) / rule.k);
      const spike = verdict === "unsure" ? deviations(window, median, value) > rule.k : verdict === "below";
      if (spike && !this.open) {
        this.open = true;
        const message = `${key} = ${formatValue(value)} at step ${context.step}: a spike, ${formatValue(deviations(window, median, value))} MADs from the rolling median ${formatValue(median)} of its last ${window.size} values (k = ${rule.k})`;
        start(rule, key, context, { value, message });
      } else if (!spike && this.open) {
        this.open = false;
        end(rule, key, context, {
          value,
          message: `${key} = ${formatValue(value)} at step ${context.step}: within ${rule.k} MADs of the rolling median ${formatValue(median)} again`,
        });
      }
    }
    window.push(value);
  }
}

/** |value − median| in MADs of the window (0 when the MAD is 0). */
function deviations(window: RollingWindow, median: number, value: number): number {
  const mad = window.mad(median);
  return mad > 0 ? Math.abs(value - median) / mad : 0;
}

/**
 * `rate_drop`: value < fraction × the median of the key's previous `window` values. The window
 * holds still while a drop lasts (it is the level the key dropped from), so a throughput that
 * stays low stays one open episode until it recovers.
 */
class RateDropRule implements KeyRule {
  constructor(
    readonly index: number,
    readonly name: string,
    readonly level: AlertEvent["level"],
    readonly pattern: string,
    readonly fraction: number,
    readonly size: number,
    readonly minPoints: number,
  ) {}

  judge(key: string): KeyJudge {
    return new RateDropJudge(this, key);
  }

  percent(): string {
    return `${formatValue(this.fraction * 100)}%`;
  }
}

class RateDropJudge implements KeyJudge {
  private readonly window: RollingWindow;
  private open = false;
  constructor(
    private readonly rule: RateDropRule,
    private readonly key: string,
  ) {
    this.window = new RollingWindow(rule.size);
  }

  observe(value: number, context: RuleContext): void {
    if (!Number.isFinite(value)) return;
    const { window, rule, key } = this;
    const median = window.size >= rule.minPoints ? window.median() : NaN;
    const dropped = value < rule.fraction * median;
    if (dropped && !this.open) {
      this.open = true;
      start(rule, key, context, {
        value,
        message: `${key} = ${formatValue(value)} at step ${context.step}: below ${rule.percent()} of its rolling median ${formatValue(median)} (last ${window.size} values)`,
      });
    } else if (!dropped && this.open && !Number.isNaN(median)) {
      this.open = false;
      end(rule, key, context, {
        value,
        message: `${key} = ${formatValue(value)} at step ${context.step}: back above ${rule.percent()} of ${formatValue(median)}`,
      });
    }
    if (!this.open) window.push(value);
  }
}

/** The key rules among `rules`, built. */
export function keyRules(rules: readonly ResolvedRule[]): KeyRule[] {
  const out: KeyRule[] = [];
  rules.forEach((r, index) => {
    if (r.kind === "nonfinite") out.push(new NonfiniteRule(index, r.name, r.level, r.key));
    else if (r.kind === "threshold")
      out.push(new ThresholdRule(index, r.name, r.level, r.key, r.above, r.below, r.flushes));
    else if (r.kind === "spike") out.push(new SpikeRule(index, r.name, r.level, r.key, r.k, r.window, r.minPoints));
    else if (r.kind === "rate_drop")
      out.push(new RateDropRule(index, r.name, r.level, r.key, r.fraction, r.window, r.minPoints));
  });
  return out;
}

/** A rank as alerts name it. */
export interface RankRef {
  readonly rankName: string;
  readonly rank?: number;
  readonly host?: string;
}

/** The subject of an episode about a rank. */
function rankSubject(ref: RankRef): AlertSubject {
  return {
    rankName: ref.rankName,
    ...(ref.rank === undefined ? {} : { rank: ref.rank }),
    ...(ref.host === undefined ? {} : { host: ref.host }),
  };
}

/** `rank 3 (Trainer_ab_r3) on host-a` */
export function describeRank(ref: RankRef): string {
  const who = ref.rank === undefined ? ref.rankName : `rank ${ref.rank} (${ref.rankName})`;
  return ref.host === undefined ? who : `${who} on ${ref.host}`;
}

/**
 * A rule about ranks (`rank_lost`, `straggler`): `active` are the ranks in its condition at this
 * flush; an open episode of a rank not among them ends. Undefined `active` is no evidence.
 */
export function judgeRanks(
  rule: EpisodeRule,
  active: readonly RankRef[],
  context: RuleContext,
  say: { readonly start: (ref: RankRef) => string; readonly end: (subject: AlertSubject) => string },
): void {
  const names = new Set<string>();
  for (const ref of active) {
    names.add(ref.rankName);
    const event = context.episodes.start(rule, ref.rankName, rankSubject(ref), {
      step: context.step,
      at: context.at,
      message: say.start(ref),
    });
    if (event !== undefined) context.events.push(event);
  }
  for (const subject of context.episodes.openSubjects(rule)) {
    const name = subject.rankName ?? "";
    if (names.has(name)) continue;
    const event = context.episodes.end(rule, name, { step: context.step, at: context.at, message: say.end(subject) });
    if (event !== undefined) context.events.push(event);
  }
}
