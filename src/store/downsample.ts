/**
 * Downsampling a series for display: the x range is cut into equal buckets and each bucket keeps
 * its minimum, its maximum and its last point (and its first NaN, if any, within the budget), so
 * a spike — or a loss that went NaN — stays visible however far a chart is zoomed out. The points
 * kept are real points of the series (step, wall, value), never averages.
 */

import { f64, int } from "./columns.js";
import type { SeriesPoint, XAxis } from "./read-types.js";

export type { SeriesPoint, XAxis };

/** Buckets per output point budget: each bucket can give min, max and last. */
export const POINTS_PER_BUCKET = 3;

/** Folds points into buckets over [x0, x1]; points outside are clamped to the end buckets. */
export class Downsampler {
  private readonly count: Uint32Array;
  /** Non-NaN points per bucket: min and max exist only where this is > 0. */
  private readonly numeric: Uint32Array;
  private readonly minS: Float64Array;
  private readonly minW: Float64Array;
  private readonly minV: Float64Array;
  private readonly maxS: Float64Array;
  private readonly maxW: Float64Array;
  private readonly maxV: Float64Array;
  private readonly lastS: Float64Array;
  private readonly lastW: Float64Array;
  private readonly lastV: Float64Array;
  private readonly nanS: Float64Array;
  private readonly nanW: Float64Array;
  private readonly scale: number;

  constructor(
    private readonly x0: number,
    x1: number,
    readonly buckets: number,
    private readonly byStep: boolean,
  ) {
    const n = Math.max(1, buckets);
    this.count = new Uint32Array(n);
    this.numeric = new Uint32Array(n);
    this.minS = new Float64Array(n);
    this.minW = new Float64Array(n);
    this.minV = new Float64Array(n);
    this.maxS = new Float64Array(n);
    this.maxW = new Float64Array(n);
    this.maxV = new Float64Array(n);
    this.lastS = new Float64Array(n);
    this.lastW = new Float64Array(n);
    this.lastV = new Float64Array(n);
    this.nanS = new Float64Array(n).fill(NaN);
    this.nanW = new Float64Array(n);
    const span = x1 - x0;
    this.scale = span > 0 ? n / span : 0;
  }

  /** The bucket a given x falls in. */
  bucketOf(x: number): number {
    const b = Math.floor((x - this.x0) * this.scale);
    return b < 0 ? 0 : b >= this.buckets ? this.buckets - 1 : b;
  }

  /** Fold arrays of points (a decoded chunk, or rows) from `start` to `end`. */
  addArrays(steps: Float64Array, walls: Float64Array, values: Float64Array, start = 0, end = values.length): void {
    const xs = this.byStep ? steps : walls;
    for (let i = start; i < end; i++) this.add(f64(steps, i), f64(walls, i), f64(values, i), f64(xs, i));
  }

  /** Fold one point; `x` is its step or wall time, whichever the axis is. */
  add(step: number, wall: number, value: number, x: number): void {
    const b = this.bucketOf(x);
    this.count[b] = int(this.count, b) + 1;
    if (value !== value) {
      if (Number.isNaN(this.nanS[b])) {
        this.nanS[b] = step;
        this.nanW[b] = wall;
      }
    } else {
      const firstNumeric = this.numeric[b] === 0;
      this.numeric[b] = int(this.numeric, b) + 1;
      if (firstNumeric || value < f64(this.minV, b)) {
        this.minV[b] = value;
        this.minS[b] = step;
        this.minW[b] = wall;
      }
      if (firstNumeric || value > f64(this.maxV, b)) {
        this.maxV[b] = value;
        this.maxS[b] = step;
        this.maxW[b] = wall;
      }
    }
    const lastX = this.byStep ? f64(this.lastS, b) : f64(this.lastW, b);
    if (this.count[b] === 1 || x >= lastX) {
      this.lastS[b] = step;
      this.lastW[b] = wall;
      this.lastV[b] = value;
    }
  }

  /**
   * Fold a whole chunk by its summary, without decoding it: valid only when every point of the
   * chunk falls in one bucket and none is NaN. Min and max are then the chunk's; last is its last.
   */
  addSummary(bucket: number, n: number, summary: ChunkSummary): void {
    const b = bucket;
    const first = this.count[b] === 0;
    this.count[b] = int(this.count, b) + n;
    if (summary.min !== null && summary.max !== null) {
      const firstNumeric = this.numeric[b] === 0;
      this.numeric[b] = int(this.numeric, b) + n;
      if (firstNumeric || summary.min < f64(this.minV, b)) {
        this.minV[b] = summary.min;
        this.minS[b] = summary.minStep;
        this.minW[b] = summary.minWall;
      }
      if (firstNumeric || summary.max > f64(this.maxV, b)) {
        this.maxV[b] = summary.max;
        this.maxS[b] = summary.maxStep;
        this.maxW[b] = summary.maxWall;
      }
    }
    const x = this.byStep ? summary.lastStep : summary.lastWall;
    const lastX = this.byStep ? f64(this.lastS, b) : f64(this.lastW, b);
    if (first || x >= lastX) {
      this.lastS[b] = summary.lastStep;
      this.lastW[b] = summary.lastWall;
      this.lastV[b] = summary.last;
    }
  }

