/**
 * Colours that mean something: one per run (the same in the runs list, the runs table and every
 * chart), and one per rank within a run's chart, from a palette no run uses (and none close to
 * the run's own), so a rank's line is never taken for another run or for the global line.
 *
 * A run's colour comes from its id, not its place in the list: the id picks a slot of the run
 * palette (FNV-1a hash), and when an older run (by start time) already holds that slot, the next
 * free one. A run that appears later therefore never changes the colours of the runs before it.
 * Past 20 runs, slots are shared.
 */
import { compareCodePoints } from "../../core/code-points.js";

/** 20 run colours that stay apart on white and on the dark theme. */
export const RUN_PALETTE: readonly string[] = [
  "#1f77b4",
  "#ff7f0e",
  "#2ca02c",
  "#d62728",
  "#9467bd",
  "#8c564b",
  "#e377c2",
  "#7f7f7f",
  "#bcbd22",
  "#17becf",
  "#393b79",
  "#e6550d",
  "#31a354",
  "#ad494a",
  "#756bb1",
  "#c49c94",
  "#de9ed6",
  "#637939",
  "#fd8d3c",
  "#3182bd",
];

/**
 * 17 rank colours, none of them a run colour (ColorBrewer's Dark2, then more tones), chosen so
 * that at least 12 stay once those close to any one run colour are left out.
 */
export const RANK_PALETTE: readonly string[] = [
  "#1b9e77",
  "#d95f02",
  "#7570b3",
  "#e7298a",
  "#66a61e",
  "#e6ab02",
  "#a6761d",
  "#666666",
  "#be123c",
  "#0e7490",
  "#4d7c0f",
  "#7c3aed",
  "#9d174d",
  "#365314",
  "#38bdf8",
  "#c084fc",
  "#2563eb",
];

/** Rank colours closer than this to the run's own colour are left out (redmean distance, 0–765). */
export const MIN_RANK_DISTANCE = 150;

/** How different two `#rrggbb` colours look: the "redmean" weighted RGB distance. */
export function colourDistance(a: string, b: string): number {
  const rgb = (hex: string): number[] => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
  const [r1 = 0, g1 = 0, b1 = 0] = rgb(a);
  const [r2 = 0, g2 = 0, b2 = 0] = rgb(b);
  const mean = (r1 + r2) / 2;
  return Math.sqrt((2 + mean / 256) * (r1 - r2) ** 2 + 4 * (g1 - g2) ** 2 + (2 + (255 - mean) / 256) * (b1 - b2) ** 2);
}

/** 32-bit FNV-1a of a string's UTF-16 code units. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** What a run's colour depends on. */
interface ColouredRun {
  readonly id: string;
  readonly startedAt: number | null;
}

/**
 * Each run's colour: its id's slot of the palette, or the next free slot when an earlier-started
 * run holds it (runs without a start time come last, then by id).
 */
export function assignRunColours(runs: readonly ColouredRun[]): Map<string, string> {
  const order = [...runs].sort(
    (a, b) => (a.startedAt ?? Infinity) - (b.startedAt ?? Infinity) || compareCodePoints(a.id, b.id),
  );
  const taken = new Set<number>();
  const colours = new Map<string, string>();
  const n = RUN_PALETTE.length;
  for (const run of order) {
    let slot = fnv1a(run.id) % n;
    if (taken.size < n) while (taken.has(slot)) slot = (slot + 1) % n;
    taken.add(slot);
    colours.set(run.id, RUN_PALETTE[slot] ?? "#333");
  }
  return colours;
}

/**
 * A run's colour knowing only the `RUN_PALETTE.length` earliest-started runs of the root (the
 * runs list asked for `sort=-started&limit=20`): each run adds one slot to those taken, so past
 * the 20th every run has its id's own slot, and this is what `assignRunColours` of every run
 * gives — without loading every run.
 */
export function colourFromEarliest(
  id: string,
  earliest: readonly ColouredRun[],
  assigned: ReadonlyMap<string, string> = assignRunColours(earliest),
): string {
  return assigned.get(id) ?? RUN_PALETTE[fnv1a(id) % RUN_PALETTE.length] ?? "#333";
}

/**
 * The colour of rank `rank`'s lines when one run is shown: from the rank palette, leaving out
 * colours that look like the run's own (`runColour`, its global line's), so no rank's line can be
 * taken for the global one.
 */
export function rankColour(rank: number, runColour?: string): string {
  const palette =
    runColour === undefined
      ? RANK_PALETTE
      : RANK_PALETTE.filter((c) => colourDistance(c, runColour) >= MIN_RANK_DISTANCE);
  const n = palette.length;
  return palette[((rank % n) + n) % n] ?? "#333";
}
