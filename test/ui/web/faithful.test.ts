/**
 * The dashboard shows what is there (issue 20, items 10–14 and 16), in Debian's Chromium over
 * runs written by the real store writer: one line's histograms per heatmap (no global + per-rank
 * double counting) over the newest 200 steps, internal stream keys hidden and a truthful x-axis,
 * sample tables with a step slider, ranks apart, best/worst marked, short numbers and pages, run
 * colours that survive a new run, rank colours apart from run colours, whole legends and
 * tooltips, summary columns a user watches (remembered), hyperparameters named one way, and the
 * text logs in a Logs tab. Screenshots go to test-artifacts/.
 */
import assert from "node:assert/strict";
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import { GLOBAL_RANK } from "../../../src/store/read-types.js";
import { StoreWriter, type HistogramWrite, type SampleWrite, type ScalarPoint } from "../../../src/store/writer.js";
import { startDashboard, type Dashboard } from "../../../src/ui/server.js";
import { RUN_PALETTE } from "../../../src/ui/web/colours.js";
import { runSnippet, tempDir, waitFor } from "../../helpers.js";
import type { LaunchedBrowser } from "../browser.js";
import { openRun } from "../seed.js";
import { card, ensureWebBuilt, openPage, shot, writeRun } from "./support.js";
import { PAGE_WAIT_MS } from "../browser.js";

const T0 = Date.now() - 3_600_000;
const RANKS = 11;
const HIST_STEPS = 300;
const SAMPLE_STEPS = 20;

/** 0.1234567890123456-like rewards: what a policy's scores look like in JSON. */
const rewardOf = (step: number, i: number, rank: number): number => Math.abs(Math.sin(step * 31 + i * 7 + rank * 3));

/**
 * An RL-like job: `loss` global and per rank (11 ranks, each named by its own process), `reward`,
 * an internal count, histograms of the global line (values in [0, 1]) and of 4 ranks (values in
 * [10, 11]) over 300 steps, stream keys with an internal `__count`, and samples whose records
 * carry their own `step` and `rank` fields, global and per rank over 20 steps (800 rows).
 */
function seedRlJob(root: string): string {
  const controller = openRun(root, "rl", "job");
  const scalars: ScalarPoint[] = [];
  for (let step = 0; step < 60; step++) {
    const wall = T0 + step * 1000;
    scalars.push({ key: "loss", step, wall, value: 2 * Math.exp(-step / 30) + 0.2, reduce: "mean" });
    scalars.push({ key: "reward", step, wall, value: 1 - Math.exp(-step / 20), reduce: "mean" });
    scalars.push({ key: "loss__count", step, wall, value: RANKS, reduce: "sum" });
  }
  const histograms: HistogramWrite[] = [];
  for (let step = 0; step < HIST_STEPS; step++) {
    const wall = T0 + step * 1000;
    histograms.push({
      key: "rewards/hist",
      step,
      wall,
      histogram: {
        count: 8,
        min: 0.05,
        max: 0.95,
        sum: 4,
        sumSquares: 3,
        bucketLimits: [0.25, 0.5, 0.75, 1],
        bucketCounts: [2, 2, 2, 2],
      },
    });
    for (let rank = 0; rank < 4; rank++) {
      histograms.push({
        key: "rewards/hist",
        step,
        wall,
        rank,
        histogram: {
          count: 4,
          min: 10.1,
          max: 10.9 + rank * 0.01,
          sum: 42,
          sumSquares: 441,
          bucketLimits: [10.5, 11],
          bucketCounts: [1 + rank, 3 - (rank % 3)],
        },
      });
    }
  }
  const samples: SampleWrite[] = [];
  for (let step = 0; step < SAMPLE_STEPS; step++) {
    const wall = T0 + step * 1000;
    for (const rank of [GLOBAL_RANK, 0, 1]) {
      const n = rank === GLOBAL_RANK ? 10 : 15;
      const records = Array.from({ length: n }, (_, i) => ({
        step,
        rank: rank === GLOBAL_RANK ? "all" : rank,
        prompt: `question ${step}.${i}`,
        reward: rewardOf(step, i, rank),
        tokens: 100 + i,
      }));
      samples.push({ key: "rollouts", step, wall, records, ...(rank === GLOBAL_RANK ? {} : { rank }) });
    }
  }
  const streams = [];
  for (let i = 0; i < 40; i++) {
    streams.push({ key: "rollout/len", step: i >> 2, wall: T0 + i * 250, value: 100 + i, rank: i % 4 });
    streams.push({ key: "rollout/len__count", step: i >> 2, wall: T0 + i * 250, value: 1, rank: i % 4 });
  }
  controller.write({ scalars, histograms, samples, streams });
  for (let rank = 0; rank < RANKS; rank++) {
    const writer = StoreWriter.open({
      runDir: join(root, "rl", "job"),
      role: "rank",
      rank,
      rankName: `Rollout_worker_${rank}_r${rank}`,
      experiment: "rl",
      trial: "job",
    });
    const steps = Float64Array.from({ length: 60 }, (_, i) => i);
    writer.writeSeries(
      "loss",
      steps,
      steps.map((s) => T0 + s * 1000),
      steps.map((s) => 2 * Math.exp(-s / 30) + 0.2 + rank * 0.05),
      { rank, reduce: "mean" },
    );
    writer.finish("finished");
  }
  controller.finish("finished");
  return join(root, "rl", "job");
}

