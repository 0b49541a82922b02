/**
 * The `ratio` rule (docs/alerts.md): at each flush, per denominator key, the sum of its numerator
 * keys over its value, judged as a `threshold` judges a key (above / below, for `flushes` flushes
 * in a row). The error rate of a model is `inference/errors/total{…,error.type=…}` (one key per
 * error type) over `inference/requests/total{…}`: both are exact sums across ranks, so their ratio
 * is the error rate of every request of the flush.
 *
 * A numerator key counts toward each denominator key whose attributes it carries too, with the
 * same values. Which keys pair is found once, when a key is first seen; a flush looks nothing up
 * but the values it logged.
 */
import { splitAttributedKey, type KeyParts } from "../core/attributes.js";
import type { Metric } from "../core/metric.js";
import type { EpisodeRule } from "./episodes.js";
import { patternNames } from "./patterns.js";
import type { ResolvedRule } from "./rule-config.js";
import { ThresholdJudge, ThresholdRule, type RuleContext } from "./rules.js";

type Attributes = KeyParts["attributes"];
type ResolvedRatio = Extract<ResolvedRule, { kind: "ratio" }>;

/** A denominator key: its attributes, the judge of its ratio, and the numerator keys that count toward it. */
interface Denominator {
  readonly attributes: Attributes;
  readonly judge: ThresholdJudge;
  readonly numerators: string[];
}

/** Whether `inner`'s attributes are all in `outer`, with the same values. */
function carries(outer: Attributes, inner: Attributes): boolean {
  for (const [name, value] of Object.entries(inner)) if (outer[name] !== value) return false;
  return true;
}

/** One `ratio` rule and what it keeps per key. */
export class RatioRuleState implements EpisodeRule {
  readonly index: number;
  readonly name: string;
  readonly level: ResolvedRatio["level"];
  private readonly threshold: ThresholdRule;
  /** Key → whether it is a numerator and/or a denominator of this rule (decided on its first flush). */
  private readonly roles = new Map<string, { numerator: boolean; denominator: boolean }>();
  private readonly numerators = new Map<string, Attributes>();
  private readonly denominators = new Map<string, Denominator>();
  /** This flush's numerator values (reused). */
  private readonly values = new Map<string, number>();

  constructor(
    index: number,
    private readonly rule: ResolvedRatio,
  ) {
    this.index = index;
    this.name = rule.name;
    this.level = rule.level;
    // Episodes belong to this rule: the threshold shares its index, name and level.
    this.threshold = new ThresholdRule(index, rule.name, rule.level, "", rule.above, rule.below, rule.flushes);
  }

  /** Judge one flush's values: each denominator key logged with a positive value gets its ratio judged. */
  observe(metrics: readonly Metric[], context: RuleContext): void {
    const values = this.values;
    values.clear();
    const present: Array<[Denominator, number]> = [];
    for (const metric of metrics) {
      if (metric.axis !== undefined) continue;
      const role = this.roles.get(metric.key) ?? this.learn(metric.key);
      if (role.numerator) values.set(metric.key, metric.value);
      const denominator = role.denominator ? this.denominators.get(metric.key) : undefined;
      if (denominator !== undefined) present.push([denominator, metric.value]);
    }
    for (const [denominator, total] of present) {
      if (!(total > 0) || !Number.isFinite(total)) continue;
      let sum = 0;
      for (const key of denominator.numerators) sum += values.get(key) ?? 0;
      denominator.judge.observe(sum / total, context);
    }
  }

  /** A key's roles, found on its first flush, and its pairs with the keys of the other role. */
  private learn(key: string): { numerator: boolean; denominator: boolean } {
    const role = {
      numerator: patternNames(this.rule.numerator, key),
      denominator: patternNames(this.rule.denominator, key),
    };
    this.roles.set(key, role);
    if (!role.numerator && !role.denominator) return role;
    const { attributes } = splitAttributedKey(key);
    if (role.denominator) {
      const label = `${this.rule.numerator} / ${key}`;
      const numerators = [...this.numerators].filter(([, a]) => carries(a, attributes)).map(([k]) => k);
      this.denominators.set(key, { attributes, judge: new ThresholdJudge(this.threshold, key, label), numerators });
    }
    if (role.numerator) {
      this.numerators.set(key, attributes);
      for (const denominator of this.denominators.values())
        if (carries(attributes, denominator.attributes)) denominator.numerators.push(key);
    }
    return role;
  }
}

/** The `ratio` rules among `rules`, with their index in the list. */
export function ratioRules(rules: readonly ResolvedRule[]): RatioRuleState[] {
  const out: RatioRuleState[] = [];
  rules.forEach((r, index) => {
    if (r.kind === "ratio") out.push(new RatioRuleState(index, r));
  });
  return out;
}
