/**
 * The rules that judge values: each keeps what it needs per key (a finite flag, a rolling window,
 * whether its episode is open) and tells the episodes when a condition starts or ends. A rule
 * sees a key's reduced value once per flush; a key not logged at a flush, and a NaN for the rules
 * about levels (`threshold`, `spike`, `rate_drop`: that is `nonfinite`'s), are no evidence either
 * way, so an open episode stays open.
 */
import type { AlertEvent } from "../core/alert.js";
import type { AlertSubject, EpisodeDetail, EpisodeRule, Episodes } from "./episodes.js";
import type { ResolvedRule } from "./options.js";
import { madVerdict, RollingWindow } from "./rolling.js";

/** Where a rule's transitions go: the episodes, and the events of this flush. */
export interface RuleContext {
  readonly episodes: Episodes;
  readonly events: AlertEvent[];
  readonly step: number;
  readonly at: number;
}

/** A rule about the reduced value of matching keys. */
export interface KeyRule extends EpisodeRule {
  /** The key or `*` pattern it applies to. */
  readonly pattern: string;
  /** Judge `value`, the reduced value of `key` at this flush. */
  observe(key: string, value: number, context: RuleContext): void;
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

/** A key's state for `nonfinite`: never seen finite (becoming NaN is then no change), seen finite, or in an open episode. */
const NEVER_FINITE = 0;
const SEEN_FINITE = 1;
const OPEN = 2;

/** `nonfinite`: a key that was finite becomes NaN or ±Infinity; resolves when it is finite again. */
class NonfiniteRule implements KeyRule {
  private readonly keys = new Map<string, number>();
  constructor(
    readonly index: number,
    readonly name: string,
    readonly level: AlertEvent["level"],
    readonly pattern: string,
  ) {}

  observe(key: string, value: number, context: RuleContext): void {
    const was = this.keys.get(key) ?? NEVER_FINITE;
    if (Number.isFinite(value)) {
      if (was === OPEN) end(this, key, context, { value, message: `${key} is finite again at step ${context.step} (${formatValue(value)})` });
      if (was !== SEEN_FINITE) this.keys.set(key, SEEN_FINITE);
    } else if (was === SEEN_FINITE) {
      this.keys.set(key, OPEN);
      start(this, key, context, { value, message: `${key} became ${String(value)} at step ${context.step} (it was finite before)` });
    }
  }
}

/** `threshold`: a value above `above` or below `below`; resolves when one is back inside. */
class ThresholdRule implements KeyRule {
  private readonly open = new Set<string>();
  constructor(
    readonly index: number,
    readonly name: string,
    readonly level: AlertEvent["level"],
    readonly pattern: string,
    private readonly above: number | undefined,
    private readonly below: number | undefined,
  ) {}

  observe(key: string, value: number, context: RuleContext): void {
    if (Number.isNaN(value)) return;
    const high = this.above !== undefined && value > this.above;
    const low = this.below !== undefined && value < this.below;
    const isOpen = this.open.has(key);
    if ((high || low) && !isOpen) {
      this.open.add(key);
      const bound = high ? `above ${formatValue(this.above ?? NaN)}` : `below ${formatValue(this.below ?? NaN)}`;
      start(this, key, context, { value, message: `${key} = ${formatValue(value)} at step ${context.step}, ${bound}` });
    } else if (!high && !low && isOpen) {
      this.open.delete(key);
      end(this, key, context, { value, message: `${key} = ${formatValue(value)} at step ${context.step}, ${this.inside()}` });
    }
  }

  private inside(): string {
    if (this.above !== undefined && this.below !== undefined) return `back within [${formatValue(this.below)}, ${formatValue(this.above)}]`;
    return this.above !== undefined ? `no longer above ${formatValue(this.above)}` : `no longer below ${formatValue(this.below ?? NaN)}`;
  }
}

/** A key's rolling window and whether its episode is open. */
interface WindowState {
  readonly window: RollingWindow;
  open: boolean;
}

/** A key's rolling window and episode flag, made on its first value. */
function windowState(keys: Map<string, WindowState>, key: string, size: number): WindowState {
  let state = keys.get(key);
  if (state === undefined) {
    state = { window: new RollingWindow(size), open: false };
    keys.set(key, state);
  }
  return state;
}

/**
 * `spike`: |value − median| > k × MAD of the key's previous `window` values. Every finite value
 * joins the window, spikes included: a lasting change of level becomes the new normal and the
 * episode resolves once the window has taken it in. A window with no spread (MAD 0: a constant
 * series) judges nothing.
 */
class SpikeRule implements KeyRule {
  private readonly keys = new Map<string, WindowState>();
  constructor(
    readonly index: number,
    readonly name: string,
    readonly level: AlertEvent["level"],
    readonly pattern: string,
    private readonly k: number,
    private readonly size: number,
    private readonly minPoints: number,
  ) {}