/** A run with many keys that sort before the ones a user watches. */
function seedWideRun(root: string): void {
  const keys: Record<string, (s: number) => number> = {
    "train/loss": (s) => 1 / (s + 1),
    reward: (s) => s / 10,
    "eval/accuracy": (s) => s / 40,
  };
  for (let k = 0; k < 20; k++) keys[`a/metric_${String(k).padStart(2, "0")}`] = (s) => s * k;
  writeRun(root, "wide", "keys", 40, keys, { lr: 0.01, model: { layers: 2 } });
}

/** Text logs as rankscope writes them: merged.log with a rank-name prefix per line (colours kept), main.log without. */
function seedLogs(runDir: string, lines: number): void {
  const logs = join(runDir, "logs");
  mkdirSync(logs, { recursive: true });
  const merged: string[] = [];
  const main: string[] = [];
  for (let i = 0; i < lines; i++) {
    const rank = ["Controller", "Trainer_0_r0", "Trainer_0_r1"][i % 3] ?? "";
    const component = i % 3 === 0 ? "Scheduler" : "Trainer";
    const level = i % 50 === 49 ? "ERROR" : i % 10 === 9 ? "WARNING" : "INFO";
    const text = `20261122-01:${String(Math.floor(i / 60) % 60).padStart(2, "0")}:${String(i % 60).padStart(2, "0")}.045 ${component} ${level}: line ${i} step=${i}`;
    const coloured =
      level === "ERROR" ? `\u001b[31m${text}\u001b[0m` : level === "WARNING" ? `\u001b[33m${text}\u001b[0m` : text;
    merged.push(`${`[${rank}]`.padEnd(16)} ${coloured}`);
    if (level === "ERROR")
      merged.push(
        `${`[${rank}]`.padEnd(16)} Error: boom ${i}`,
        `${`[${rank}]`.padEnd(16)}     at step (train.ts:${i}:1)`,
      );
    if (rank === "Controller") main.push(text);
  }
  writeFileSync(join(logs, "merged.log"), `${merged.join("\n")}\n`);
  writeFileSync(join(logs, "main.log"), `${main.join("\n")}\n`);
}

