/**
 * What the store's writer stored as text, read back and checked: key kinds, run statuses, sample
 * records and histograms (JSON, non-finite numbers as their proto3-JSON strings). A value that is
 * not what it should be is a TypeError naming its key, never a cast.
 */
import { isRecord, parseNumber } from "../core/json.js";
import type { HistogramData, SampleRecord } from "../core/reduce.js";
import { KEY_KINDS, type KeyKind, type RunStatus } from "./read-types.js";

const RUN_STATUSES: readonly RunStatus[] = ["running", "finished", "failed", "crashed"];

export function isKeyKind(kind: string): kind is KeyKind {
  return KEY_KINDS.some((k) => k === kind);
}

export function isRunStatus(status: string): status is RunStatus {
  return RUN_STATUSES.some((s) => s === status);
}

/** Sample records as stored: a JSON array of records (objects or values). */
export function parseSampleRecords(json: string, key: string): SampleRecord[] {
  const value: unknown = JSON.parse(json);
  if (!Array.isArray(value))
    throw new TypeError(`the stored samples of ${JSON.stringify(key)} are not a JSON array: ${json.slice(0, 80)}`);
  return value.filter((r): r is SampleRecord => isRecord(r));
}

/**
 * A histogram as stored (JSON, non-finite numbers as their proto3-JSON strings), or null when the
 * text is not one. Both dashboard sources read histograms through it (the team server keeps the
 * store's JSON as it is).
 */
export function histogramOfJson(json: string): HistogramData | null {
  let h: unknown;
  try {
    // Histograms hold only numbers, so the proto3-JSON strings "NaN"/"Infinity" are numbers here.
    h = JSON.parse(json, (_k, v: unknown) =>
      v === "NaN" || v === "Infinity" || v === "-Infinity" ? parseNumber(v) : v,
    );
  } catch {
    return null;
  }
  if (!isRecord(h)) return null;
  const numbers = (v: unknown): v is number[] => Array.isArray(v) && v.every((n) => typeof n === "number");
  const { count, min, max, sum, sumSquares, bucketLimits, bucketCounts } = h;
  if (
    typeof count !== "number" ||
    typeof min !== "number" ||
    typeof max !== "number" ||
    !numbers(bucketLimits) ||
    !numbers(bucketCounts)
  )
    return null;
  // sum and sumSquares: NaN where a store written before they were kept lacks them.
  const sumOf = typeof sum === "number" ? sum : NaN;
  return {
    count,
    min,
    max,
    sum: sumOf,
    sumSquares: typeof sumSquares === "number" ? sumSquares : NaN,
    bucketLimits,
    bucketCounts,
  };
}

/** A histogram as stored, checked: a TypeError naming the key when the text is not one. */
export function parseHistogram(json: string, key: string): HistogramData {
  const h = histogramOfJson(json);
  if (h === null) {
    throw new TypeError(
      `the stored histogram of ${JSON.stringify(key)} is not one (count, min, max, bucketLimits, bucketCounts): ${json.slice(0, 80)}`,
    );
  }
  return h;
}
