/**
 * The dashboard's pure helpers: TensorBoard's debiased EMA smoothing, tick labels, histogram steps
 * and heatmap cells, visible names, internal keys, regex search, live thinning, the x-by-metric
 * join, CSV, the runs filter box as a server query and the URL round trip.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatTicks, formatValue } from "../../../src/ui/web/chart-axes.js";
import {
  MIN_RANK_DISTANCE,
  RANK_PALETTE,
  RUN_PALETTE,
  assignRunColours,
  colourDistance,
  rankColour,
} from "../../../src/ui/web/colours.js";
import { bestAndWorst, cellText, defaultScoreRule } from "../../../src/ui/web/tabs/samples.js";
import { orderSummaryKeys, summaryColumns, watchRank } from "../../../src/ui/web/summary-columns.js";
import { interpolate, linesToCsv } from "../../../src/ui/web/chart-data.js";
import { heatmapGrid, histogramSteps } from "../../../src/ui/web/histogram.js";
import { bucketBars } from "../../../src/ui/web/tabs/inference-at.js";
import { isInternalKey, searchMatcher, sectionOf, visibleName } from "../../../src/ui/web/names.js";
import { smoothDebiasedEma, smoothLine, smoothingFor } from "../../../src/ui/web/smooth.js";
import { filterQuery } from "../../../src/ui/web/run-filter.js";
import { runsSearch } from "../../../src/ui/web/api.js";
import { parseRunQuery } from "../../../src/ui/run-query.js";
import { serverSort } from "../../../src/ui/web/tabs/runs-table.js";
import { thinPoints } from "../../../src/ui/web/thin.js";
import { alertEpisodes, alertSubject } from "../../../src/ui/web/alerts.js";
import type { AlertEntry } from "../../../src/ui/web/api.js";

describe("smoothDebiasedEma", () => {
  it("leaves values alone at weight 0", () => {
    assert.deepEqual(smoothDebiasedEma([1, 5, 2], 0), [1, 5, 2]);
  });

  it("is debiased: a constant series stays constant from the first point", () => {
    for (const v of smoothDebiasedEma([3, 3, 3, 3], 0.9)) assert.ok(Math.abs((v ?? 0) - 3) < 1e-12);
  });

  it("matches the EMA recurrence divided by 1 - w^n", () => {
    const w = 0.6;
    const out = smoothDebiasedEma([1, 2, 4], w);
    const e1 = (1 - w) * 1;
    const e2 = w * e1 + (1 - w) * 2;
    const e3 = w * e2 + (1 - w) * 4;
    assert.deepEqual(
      out.map((v) => Number(v?.toFixed(12))),
      [e1 / (1 - w), e2 / (1 - w ** 2), e3 / (1 - w ** 3)].map((v) => Number(v.toFixed(12))),
    );
  });

  it("passes NaN and gaps through without poisoning later points", () => {
    const out = smoothDebiasedEma([1, NaN, null, 1], 0.5);
    assert.ok(Number.isNaN(out[1]));
    assert.equal(out[2], null);
    assert.equal(out[3], 1);
  });
});

describe("smoothLine: smoothing never misleads on a short run", () => {
  // A 10-step run whose reward falls back at the end: TensorBoard's 0.6 would draw its last step at 0.73.
  const tenSteps = [0.2, 0.5, 0.7, 0.9, 0.95, 0.9, 0.95, 0.9, 0.85, 0.53];

  it("draws a 10-point line as its values at the default weight and at 0.99", () => {
    assert.ok((smoothDebiasedEma(tenSteps, 0.6).at(-1) ?? 0) > 0.7, "the plain debiased EMA lags to above 0.7");
    assert.deepEqual(smoothLine(tenSteps, 0.6), tenSteps);
    assert.deepEqual(smoothLine(tenSteps, 0.99), tenSteps);
  });

  it("holds the smoothing window to a tenth of the line's points", () => {
    assert.equal(smoothingFor(0.6, 10), 0);
    assert.equal(smoothingFor(0.6, 20), 0.5);
    assert.equal(smoothingFor(0.6, 25), 0.6);
    assert.equal(smoothingFor(0.6, 10_000), 0.6, "a long line keeps the slider's weight");
    assert.equal(Number(smoothingFor(0.99, 200).toFixed(12)), 0.95);
    assert.equal(smoothingFor(0, 10_000), 0);
    for (let n = 0; n < 2000; n += 7) {
      const w = smoothingFor(0.99, n);
      assert.ok(w === 0 || 1 / (1 - w) <= n / 10 + 1e-9, `${n} points: window ${1 / (1 - w)}`);
    }
  });

  it("counts only finite points, and smooths a long line as TensorBoard does", () => {
    const gaps = [1, NaN, null, 2, 3];
    assert.deepEqual(smoothLine(gaps, 0.6), gaps);
    const long = Array.from({ length: 1000 }, (_, i) => Math.sin(i));
    assert.deepEqual(smoothLine(long, 0.6), smoothDebiasedEma(long, 0.6));
  });
});

describe("formatTicks", () => {
  it("gives small steps enough decimals to tell ticks apart", () => {
    assert.deepEqual(formatTicks([0, 0.0005, 0.001]), ["0.0000", "0.0005", "0.0010"]);
    assert.deepEqual(formatTicks([0, 50, 100]), ["0", "50", "100"]);
    assert.deepEqual(formatTicks([0, 2e6, 4e6]), ["0", "2.0e+6", "4.0e+6"]);
  });

  it("reads 0.25 and 0.75 as themselves, not 0.3 and 0.8", () => {
    assert.deepEqual(formatTicks([0, 0.25, 0.5, 0.75, 1]), ["0.00", "0.25", "0.50", "0.75", "1.00"]);
    assert.deepEqual(formatTicks([0.2, 0.4, 0.6]), ["0.2", "0.4", "0.6"]);
    assert.deepEqual(formatTicks([1.5e6, 2e6, 2.5e6]), ["1.5e+6", "2.0e+6", "2.5e+6"]);
    assert.deepEqual(formatTicks([0, 2.5e-5, 5e-5]), ["0", "2.5e-5", "5.0e-5"]);
  });

  it("writes non-finite values by name", () => {
    assert.deepEqual([NaN, Infinity, -Infinity, 0.5].map(formatValue), ["NaN", "+Inf", "-Inf", "0.5"]);
  });
});

describe("names", () => {
  it("shows control, zero-width and bidi characters as escapes and leaves other UTF-8 alone", () => {
    assert.equal(visibleName("tri\u202Eal"), "tri\\u{202E}al");
    assert.equal(visibleName("a\u0000b\u200Bc\u2066d"), "a\\u{0000}b\\u{200B}c\\u{2066}d");
    for (const name of ["café", "lr=3e-4,bs=256", "ablation (v2)", "run+1", "实验1", "2026-11-24T00:45:00"])
      assert.equal(visibleName(name), name);
  });

  it("knows rankscope's internal keys, and defers to the server's flag", () => {
    assert.equal(isInternalKey("loss__count"), true);
    assert.equal(isInternalKey("rankscope/ranks_alive"), true);
    assert.equal(isInternalKey("train/loss"), false);
    assert.equal(isInternalKey("train/loss", true), true);
    assert.equal(isInternalKey("loss__count", false), false);
  });

  it("searches by case-insensitive regex, and by text when the pattern is invalid", () => {
    assert.equal(searchMatcher("^train/(loss|acc)$").test("TRAIN/loss"), true);
    assert.equal(searchMatcher("^train/(loss|acc)$").test("train/lr"), false);
    const bad = searchMatcher("train/(");
    assert.ok(bad.error !== null);
    assert.equal(bad.test("x/train/(y"), true);
    assert.equal(sectionOf("train/loss/x"), "train");
    assert.equal(sectionOf("loss"), "");
  });
});

describe("thinPoints", () => {
  it("leaves a line under the cap alone", () => {
    const p = { steps: [1, 2], times: [1, 2], values: [1, 2] };
    assert.equal(thinPoints(p, 10), false);
    assert.equal(p.values.length, 2);
  });

  it("thins the older points to first/min/max/last per bucket, keeps spikes, NaN and the raw tail", () => {
    const n = 10_000;
    const p = {
      steps: Array.from({ length: n }, (_, i) => i),
      times: Array.from({ length: n }, (_, i) => i * 10),
      values: Array.from({ length: n }, (_, i) => (i === 1234 ? 99 : i === 4321 ? NaN : Math.sin(i))),
    };
    assert.equal(thinPoints(p, 6000, 2000, 1000), true);
    assert.ok(p.values.length <= 2000 + 1000 + 10, `${p.values.length}`);
    assert.ok(p.values.includes(99), "the spike stays");
    assert.ok(
      p.values.some((v) => Number.isNaN(v)),
      "the NaN stays",
    );
    assert.deepEqual(
      p.steps.slice(-1000),
      Array.from({ length: 1000 }, (_, i) => n - 1000 + i),
      "the newest 1,000 stay raw",
    );
    for (let i = 1; i < p.steps.length; i++)
      assert.ok((p.steps[i] ?? 0) > (p.steps[i - 1] ?? 0), "still in step order");
    assert.equal(p.times[p.steps.indexOf(1234)], 12340);
  });
});

describe("x-axis by metric", () => {
  it("joins by step, interpolating between the metric's points", () => {
    const tokens = { steps: [0, 10, 20], values: [0, 1000, 3000] };
    assert.equal(interpolate(tokens, 10), 1000);
    assert.equal(interpolate(tokens, 15), 2000);
    assert.ok(Number.isNaN(interpolate(tokens, 25)));
  });
});

describe("linesToCsv", () => {
  it("writes one row per point, quoting labels", () => {
    const csv = linesToCsv([
      { id: "a", label: 'run "a", rank 0', runStart: null, steps: [1, 2], times: [10, 20], values: [0.5, NaN] },
    ]);
    assert.equal(csv, 'line,step,time_ms,value\n"run ""a"", rank 0",1,10,0.5\n"run ""a"", rank 0",2,20,NaN\n');
  });
});

describe("runs filter box → server query", () => {
  it("turns tags, group, status, comparisons and text into the query /api/runs parses", () => {
    const query = filterQuery(
      "tag:wide group:g1 status:Running lr<0.1 optimizer!=adam loss<1 sweep/ 2026",
      new Set(["loss"]),
      new Set(["lr", "optimizer"]),
    );
    assert.deepEqual(query, {
      q: ["sweep/", "2026"],
      tags: ["wide"],
      group: "g1",
      statuses: ["running"],
      params: ["lr<0.1", "optimizer!=adam"],
      metrics: ["loss<1"],
    });
    const parsed = parseRunQuery(runsSearch({ ...query, sort: "-param:lr", offset: 200, limit: 100 }));
    assert.deepEqual(parsed.texts, ["sweep/", "2026"]);
    assert.deepEqual(parsed.tags, ["wide"]);
    assert.equal(parsed.group, "g1");
    assert.deepEqual(parsed.statuses, ["running"]);
    assert.deepEqual(
      parsed.params?.map((p) => [p.name, p.op, p.value]),
      [
        ["lr", "<", 0.1],
        ["optimizer", "!=", "adam"],
      ],
    );
    assert.deepEqual(
      parsed.metrics?.map((m) => [m.key, m.op, m.value]),
      [["loss", "<", 1]],
    );
    assert.equal(parsed.offset, 200);
    assert.equal(parsed.limit, 100);
  });

  it("a comparison on a name that is a hyperparameter stays a parameter even when it is a metric too", () => {
    assert.deepEqual(filterQuery("loss<1", new Set(["loss"]), new Set(["loss"])), { params: ["loss<1"] });
    assert.deepEqual(filterQuery("x=", new Set(), new Set()), { q: ["x="] });
  });

  it("maps the table's column sorts to the server's", () => {
    assert.equal(serverSort("p:lr"), "param:lr");
    assert.equal(serverSort("-s:loss"), "-metric:loss");
    assert.equal(serverSort("start"), "-started");
    assert.equal(serverSort("-start"), "started");
    assert.equal(serverSort("tags"), undefined);
  });
});

describe("heatmapGrid", () => {
  it("re-bins each step's buckets onto shared cells, normalised per step", () => {
    const { low, high, columns } = heatmapGrid(
      [
        { min: 0, max: 4, bucketLimits: [2, 4], bucketCounts: [10, 0] },
        { min: 0, max: 4, bucketLimits: [2, 4], bucketCounts: [0, 5] },
      ],
      4,
    );
    assert.deepEqual([low, high], [0, 4]);
    assert.deepEqual(columns, [
      [1, 1, 0, 0],
      [0, 0, 1, 1],
    ]);
  });

  it("draws one histogram per step in step order: a step given twice shows its last histogram, never the sum", () => {
    const at = (
      step: number,
      counts: number[],
    ): { step: number; min: number; max: number; bucketLimits: number[]; bucketCounts: number[] } => ({
      step,
      min: 0,
      max: 4,
      bucketLimits: [2, 4],
      bucketCounts: counts,
    });
    const { columns, steps } = heatmapGrid([at(2, [1, 1]), at(1, [4, 0]), at(1, [0, 2])], 2);
    assert.deepEqual(steps, [1, 2]);
    assert.deepEqual(columns, [
      [0, 1],
      [1, 1],
    ]);
  });
});

describe("histogramSteps", () => {
  it("starts at the minimum and closes an open last bucket at the maximum", () => {
    const [xs, ys] = histogramSteps({ min: -2, max: 3.5, bucketLimits: [-1, 0, Infinity], bucketCounts: [1, 5, 2] });
    assert.deepEqual(xs, [-2, -1, 0, 3.5]);
    assert.deepEqual(ys, [0, 1, 5, 2]);
  });

  it("closes a Reduce.buckets histogram's last bucket (Number.MAX_VALUE) at the maximum too", () => {
    const h = { min: 0.03, max: 0.4, bucketLimits: [0.01, 0.1, 1, Number.MAX_VALUE], bucketCounts: [0, 3, 1, 0] };
    const [xs, ys] = histogramSteps(h);
    assert.deepEqual(xs, [0.01, 0.1, 1]);
    assert.deepEqual(ys, [0, 3, 1]);
  });

  it("the Inference tab's distribution: equal bars from the first bucket holding a value to the last, labelled by their bounds", () => {
    const limits = [0.01, 0.1, 1, Number.MAX_VALUE];
    assert.deepEqual(bucketBars({ bucketLimits: limits, bucketCounts: [0, 3, 0, 2] }), {
      labels: ["≤ 100 ms", "≤ 1 s", "> 1 s"],
      counts: [3, 0, 2],
    });
    assert.deepEqual(bucketBars({ bucketLimits: limits, bucketCounts: [0, 0, 0, 0] }), { labels: [], counts: [] });
  });
});

describe("run and rank colours", () => {
  const runs = Array.from({ length: 12 }, (_, i) => ({ id: `sweep/trial-${i}`, startedAt: 1000 + i }));

  it("keeps every run's colour when a run appears, whatever its name", () => {
    const before = assignRunColours(runs);
    for (const id of ["aaa/first", "zzz/last", "sweep/trial-5b"]) {
      const after = assignRunColours([...runs, { id, startedAt: 5000 }]);
      for (const run of runs) assert.equal(after.get(run.id), before.get(run.id), `${run.id} after ${id} appeared`);
    }
  });

  it("gives up to 20 runs 20 different colours, from the run's id", () => {
    const colours = assignRunColours(Array.from({ length: 20 }, (_, i) => ({ id: `r${i}`, startedAt: i })));
    assert.equal(new Set(colours.values()).size, 20);
    assert.equal(
      assignRunColours([{ id: "x/y", startedAt: 1 }]).get("x/y"),
      assignRunColours([{ id: "x/y", startedAt: 99 }]).get("x/y"),
    );
  });

  it("colours ranks from a palette no run uses, leaving out colours close to the run's own", () => {
    for (const c of RANK_PALETTE) assert.ok(!RUN_PALETTE.includes(c), c);
    for (const run of RUN_PALETTE) {
      const ranks = Array.from({ length: 12 }, (_, r) => rankColour(r, run));
      assert.equal(new Set(ranks).size, 12, `12 ranks of a ${run} run`);
      for (const c of ranks) assert.ok(colourDistance(c, run) >= MIN_RANK_DISTANCE, `${c} looks like ${run}`);
    }
  });
});

describe("sample tables", () => {
  it("marks the best and worst record by a reward (highest best) or a loss (lowest best)", () => {
    assert.deepEqual(defaultScoreRule(["tokens", "reward"]), { field: "reward", higherIsBetter: true });
    assert.deepEqual(defaultScoreRule(["tokens", "val_loss"]), { field: "val_loss", higherIsBetter: false });
    assert.equal(defaultScoreRule(["tokens"]), null);
    const records = [{ reward: 0.5 }, { reward: NaN }, { reward: 0.9 }, { other: 1 }, { reward: 0.1 }];
    assert.deepEqual(bestAndWorst(records, { field: "reward", higherIsBetter: true }), { best: 2, worst: 4 });
    assert.deepEqual(bestAndWorst(records, { field: "reward", higherIsBetter: false }), { best: 4, worst: 2 });
  });

  it("writes numbers with 6 significant digits at most, integers whole", () => {
    assert.deepEqual([0.12345678901234566, 123456, 2 ** 40, 1e-7, NaN, "text"].map(cellText), [
      "0.123457",
      "123456",
      "1099511627776",
      "1.0000e-7",
      "NaN",
      "text",
    ]);
  });
});

describe("summary columns", () => {
  it("puts the names a user watches first, then the keys most runs have", () => {
    assert.ok(watchRank("train/loss") < watchRank("policy_loss") && watchRank("policy_loss") < watchRank("reward"));
    const summaries: Record<string, number>[] = [
      { "a/x": 1, loss: 1, "z/common": 1 },
      { "z/common": 1, "eval/reward": 2, "b/y": 3 },
    ];
    assert.deepEqual(orderSummaryKeys(summaries, ["a/x", "b/y", "eval/reward", "loss", "z/common"]), [
      "loss",
      "eval/reward",
      "z/common",
      "a/x",
      "b/y",
    ]);
    assert.deepEqual(summaryColumns(summaries, ["a/x", "b/y", "eval/reward", "loss", "z/common"], null, 2), [
      "loss",
      "eval/reward",
    ]);
    assert.deepEqual(
      summaryColumns(summaries, ["a/x", "b/y", "eval/reward", "loss", "z/common"], ["b/y", "gone", "loss"]),
      ["loss", "b/y"],
    );
  });
});

describe("alert episodes", () => {
  const entry = (seq: number, id: string, state: AlertEntry["state"], extra: Partial<AlertEntry> = {}): AlertEntry => ({
    seq,
    id,
    rule: id.split(":")[0] ?? id,
    level: "error",
    run: "e/t",
    step: seq,
    message: `${id} ${state}`,
    state,
    at: seq,
    ...extra,
  });

  it("pairs each firing with its resolve; firing ones first, newest first; a resolve without its firing is left out", () => {
    const episodes = alertEpisodes([
      entry(1, "nonfinite:a#1", "firing"),
      entry(2, "rank_lost:r1#2", "firing"),
      entry(3, "nonfinite:a#1", "resolved"),
      entry(4, "stalled:job#3", "firing"),
      entry(5, "old#0", "resolved"),
    ]);
    assert.deepEqual(
      episodes.map((e) => [e.id, e.resolved?.seq ?? null]),
      [
        ["stalled:job#3", null],
        ["rank_lost:r1#2", null],
        ["nonfinite:a#1", 3],
      ],
    );
  });

  it("names what an alert is about: its key, its rank with host, or the job", () => {
    assert.equal(alertSubject(entry(1, "nonfinite:loss#1", "firing", { key: "loss" })), "loss");
    assert.equal(
      alertSubject(entry(1, "rank_lost:r#1", "firing", { rank: 3, rankName: "T_r3", host: "h" })),
      "rank 3 (T_r3) on h",
    );
    assert.equal(alertSubject(entry(1, "stalled:job#1", "firing")), "the job");
    assert.equal(alertSubject(entry(1, "user#1", "firing", { rule: "user", title: "hi" })), "hi");
  });
});
