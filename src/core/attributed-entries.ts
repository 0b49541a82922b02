/**
 * The collector's entries for attributed keys (`recordMetric(key, v, reduce, attributes)`,
 * `metric(key, reduce, attributes)`): the key form is `attributes.ts`'s; this file finds an
 * attributed key's entry, bounds the attribute sets of one name and counts what it drops.
 *
 * A frozen attributes object is looked up by identity (a `WeakMap`, then the name), so recording
 * with one constant, frozen set of attributes builds no key and allocates nothing; any other
 * object's key is built at each call (the object may have changed since).
 */
import { attributedKey, DEFAULT_MAX_ATTRIBUTE_SETS, type MetricAttributes } from "./attributes.js";
import { warn } from "./diagnostics.js";
import { envInteger } from "./env.js";
import { describeValue, type MetricEntry } from "./metric-entry.js";

/** What the attribute sets need of the collector. */
export interface EntryHost {
  readonly entries: ReadonlyMap<string, MetricEntry>;
  entryFor(key: unknown, reduce: unknown): MetricEntry | undefined;
  droppedKeyRecords: number;
}

export class AttributedEntries {
  private byObject = new WeakMap<MetricAttributes, Map<string, MetricEntry>>();
  /** Distinct attribute sets created under each name. */
  private readonly setsPerName = new Map<string, number>();
  /** New attribute sets of one name past this many are dropped and counted (`RANKSCOPE_MAX_ATTRIBUTE_SETS`). */
  maxSets: number;

  constructor(private readonly host: EntryHost) {
    this.maxSets = envInteger("RANKSCOPE_MAX_ATTRIBUTE_SETS", DEFAULT_MAX_ATTRIBUTE_SETS, 1);
  }

  /**
   * The entry of `name` with `attributes`, created on first use; undefined (counted) when the set
   * is new past the bound. Throws as `entryFor` does, and for invalid attributes.
   */
  entry(name: unknown, reduce: unknown, attributes: MetricAttributes): MetricEntry | undefined {
    if (typeof name !== "string" || name.length === 0) {
      throw new TypeError(`recordMetric key must be a non-empty string, got ${describeValue(name)}`);
    }
    if (typeof attributes !== "object" || attributes === null || Array.isArray(attributes)) {
      throw new TypeError(
        `recordMetric("${name}", ...) attributes must be a plain object such as { model: "a" }, got ${describeValue(attributes)}`,
      );
    }
    const cached = this.byObject.get(attributes)?.get(name);
    if (cached !== undefined && cached.reduce === reduce) return cached;
    const key = attributedKey(name, attributes);
    const isNew = !this.host.entries.has(key);
    const sets = this.setsPerName.get(name) ?? 0;
    if (isNew && sets >= this.maxSets) {
      this.host.droppedKeyRecords++;
      warn(
        "collector.maxAttributeSets",
        `more than ${this.maxSets} attribute sets for metric "${name}" in this process; new ones (first: "${key}") are dropped and counted. ` +
          `Attributes that hold ids (per-request, per-user) are the usual cause; raise the bound with RANKSCOPE_MAX_ATTRIBUTE_SETS if the sets are real.`,
      );
      return undefined;
    }
    const entry = this.host.entryFor(key, reduce);
    if (entry === undefined) return undefined;
    if (isNew) this.setsPerName.set(name, sets + 1);
    if (Object.isFrozen(attributes)) {
      let byName = this.byObject.get(attributes);
      if (byName === undefined) this.byObject.set(attributes, (byName = new Map()));
      byName.set(name, entry);
    }
    return entry;
  }

  /** Forget every set (the collector's `clear`). */
  clear(): void {
    this.byObject = new WeakMap();
    this.setsPerName.clear();
  }
}
