/**
 * Getting lines' points: a few lines per request (of any runs), a few requests at a time, only for cards that
 * came on screen (an IntersectionObserver per grid), and again for a zoomed window.
 */
import { api, isStreamData, type LineAnswer, type SeriesData, type StreamData } from "./api.js";
import type { ChartCard } from "./chart.js";
import { xOf, type Line } from "./chart-data.js";
import { isLive, state, hooks, type LineSource } from "./state.js";

export const FETCH_CONCURRENCY = 4;
/** Lines per request on a first load: small enough that the first charts draw early. */
const FIRST_LOAD_BATCH = 8;
export const API_KIND = { series: "scalar", stream: "stream", system: "system" } as const;

/** Run tasks with at most `limit` in flight. */
export async function pool<T>(items: T[], limit: number, task: (item: T) => Promise<void>): Promise<void> {
  // One iterator shared by the workers: each takes the next item when it is free.
  const queue = items.values();
  const worker = async (): Promise<void> => {
    for (let next = queue.next(); next.done !== true; next = queue.next()) await task(next.value);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** Split items into groups by `keyOf`, each cut into chunks of at most `size`. */
export function batches<T>(items: T[], keyOf: (item: T) => string, size: number): T[][] {
  const groups = new Map<string, T[]>();
  for (const item of items) {
    const key = keyOf(item);
    const group = groups.get(key) ?? [];
    group.push(item);
    groups.set(key, group);
  }
  const out: T[][] = [];
  for (const group of groups.values()) for (let i = 0; i < group.length; i += size) out.push(group.slice(i, i + size));
  return out;
}

/**
 * Points to ask for per line: the server keeps min, max and last per bucket, so about one bucket
 * per two pixels already shows every spike. Capped by the server's default of 2,000.
 */
function pointsForWidth(width: number): number {
  return Math.max(300, Math.min(2000, Math.round(width * 1.5)));
}

/** A card and the lines it draws, before they are fetched. */
export interface CardSpec {
  card: ChartCard;
  lines: LineSource[];
  /** Called once the card's lines are in (to add the x-axis metric's points, etc.). */
  prepare?: () => Promise<void>;
  /** Fetches and draws the card itself instead (a chart of groups, `/api/groups`), at most `maxPoints` per line. */
  load?: (maxPoints: number) => Promise<void>;
}

/** Turns stream answers into per-rank scatter lines (set by the streams tab). */
export const streamHooks = {
  addStreamPoints: (card: ChartCard, source: LineSource, data: StreamData): boolean => {
    void card;
    void source;
    void data;
    return false;
  },
};

/**
 * Lazy cards of one view: each card's lines are fetched when the card first comes near the
 * screen, and a card draws only while it is on screen.
 */
export class LazyGrid {
  private readonly observer: IntersectionObserver;
  private readonly specs = new Map<Element, CardSpec>();
  private readonly queue: CardSpec[] = [];
  private scheduled = false;
  private width = 0;
  /** The cards of the first load (those on screen when the view opened). */
  firstBatch: Set<ChartCard> | null = null;

  constructor(
    private readonly generation: number,
    private readonly onLoaded: (spec: CardSpec) => void = () => undefined,
  ) {
    this.observer = new IntersectionObserver((entries) => this.seen(entries), { rootMargin: "200px 0px" });
  }

  add(spec: CardSpec): void {
    this.specs.set(spec.card.root, spec);
    this.observer.observe(spec.card.root);
  }

  disconnect(): void {
    this.observer.disconnect();
  }

  private seen(entries: IntersectionObserverEntry[]): void {
    for (const entry of entries) {
      const spec = this.specs.get(entry.target);
      if (spec === undefined) continue;
      spec.card.setOnScreen(entry.isIntersecting);
      // A loaded card scrolled into view under a zoom made elsewhere: fetch its window too.
      const zoom = state.settings.zoom;
      if (
        entry.isIntersecting &&
        zoom !== null &&
        entry.target.getAttribute("data-loaded") === "1" &&
        entry.target.getAttribute("data-refined-zoom") !== String(zoom)
      ) {
        void refineWindow(this.generation, [spec.card]);
      }
      if (entry.isIntersecting && entry.target.getAttribute("data-requested") !== "1") {
        entry.target.setAttribute("data-requested", "1");
        this.queue.push(spec);
      }
    }
    if (this.queue.length > 0 && !this.scheduled) {
      this.scheduled = true;
      setTimeout(() => void this.drain(), 0);
    }
  }

  private async drain(): Promise<void> {
    this.scheduled = false;
    const specs = this.queue.splice(0);
    if (specs.length === 0 || this.generation !== state.generation) return;
    this.firstBatch ??= new Set(specs.map((s) => s.card));
    if (this.width === 0) {
      const plot = specs[0]?.card.root.querySelector(".plot");
      this.width = plot instanceof HTMLElement ? plot.clientWidth : 400;
    }
    for (const spec of specs) spec.card.setWidthHint(this.width);
    await fillCards(this.generation, specs, pointsForWidth(this.width));
    for (const spec of specs) this.onLoaded(spec);
  }
}

/** Fetch every line of the given cards and draw each card as soon as it has all its lines. */
async function fillCards(generation: number, all: CardSpec[], maxPoints: number): Promise<void> {
  const own = all.filter((spec) => spec.load !== undefined);
  const specs = all.filter((spec) => spec.load === undefined);
  await pool(own, FETCH_CONCURRENCY, async (spec) => {
    try {
      await spec.load?.(maxPoints);
    } catch (error) {
      if (generation === state.generation) hooks.showError(error);
    }
  });
  const jobs = specs.flatMap((spec) => spec.lines.map((l) => ({ spec, l })));
  const pending = new Map(specs.map((s) => [s, s.lines.length]));
  const done = async (spec: CardSpec): Promise<void> => {
    await spec.prepare?.();
    if (generation !== state.generation) return;
    if (spec.lines[0]?.kind === "stream") spec.card.setLines(spec.card.getLines());
    else spec.card.setLines(spec.lines.map((x) => x.line));
  };
  const zoom = state.settings.zoom;
  // Lines of one kind, whichever runs they are of: an overlay of 50 runs is a few requests, not 50.
  const groups = batches(jobs, (j) => j.l.kind, FIRST_LOAD_BATCH);
  await pool(groups, FETCH_CONCURRENCY, async (group) => {
    const first = group[0];
    if (first === undefined) return;
    let answers: LineAnswer<SeriesData | StreamData>[] = [];
    try {
      answers = await api.runLines(
        API_KIND[first.l.kind],
        group.map(({ l }) => [l.run, l.key, l.rank ?? null, null]),
        maxPoints,
      );
    } catch (error) {
      if (generation === state.generation) hooks.showError(error);
    }
    if (generation !== state.generation) return;
    for (const [i, { spec, l }] of group.entries()) {
      const answer = answers[i];
      if (answer !== undefined && "error" in answer) hooks.showError(answer.error);
      else if (answer !== undefined && l.kind === "stream") {
        if (!isStreamData(answer)) continue;
        const data = answer;
        streamHooks.addStreamPoints(spec.card, l, data);
        l.cursor = data.cursor;
        state.lineSources.set(`${l.run}\u0000stream\u0000${l.key}`, l);
      } else if (answer !== undefined && !isStreamData(answer)) {
        const data = answer;
        l.line.steps = data.steps;
        l.line.times = data.times;
        l.line.values = data.values;
        l.line.downsampled = data.downsampled;
        l.cursor = data.cursor;
        state.lineSources.set(l.line.id, l);
      }
      const left = (pending.get(spec) ?? 1) - 1;
      pending.set(spec, left);
      if (left === 0) await done(spec);
    }
  });
  if (generation !== state.generation) return;
  for (const spec of specs) if (spec.lines.length === 0) spec.card.setLines([]);
  // Charts loaded under a zoom (from the URL): fetch the window's raw points too.
  if (zoom !== null)
    await refineWindow(
      generation,
      specs.map((s) => s.card),
    );
}

/**
 * The steps an x range covers on a line: for x by step the range itself; otherwise the steps of
 * the line's points inside it (widened by one point each side).
 */
function stepWindow(line: Line, range: [number, number], xOfPoint: (i: number) => number): [number, number] | null {
  let lo: number | null = null;
  let hi: number | null = null;
  for (let i = 0; i < line.values.length; i++) {
    const x = xOfPoint(i);
    if (x < range[0] || x > range[1]) continue;
    const s = line.steps[i] ?? 0;
    lo = lo === null ? (line.steps[Math.max(0, i - 1)] ?? s) : Math.min(lo, s);
    hi = Math.max(hi ?? s, line.steps[Math.min(line.values.length - 1, i + 1)] ?? s);
  }
  return lo === null || hi === null ? null : [lo, hi];
}

/**
 * A zoom over thinned lines: ask for the points of the window only (`after` = the step before
 * it, `before` = the step after it), at the chart's resolution, and splice them in. Ten thousand
 * steps in the middle of a million-step line come back raw once the window is narrow enough.
 */
export async function refineWindow(generation: number, cards: ChartCard[]): Promise<void> {
  const zoom = state.settings.zoom;
  if (zoom === null) return;
  await Promise.all(
    cards.map(async (card) => {
      card.root.dataset["refinedZoom"] = String(zoom);
      const settings = card.getSettings();
      const wanted = [...state.lineSources.values()].filter(
        (s) => s.card === card && s.kind === "series" && s.line.downsampled === true,
      );
      if (wanted.length === 0) return;
      const width = card.root.querySelector(".plot")?.clientWidth ?? 400;
      const maxPoints = pointsForWidth(width);
      let changed = false;
      await Promise.all(
        wanted.map(async (source) => {
          const { line } = source;
          const byStep: [number, number] = [Math.floor(zoom[0]) - 1, Math.ceil(zoom[1]) + 1];
          const window =
            settings.xMode === "step" ? byStep : stepWindow(line, zoom, (i) => xOf(line, settings.xMode, i));
          if (window === null) return;
          const [from, to] = window;
          // Without `before` (an older server) the answer runs to the line's end: a budget that
          // gives the window about the chart's resolution, up to the server's 2,000.
          const lastStep = line.steps[line.steps.length - 1] ?? to;
          const fallbackBudget = Math.min(
            2000,
            Math.ceil(maxPoints * Math.max(1, (lastStep - from + 1) / Math.max(1, to - from + 1))),
          );
          const ask = (budget: number): Promise<LineAnswer<SeriesData>[]> =>
            api.lines<SeriesData>(
              source.run,
              "scalar",
              [[source.key, source.rank ?? null, String(from - 1), to + 1]],
              budget,
            );
          let answer: LineAnswer<SeriesData> | undefined;
          try {
            const knewBefore = api.supportsBefore();
            // With `before` the answer is the window only: ask for as many points as the server
            // gives (2,000), so a window of up to 2,000 steps comes back raw.
            [answer] = await ask(knewBefore ? 2000 : fallbackBudget);
            if (knewBefore && !api.supportsBefore()) [answer] = await ask(fallbackBudget);
          } catch (error) {
            hooks.showError(error);
            return;
          }
          if (generation !== state.generation || answer === undefined || "error" in answer) return;
          // A server without `before` answered from `from` to the end: keep the window's part.
          let end = answer.steps.length;
          while (end > 0 && (answer.steps[end - 1] ?? 0) > to) end--;
          const startCut = line.steps.findIndex((s) => s >= from);
          const head = startCut === -1 ? line.steps.length : startCut;
          let tail = line.steps.findIndex((s) => s > to);
          if (tail === -1) tail = line.steps.length;
          card.root.dataset["windowPointsBefore"] = String(tail - head);
          card.root.dataset["windowPoints"] = String(end);
          line.steps = [...line.steps.slice(0, head), ...answer.steps.slice(0, end), ...line.steps.slice(tail)];
          line.times = [...line.times.slice(0, head), ...answer.times.slice(0, end), ...line.times.slice(tail)];
          line.values = [...line.values.slice(0, head), ...answer.values.slice(0, end), ...line.values.slice(tail)];
          changed = true;
          card.root.dataset["windowRaw"] = answer.downsampled ? "0" : "1";
        }),
      );
      if (generation !== state.generation || !changed) return;
      card.update();
      card.root.dataset["refined"] = String(Number(card.root.dataset["refined"] ?? "0") + 1);
    }),
  );
}

/** Lines whose run is live or just ended: the ones a poll asks about. */
export function pollable(): LineSource[] {
  return [...state.lineSources.values()].filter(
    (s) => s.card.isOnScreen() && (isLive(s.run) || state.finalPoll.has(s.run)),
  );
}
