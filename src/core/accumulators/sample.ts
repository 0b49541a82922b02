/**
 * `Reduce.SAMPLE`: keep the top-k and bottom-k records by a numeric field (Forge's sample logging),
 * e.g. the best and the worst rollout of a step by `reward`.
 *
 * Records are kept by reference until the flush that reports them; do not mutate a record after
 * recording it.
 */
import type { Accumulator, AccumulatorState, RecordReduceDefinition, SampleRecord } from "../reduce.js";
import { firstProblem, versionOne } from "./state-check.js";

/** Options of a sample reduction. */
export interface SampleOptions {
  /** How many of the best and of the worst records to keep (default 1). */
  k?: number;
  /** The numeric field records are ranked by (default `reward`). */
  by?: string;
}

/** Plain state: the best records (descending) and the worst (ascending). */
interface SampleState extends AccumulatorState {
  readonly top: readonly SampleRecord[];
  readonly bottom: readonly SampleRecord[];
}

/** A record's score: its numeric field `by` (checked by `append`; NaN in a state from elsewhere that lacks it). */
function scoreOf(record: SampleRecord, by: string): number {
  const score = record[by];
  return typeof score === "number" ? score : NaN;
}

/** Insert `record` into `list` (kept sorted by `better`), keeping at most k entries. */
function insertBounded(
  list: SampleRecord[],
  record: SampleRecord,
  k: number,
  by: string,
  better: (a: number, b: number) => boolean,
): void {
  const score = scoreOf(record, by);
  const last = list[k - 1];
  if (last !== undefined && !better(score, scoreOf(last, by))) return;
  let i = list.length;
  for (let before = list[i - 1]; before !== undefined && better(score, scoreOf(before, by)); before = list[i - 1]) i--;
  list.splice(i, 0, record);
  if (list.length > k) list.pop();
}

const higher = (a: number, b: number): boolean => a > b;
const lower = (a: number, b: number): boolean => a < b;

class SampleAccumulator implements Accumulator<SampleState, SampleRecord> {
  count = 0;
  private top: SampleRecord[] = [];
  private bottom: SampleRecord[] = [];
  constructor(
    private readonly k: number,
    private readonly by: string,
    private readonly name: string,
  ) {}
  append(value: SampleRecord): void {
    const score = value[this.by];
    if (typeof score !== "number") {
      throw new TypeError(
        `${this.name} ranks records by the numeric field "${this.by}", but a record has ${this.by} = ${JSON.stringify(score)}; ` +
          `record plain objects with a number in "${this.by}", or choose the field with Reduce.sample({ by })`,
      );
    }
    this.count++;
    insertBounded(this.top, value, this.k, this.by, higher);
    insertBounded(this.bottom, value, this.k, this.by, lower);
  }
  value(): Record<string, number> {
    return {};
  }
  state(): SampleState {
    return { v: 1, count: this.count, top: this.top.slice(), bottom: this.bottom.slice() };
  }
  reset(): void {
    this.count = 0;
    this.top = [];
    this.bottom = [];
  }
}

/**
 * The records of a state: the best first, then the worst, each record once. When fewer than 2k
 * records were seen the two lists overlap; the overlap is dropped from the end of `bottom`
 * (its best entries, which are the ones also in `top`).
 */
function recordsOf(s: SampleState): SampleRecord[] {
  const overlap = Math.max(0, s.top.length + s.bottom.length - s.count);
  return [...s.top, ...s.bottom.slice(0, s.bottom.length - overlap)];
}

/** What is wrong with a state's list of records: not a list of at most `k` plain objects. */
function recordList(name: string, list: unknown, k: number): string | undefined {
  if (!Array.isArray(list)) return `${name} must be a list of records`;
  const records: readonly unknown[] = list;
  if (records.length > k) return `${name} holds ${records.length} records, more than k = ${k}`;
  return records.every((r) => r !== null && typeof r === "object" && !Array.isArray(r))
    ? undefined
    : `${name} must hold plain objects`;
}

/** A sample reduction named `name`, keeping k best and k worst records by `by`. */
export function sampleReduce(name: string, options: SampleOptions = {}): RecordReduceDefinition<SampleState> {
  const k = options.k ?? 1;
  const by = options.by ?? "reward";
  if (!Number.isInteger(k) || k < 1) throw new RangeError(`sample k must be a positive integer, got ${String(k)}`);
  if (by.length === 0) throw new RangeError("sample field name (by) must be a non-empty string");
  return {
    name,
    input: "object",
    create: () => new SampleAccumulator(k, by, name),
    merge(states) {
      const top: SampleRecord[] = [];
      const bottom: SampleRecord[] = [];
      let count = 0;
      for (const s of states) {
        count += s.count;
        for (const r of s.top) insertBounded(top, r, k, by, higher);
        for (const r of s.bottom) insertBounded(bottom, r, k, by, lower);
      }
      return { v: 1, count, top, bottom };
    },
    value: () => ({}),
    samples: recordsOf,
    check: (s) => firstProblem(versionOne(s), recordList("top", s["top"], k), recordList("bottom", s["bottom"], k)),
  };
}