describe("the dashboard shows what is there (issue 20)", () => {
  let root: string;
  let rlDir: string;
  let dashboard: Dashboard;
  let launched: LaunchedBrowser;
  let page: Page;
  const errors: string[] = [];
  const apiAnswers: { url: string; bytes: number }[] = [];

  const open = async (hash: string): Promise<void> => {
    await page.goto(`${dashboard.url}#${hash}`);
    await page.reload();
  };

  before(async () => {
    ensureWebBuilt();
    root = tempDir("rankscope-ui-faithful-");
    rlDir = seedRlJob(root);
    seedLogs(rlDir, 3000);
    seedWideRun(root);
    for (const trial of ["b", "c"]) writeRun(root, "sweep", trial, 30, { loss: (s) => 1 / (s + 1) });
    // The same hyperparameters given as the run config and again through the facade's logHyperparams.
    const facade = await runSnippet(
      `import { Logger } from "./src/index.ts";
       const logger = await Logger.create({ logDir: ${JSON.stringify(join(root, "facade", "run"))}, console: false, store: { waitForWrites: true }, runConfig: { model: { layers: 4 }, lr: 0.1 } });
       await logger.logHyperparams({ model: { layers: 4, width: 8 }, seed: 1 });
       await logger.logMetrics({ loss: 1 }, 0);
       await logger.finish();`,
      {},
    );
    assert.equal(facade.code, 0, facade.stderr);
    dashboard = await startDashboard({ root, port: 0 });
    ({ launched, page } = await openPage(errors));
    page.on("response", (r) => {
      if (!r.url().includes("/api/")) return;
      r.body()
        .then((b) => apiAnswers.push({ url: r.url(), bytes: b.length }))
        .catch(() => undefined);
    });
  });

  after(async () => {
    await launched?.close();
    await dashboard?.close();
    rmSync(root, { recursive: true, force: true });
  });

  describe("item 10: histograms", () => {
    it("draws one line's histograms (the global one by default) over the newest 200 steps, never adding ranks to it", async () => {
      await open("run=rl/job&tab=histograms");
      const hist = card("rewards/hist");
      await page.waitForSelector(`${hist}[data-mode="heatmap"]`);
      assert.equal(await page.getAttribute(hist, "data-rank"), String(GLOBAL_RANK));
      assert.equal(await page.getAttribute(hist, "data-columns"), "200", "the newest 200 steps");
      assert.equal(await page.getAttribute(hist, "data-first-step"), String(HIST_STEPS - 200));
      assert.equal(await page.getAttribute(hist, "data-last-step"), String(HIST_STEPS - 1));
      // The global histograms hold values in [0, 1]; the ranks' in [10, 11]: added up, the range would reach 11.
      const high = Number(await page.getAttribute(hist, "data-high"));
      assert.ok(high <= 1, `the heatmap's value range ends at ${high}: the ranks' histograms were added in`);
      assert.doesNotMatch(await page.innerText(`${hist} .legend`), /added up/);
      await shot(page, "faithful-histogram-global.png", hist);
    });

    it("switches to one rank's histograms with the rank chooser", async () => {
      const hist = card("rewards/hist");
      const ranks = await page.$$eval(`${hist} select.hist-rank option`, (o) =>
        o.map((x) => (x as HTMLOptionElement).value),
      );
      assert.deepEqual(ranks, [String(GLOBAL_RANK), "0", "1", "2", "3"]);
      await page.selectOption(`${hist} select.hist-rank`, "2");
      await page.waitForSelector(`${hist}[data-rank="2"][data-mode="heatmap"]`);
      assert.equal(await page.getAttribute(hist, "data-columns"), "200");
      const low = Number(await page.getAttribute(hist, "data-low"));
      assert.ok(low >= 10, `rank 2's values start at ${low}`);
      await shot(page, "faithful-histogram-rank2.png", hist);
    });

    it("lists the steps in order, one entry per step of the line shown", async () => {
      const hist = card("rewards/hist");
      const steps = (await page.$$eval(`${hist} select.hist-step option`, (o) => o.map((x) => x.textContent ?? "")))
        .filter((t) => t.startsWith("step "))
        .map((t) => Number(t.slice(5)));
      assert.equal(steps.length, 200);
      for (let i = 1; i < steps.length; i++)
        assert.ok(
          (steps[i] ?? 0) < (steps[i - 1] ?? 0),
          `newest first, in step order: ${steps[i - 1]} then ${steps[i]}`,
        );
      await page.selectOption(`${hist} select.hist-step`, { label: "step 250" });
      await page.waitForSelector(`${hist}[data-step="250"][data-rank="2"]`);
      assert.match(await page.innerText(`${hist} .legend`), /n=4\b/);
    });
  });

  describe("item 11: streams", () => {
    it("hides internal __count stream keys until asked, and labels the x-axis with what it is", async () => {
      await open("run=rl/job&tab=streams&x=step");
      await page.waitForSelector(`${card("rollout/len")}[data-drawn]`);
      assert.equal(await page.locator(card("rollout/len__count")).count(), 0, "an internal key is hidden");
      assert.match(await page.innerText("#internal-note"), /1 hidden/);
      const options = await page.$$eval("#x-mode option", (o) => o.map((x) => x.textContent ?? ""));
      assert.ok(
        options.every((t) => !/step/.test(t)),
        `the streams tab offers only time axes: ${JSON.stringify(options)}`,
      );
      const picked = await page.$eval("#x-mode", (s) => (s as HTMLSelectElement).selectedOptions[0]?.textContent ?? "");
      assert.equal(picked, "relative time");
      assert.equal(await page.getAttribute(card("rollout/len"), "data-x-mode"), "relative");
      assert.equal(await page.getAttribute(card("rollout/len"), "data-x-label"), "seconds since start");
      await page.check("#show-internal");
      await page.waitForSelector(`${card("rollout/len__count")}[data-drawn]`);
      await page.uncheck("#show-internal");
      await shot(page, "faithful-streams.png");
      // Back on the metrics tab, the user's step axis is still there.
      await page.click('button[data-tab="metrics"]');
      await page.waitForSelector(`${card("loss")}[data-x-mode="step"]`);
    });
  });

  describe("item 12: samples", () => {
    it("shows one step at a time with a slider, record fields once each, ranks apart, best and worst marked, short numbers, pages", async () => {
      await open("run=rl/job&tab=samples");
      const table = 'table.samples[data-key="rollouts"]';
      await page.waitForSelector(table);
      const headers = await page.$$eval(`${table} thead th`, (t) => t.map((x) => x.textContent ?? ""));
      assert.equal(new Set(headers).size, headers.length, `no duplicate column: ${JSON.stringify(headers)}`);
      for (const field of ["step", "rank", "prompt", "reward", "tokens"])
        assert.ok(headers.includes(field), `${field} is a column`);
      // The slider starts at the newest step.
      const slider = 'input.sample-step[data-key="rollouts"]';
      assert.equal(await page.getAttribute(slider, "max"), String(SAMPLE_STEPS - 1));
      assert.equal(await page.inputValue(slider), String(SAMPLE_STEPS - 1));
      assert.equal(await page.getAttribute(table, "data-step"), String(SAMPLE_STEPS - 1));
      // Global and per-rank rows are in groups of their own, each labelled.
      const groups = async (): Promise<string[]> =>
        (await page.$$eval(`${table} tbody tr.group-head`, (r) => r.map((x) => x.textContent ?? ""))).map((g) =>
          g.replace(/ \(.*?\)/, "").replace(/\s*·.*$/, ""),
        );
      assert.deepEqual(await groups(), ["all ranks", "rank 0"]);
      // Bounded: at most a page of rows, with the total said.
      const rows = await page.locator(`${table} tbody tr.sample`).count();
      assert.ok(rows <= 25, `${rows} rows on a page`);
      assert.match(await page.innerText('.samples-pager[data-key="rollouts"]'), /of 40/);
      // Numbers are short; the full value is in the title.
      const rewards = await page.$$eval(`${table} td.num[data-field="reward"]`, (c) =>
        c.map((x) => [x.textContent ?? "", x.getAttribute("title") ?? ""]),
      );
      for (const [text = "", title = ""] of rewards) {
        assert.ok(
          text.replace(/^[-0.]+/, "").replace(/[^0-9]/g, "").length <= 6,
          `a reward reads ${text}: more than 6 significant digits`,
        );
        assert.ok(Math.abs(Number(text) - Number(title)) < 1e-4, `${text} stands for ${title}`);
      }
      // Best and worst reward of each group are marked.
      const marked = await page.$$eval(`${table} tbody tr.sample`, (r) =>
        r
          .filter((x) => x.classList.contains("best") || x.classList.contains("worst"))
          .map((x) => [x.className, x.getAttribute("data-group")]),
      );
      const expectBest = Math.max(...Array.from({ length: 10 }, (_, i) => rewardOf(SAMPLE_STEPS - 1, i, GLOBAL_RANK)));
      const best = await page.$eval(`${table} tbody tr.sample.best[data-group="-1"] td[data-field="reward"]`, (c) =>
        Number(c.getAttribute("title")),
      );
      assert.equal(best, expectBest);
      assert.ok(marked.length >= 2, JSON.stringify(marked));
      await shot(page, "faithful-samples.png");
      await page.click('.samples-pager[data-key="rollouts"] button.next');
      await page.waitForFunction(() =>
        /rows 26–40 of 40/.test(document.querySelector(".samples-pager")?.textContent ?? ""),
      );
      assert.deepEqual(await groups(), ["rank 1"], "the next page goes on with rank 1's group, labelled");
      // The slider moves to another step; the next page shows the next rows.
      await page.fill(slider, "3");
      await page.waitForSelector(`${table}[data-step="3"]`);
      assert.match(await page.innerText(`${table} tbody`), /question 3\.0/);
      await page.click('.samples-pager[data-key="rollouts"] button.next');
      await page.waitForFunction(() =>
        /question 3\.1[0-4]/.test(document.querySelector("table.samples tbody")?.textContent ?? ""),
      );
    });
  });

  describe("item 13: colours, legends, tooltips", () => {
    it("keeps a run's colour when a new run appears", async () => {
      await open("run=sweep/b&run=sweep/c&tab=metrics");
      await page.waitForSelector(`${card("loss")}[data-drawn]`);
      const colours = async (): Promise<Record<string, string>> =>
        Object.fromEntries(
          await page.$$eval("#runs tr[data-run] .run-swatch", (s) =>
            s.map((x) => [x.closest("tr")?.getAttribute("data-run") ?? "", getComputedStyle(x).backgroundColor]),
          ),
        );
      const beforeNew = await colours();
      // A run whose name sorts before every other one.
      writeRun(root, "aaa", "new", 10, { loss: (s) => s });
      // Once the dashboard's index has it (a /api/runs starts a pass), so the reload's list holds it
      // rather than the page's next 5 s refresh.
      await waitFor(
        async () => {
          const answer = await page.request.get(`${dashboard.url}api/runs`);
          return (await answer.text()).includes('"id":"aaa/new"');
        },
        { timeoutMs: 60_000, what: "the dashboard's index to list aaa/new", intervalMs: 200 },
      );
      await open("run=sweep/b&run=sweep/c&tab=metrics");
      await page.waitForSelector('#runs tr[data-run="aaa/new"]');
      const afterNew = await colours();
      for (const [run, colour] of Object.entries(beforeNew))
        assert.equal(afterNew[run], colour, `${run} kept its colour`);
    });

    it("draws rank lines in colours no run has, with a legend of 12 lines all reachable and a tooltip with the whole time", async () => {
      await open("run=rl/job&tab=metrics&smooth=0");
      const loss = card("loss");
      await page.waitForSelector(`${loss}[data-drawn]`);
      assert.equal(await page.getAttribute(loss, "data-lines"), String(RANKS + 1));
      const swatches = await page.$$eval(`${loss} .legend-item .swatch`, (s) =>
        s.map((x) => getComputedStyle(x).backgroundColor),
      );
      const rgb = (hex: string): string =>
        `rgb(${parseInt(hex.slice(1, 3), 16)}, ${parseInt(hex.slice(3, 5), 16)}, ${parseInt(hex.slice(5, 7), 16)})`;
      const runColours = new Set(RUN_PALETTE.map(rgb));
      const rankColours = swatches.slice(1);
      for (const c of rankColours) assert.ok(!runColours.has(c), `rank line colour ${c} is a run's colour`);
      assert.equal(new Set(rankColours).size, rankColours.length, "each rank has its own colour");
      // Every legend entry can be seen: a legend with more rows than it shows offers the rest, and no label is cut.
      const legendState = (): Promise<{ hidden: number; cut: number }> =>
        page.$eval(`${loss} .legend`, (l) => {
          const box = l.getBoundingClientRect();
          const items = [...l.querySelectorAll(".legend-item")];
          return {
            hidden: items.filter((i) => {
              const r = i.getBoundingClientRect();
              return r.top < box.top - 1 || r.bottom > box.bottom + 1 || r.right > box.right + 1;
            }).length,
            cut: items.filter((i) => i.scrollWidth > i.clientWidth + 1).length,
          };
        });
      // The legend measures itself on the next frame.
      await page.waitForFunction(
        (sel) => document.querySelector(sel)?.textContent?.startsWith("all ") === true,
        `${loss} button.legend-more`,
      );
      const folded = await legendState();
      assert.equal(folded.cut, 0, "no legend label is cut");
      if (folded.hidden > 0) {
        const more = page.locator(`${loss} button.legend-more`);
        assert.ok(await more.isVisible(), `${folded.hidden} legend entries are out of sight with no way to show them`);
        assert.match(await more.innerText(), new RegExp(`all ${RANKS + 1} lines`));
        await more.click();
        assert.deepEqual(await legendState(), { hidden: 0, cut: 0 }, "the expanded legend shows every entry");
      }
      await shot(page, "faithful-legend-12.png", loss);
      // The tooltip: the point's date and time in full, and no row cut.
      const box = await page.locator(`${loss} .u-over`).boundingBox();
      assert.ok(box !== null);
      await page.mouse.move(box.x + box.width * 0.8, box.y + box.height / 2);
      const tip = page.locator(`${loss} .tooltip`);
      await tip.waitFor({ state: "visible" });
      assert.match(await tip.innerText(), /\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}/);
      const cutRows = await page.$$eval(
        `${loss} .tooltip .tip-row, ${loss} .tooltip .tip-head`,
        (r) => r.filter((x) => x.scrollWidth > x.clientWidth + 1).length,
      );
      assert.equal(cutRows, 0, "no tooltip row is cut");
      const inside = await page.$eval(loss, (c) => {
        const t = c.querySelector(".tooltip")?.getBoundingClientRect();
        const b = c.getBoundingClientRect();
        return t !== undefined && t.left >= b.left - 1 && t.right <= b.right + 1;
      });
      assert.ok(inside, "the tooltip stays inside its card");
      await shot(page, "faithful-tooltip.png", loss);
      await page.mouse.move(0, 0);
    });
  });

  describe("item 14: runs table", () => {
    it("shows the summary columns a user watches first, and remembers the user's choice", async () => {
      await open("tab=runs&run=wide/keys");
      await page.waitForSelector("table.runs-table");
      const summary = await page.$$eval("table.runs-table th.summary button", (b) =>
        b.map((x) => x.getAttribute("data-col") ?? ""),
      );
      assert.deepEqual(
        summary.slice(0, 4),
        ["s:loss", "s:train/loss", "s:reward", "s:eval/accuracy"],
        JSON.stringify(summary),
      );
      assert.ok(summary.length <= 16);
      // The chooser: drop reward, add a/metric_19; a reload keeps the choice.
      await page.click("#summary-columns > summary");
      await page.uncheck('#summary-columns input[value="reward"]');
      await page.check('#summary-columns input[value="a/metric_19"]');
      await page.waitForSelector('table.runs-table th.summary button[data-col="s:a/metric_19"]');
      assert.equal(await page.locator('table.runs-table button[data-col="s:reward"]').count(), 0);
      await shot(page, "faithful-runs-columns.png");
      await open("tab=runs");
      await page.waitForSelector('table.runs-table th.summary button[data-col="s:a/metric_19"]');
      assert.equal(
        await page.locator('table.runs-table button[data-col="s:reward"]').count(),
        0,
        "the choice was remembered",
      );
      await page.click("#summary-columns > summary");
      await page.click("#summary-columns button.reset-columns");
      await page.waitForSelector('table.runs-table button[data-col="s:reward"]');
    });

    it("names a hyperparameter one way, whether it came from the run config or the facade's logHyperparams", async () => {
      await open("tab=runs&run=facade/run");
      await page.waitForSelector('table.runs-table tr[data-run="facade/run"]');
      const params = await page.$$eval("table.runs-table th.param button", (b) =>
        b.map((x) => x.getAttribute("data-col") ?? "").filter((c) => /model|seed|lr/.test(c)),
      );
      assert.deepEqual(params.sort(), ["p:lr", "p:model.layers", "p:model.width", "p:seed"]);
      const cells = await page.$$eval('table.runs-table tr[data-run="facade/run"] td', (c) =>
        c.map((x) => x.textContent),
      );
      assert.ok(cells.includes("8") && cells.includes("4"), JSON.stringify(cells));
    });
  });

  describe("item 16: text logs", () => {
    it("shows the tail of merged.log, pages back by byte offset, filters by level and component, and follows new lines", async () => {
      apiAnswers.length = 0;
      await open("run=rl/job&tab=logs");
      await page.waitForSelector("#log-lines .log-line");
      assert.deepEqual(await page.$$eval("#log-file option", (o) => o.map((x) => x.textContent)), [
        "merged.log",
        "main.log",
      ]);
      const last = await page.$eval("#log-lines .log-line:last-child", (l) => l.textContent ?? "");
      assert.match(last, /at step \(train\.ts:2999:1\)/, "the file's last line");
      assert.match(await page.innerText("#log-lines"), /line 2999 step=2999/);
      const text = await page.innerText("#log-lines");
      assert.ok(!text.includes("\u001b") && !/\[3[13]m/.test(text), "colour codes are not shown as text");
      // Every answer was bounded: the file is read a window at a time.
      const logReads = apiAnswers.filter((a) => a.url.includes("/api/log?"));
      assert.ok(logReads.length > 0 && logReads.every((a) => a.bytes < 400_000), JSON.stringify(logReads));
      // Errors keep their stack lines and are marked by level; the rank name is shown.
      const error = page.locator("#log-lines .log-line.level-error:not(.cont)").last();
      assert.match(await error.innerText(), /line 2999|line 2949/);
      assert.match(await page.innerText("#log-lines"), /at step \(train\.ts:2949:1\)/);
      // Older lines, by byte offset.
      const shown = await page.locator("#log-lines .log-line").count();
      await page.click("#log-older");
      await page.waitForFunction((n) => document.querySelectorAll("#log-lines .log-line").length > n, shown);
      // Filters: warnings and worse, then one component.
      await page.selectOption("#log-level", "warning");
      await page.waitForFunction(
        () =>
          [...document.querySelectorAll("#log-lines .log-line")].every((l) =>
            /level-(warning|error)/.test(l.className),
          ) && document.querySelectorAll("#log-lines .log-line").length > 0,
      );
      await page.selectOption("#log-component", "Scheduler");
      await page.waitForFunction(
        () =>
          [...document.querySelectorAll("#log-lines .log-line")].every(
            (l) => l.getAttribute("data-component") === "Scheduler",
          ) && document.querySelectorAll("#log-lines .log-line").length > 0,
      );
      assert.match(page.url(), /level=warning/);
      await shot(page, "faithful-logs-filtered.png");
      // Follow: new lines appear without a reload.
      await page.selectOption("#log-component", "");
      await page.selectOption("#log-level", "");
      await page.check("#log-follow");
      appendFileSync(
        join(rlDir, "logs", "merged.log"),
        `${"[Trainer_0_r1]".padEnd(16)} 20261122-02:00:00.000 Trainer INFO: appended while following\n`,
      );
      await page.waitForFunction(
        () => /appended while following/.test(document.querySelector("#log-lines")?.textContent ?? ""),
        undefined,
        { timeout: PAGE_WAIT_MS },
      );
      await shot(page, "faithful-logs.png");
      await page.uncheck("#log-follow");
    });
  });

  it("logged no errors in the page", () => {
    assert.deepEqual(errors, []);
  });
});