  observe(key: string, value: number, context: RuleContext): void {
    if (!Number.isFinite(value)) return;
    const state = windowState(this.keys, key, this.size);
    const { window } = state;
    if (window.size >= this.minPoints) {
      const median = window.median();
      // Whether MAD < |value − median| / k, by counting (O(log N)); the MAD itself only when too
      // close to tell, and for the message of a firing.
      const verdict = madVerdict(window, median, Math.abs(value - median) / this.k);
      const spike = verdict === "unsure" ? this.deviations(window, median, value) > this.k : verdict === "below";
      if (spike && !state.open) {
        state.open = true;
        const deviations = this.deviations(window, median, value);
        const message = `${key} = ${formatValue(value)} at step ${context.step}: a spike, ${formatValue(deviations)} MADs from the rolling median ${formatValue(median)} of its last ${window.size} values (k = ${this.k})`;
        start(this, key, context, { value, message });
      } else if (!spike && state.open) {
        state.open = false;
        end(this, key, context, { value, message: `${key} = ${formatValue(value)} at step ${context.step}: within ${this.k} MADs of the rolling median ${formatValue(median)} again` });
      }
    }
    window.push(value);
  }

  /** |value − median| in MADs of the window (0 when the MAD is 0). */
  private deviations(window: RollingWindow, median: number, value: number): number {
    const mad = window.mad(median);
    return mad > 0 ? Math.abs(value - median) / mad : 0;
  }
}

/**
 * `rate_drop`: value < fraction × the median of the key's previous `window` values. The window
 * holds still while a drop lasts (it is the level the key dropped from), so a throughput that
 * stays low stays one open episode until it recovers.
 */
class RateDropRule implements KeyRule {
  private readonly keys = new Map<string, WindowState>();
  constructor(
    readonly index: number,
    readonly name: string,
    readonly level: AlertEvent["level"],
    readonly pattern: string,
    private readonly fraction: number,
    private readonly size: number,
    private readonly minPoints: number,
  ) {}

  observe(key: string, value: number, context: RuleContext): void {
    if (!Number.isFinite(value)) return;
    const state = windowState(this.keys, key, this.size);
    const { window } = state;
    const median = window.size >= this.minPoints ? window.median() : NaN;
    const floor = this.fraction * median;
    const dropped = value < floor;
    if (dropped && !state.open) {
      state.open = true;
      start(this, key, context, { value, message: `${key} = ${formatValue(value)} at step ${context.step}: below ${this.percent()} of its rolling median ${formatValue(median)} (last ${window.size} values)` });
    } else if (!dropped && state.open && !Number.isNaN(median)) {
      state.open = false;
      end(this, key, context, { value, message: `${key} = ${formatValue(value)} at step ${context.step}: back above ${this.percent()} of ${formatValue(median)}` });
    }
    if (!state.open) window.push(value);
  }

  private percent(): string {
    return `${formatValue(this.fraction * 100)}%`;
  }
}

/** The key rules among `rules`, built. */
export function keyRules(rules: readonly ResolvedRule[]): KeyRule[] {
  const out: KeyRule[] = [];
  rules.forEach((r, index) => {
    if (r.kind === "nonfinite") out.push(new NonfiniteRule(index, r.name, r.level, r.key));
    else if (r.kind === "threshold") out.push(new ThresholdRule(index, r.name, r.level, r.key, r.above, r.below));
    else if (r.kind === "spike") out.push(new SpikeRule(index, r.name, r.level, r.key, r.k, r.window, r.minPoints));
    else if (r.kind === "rate_drop") out.push(new RateDropRule(index, r.name, r.level, r.key, r.fraction, r.window, r.minPoints));
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
export function rankSubject(ref: RankRef): AlertSubject {
  return { rankName: ref.rankName, ...(ref.rank === undefined ? {} : { rank: ref.rank }), ...(ref.host === undefined ? {} : { host: ref.host }) };
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
    const event = context.episodes.start(rule, ref.rankName, rankSubject(ref), { step: context.step, at: context.at, message: say.start(ref) });
    if (event !== undefined) context.events.push(event);
  }
  for (const subject of context.episodes.openSubjects(rule)) {
    const name = subject.rankName ?? "";
    if (names.has(name)) continue;
    const event = context.episodes.end(rule, name, { step: context.step, at: context.at, message: say.end(subject) });
    if (event !== undefined) context.events.push(event);
  }
}