  /**
   * Fold one block summary (`BLOCK_FIELDS` at `o` in `blocks`) into the bucket of its first
   * point. A block that straddles a bucket edge is counted wholly in one bucket: the points kept
   * are still real points, at most one block (64 points) off their exact bucket.
   */
  addBlock(blocks: Float64Array, o: number): void {
    // `o` steps by BLOCK_FIELDS within the blob and `b` is clamped by bucketOf, so every read is in
    // bounds; the `??` defaults only satisfy noUncheckedIndexedAccess (inline, not the checked
    // f64(): this runs ~20 reads for each of a million-point series' 15,000 blocks).
    const x = this.byStep ? (blocks[o + 1] ?? NaN) : (blocks[o + 2] ?? NaN);
    const b = this.bucketOf(x);
    const n = blocks[o] ?? NaN;
    const first = this.count[b] === 0;
    this.count[b] = (this.count[b] ?? 0) + n;
    const min = blocks[o + 6] ?? NaN;
    if (min === min) {
      const max = blocks[o + 9] ?? NaN;
      const firstNumeric = this.numeric[b] === 0;
      this.numeric[b] = (this.numeric[b] ?? 0) + 1;
      if (firstNumeric || min < (this.minV[b] ?? NaN)) {
        this.minV[b] = min;
        this.minS[b] = blocks[o + 7] ?? NaN;
        this.minW[b] = blocks[o + 8] ?? NaN;
      }
      if (firstNumeric || max > (this.maxV[b] ?? NaN)) {
        this.maxV[b] = max;
        this.maxS[b] = blocks[o + 10] ?? NaN;
        this.maxW[b] = blocks[o + 11] ?? NaN;
      }
    }
    const nanStep = blocks[o + 12] ?? NaN;
    if (nanStep === nanStep && Number.isNaN(this.nanS[b])) {
      this.nanS[b] = nanStep;
      this.nanW[b] = blocks[o + 13] ?? NaN;
    }
    const lastX = this.byStep ? (blocks[o + 3] ?? NaN) : (blocks[o + 4] ?? NaN);
    const keptX = this.byStep ? (this.lastS[b] ?? NaN) : (this.lastW[b] ?? NaN);
    if (first || lastX >= keptX) {
      this.lastS[b] = blocks[o + 3] ?? NaN;
      this.lastW[b] = blocks[o + 4] ?? NaN;
      this.lastV[b] = blocks[o + 5] ?? NaN;
    }
  }

  /**
   * The kept points, in x order, without duplicates, at most `maxPoints` of them. A bucket's first
   * NaN is kept while the budget allows (min, max and last come first: at most 3 per bucket, which
   * the bucket count already fits in `maxPoints`).
   */
  result(maxPoints = Infinity): SeriesPoint[] {
    const out: SeriesPoint[] = [];
    const nanBuckets: number[] = [];
    for (let b = 0; b < this.buckets; b++) {
      if (this.count[b] === 0) continue;
      const kept: SeriesPoint[] = [];
      const push = (step: number, wall: number, value: number): void => {
        for (const p of kept) if (p.step === step && p.wall === wall) return;
        kept.push({ step, wall, value });
      };
      if (this.numeric[b] !== 0) {
        push(f64(this.minS, b), f64(this.minW, b), f64(this.minV, b));
        push(f64(this.maxS, b), f64(this.maxW, b), f64(this.maxV, b));
      }
      push(f64(this.lastS, b), f64(this.lastW, b), f64(this.lastV, b));
      if (!Number.isNaN(this.nanS[b]) && !Number.isNaN(this.lastV[b])) nanBuckets.push(b);
      for (const p of kept) out.push(p);
    }
    for (const b of nanBuckets) {
      if (out.length >= maxPoints) break;
      // Never a duplicate: min, max are numbers, and buckets whose last is NaN are not listed.
      out.push({ step: f64(this.nanS, b), wall: f64(this.nanW, b), value: NaN });
    }
    // Blocks are bucketed by their first point and NaN markers come last, so sort once here.
    out.sort(this.byStep ? (p, q) => p.step - q.step || p.wall - q.wall : (p, q) => p.wall - q.wall || p.step - q.step);
    return out;
  }
}

/** What a packed chunk row says about its points without decoding them. */
interface ChunkSummary {
  readonly min: number | null;
  readonly minStep: number;
  readonly minWall: number;
  readonly max: number | null;
  readonly maxStep: number;
  readonly maxWall: number;
  readonly last: number;
  readonly lastStep: number;
  readonly lastWall: number;
}
