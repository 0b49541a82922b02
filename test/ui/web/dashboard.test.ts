/**
 * The dashboard's W&B/TensorBoard-level features in Debian's Chromium over real stores: sections,
 * regex search, pins, internal keys, lazy drawing, legend toggles, tooltip and synced cursor, any
 * metric as x, log x, zoom in the URL, CSV/PNG download, dark theme, NaN marks, histograms over
 * time, the runs table with parallel coordinates, narrow layouts, keyboard use and contrast,
 * and a live line that stays bounded — served by `rankscope ui` over the root and by a team server
 * the root's runs were synced to (over a real PostgreSQL). Screenshots go to test-artifacts/.
 */
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import type { StoreWriter } from "../../../src/store/writer.js";
import { LIVE_POINT_CAP } from "../../../src/ui/web/thin.js";
import { tempDir } from "../../helpers.js";
import type { LaunchedBrowser } from "../browser.js";
import { openRun, seedFinishedRun } from "../seed.js";
import {
  canvasOf,
  card,
  ensureWebBuilt,
  openPage,
  pixelsNear,
  shot,
  SOURCES,
  tableRuns,
  waitForTableRuns,
  writeRun,
  type Served,
} from "./support.js";
import { PAGE_WAIT_MS } from "../browser.js";

const LAZY_KEYS = 120;

for (const [name, serve, skip] of SOURCES)
  describe(`dashboard features in Chromium: ${name}`, { skip }, () => {
    let root: string;
    let dashboard: Served;
    let launched: LaunchedBrowser;
    let page: Page;
    let live: StoreWriter;
    const errors: string[] = [];

    const open = async (hash: string): Promise<void> => {
      await page.goto(`${dashboard.url}#${hash}`);
      await page.reload();
    };
    const grid = (): Promise<unknown> => page.waitForSelector("body[data-charts-rendered]", { timeout: PAGE_WAIT_MS });
    /** A screenshot's file name: the team server's get `-server`. */
    const named = (base: string): string => `${base}${name === "local root" ? "" : "-server"}.png`;

    before(async () => {
      ensureWebBuilt();
      root = tempDir("rankscope-ui-web-");
      seedFinishedRun(root);
      // A run with sections, internal keys, a NaN and ±Inf, and a tokens counter to use as x.
      writeRun(root, "exp", "sections", 200, {
        "train/loss": (s) => (s === 50 ? NaN : s === 120 ? Infinity : 2 * Math.exp(-s / 50) + 0.1),
        "train/acc": (s) => 1 - Math.exp(-s / 40),
        "eval/loss": (s) => 2.2 * Math.exp(-s / 60) + 0.2,
        tokens_seen: (s) => (s + 1) * 4096,
        loss__count: () => 4,
        "rankscope/ranks_alive": () => 2,
      });
      // Runs for the table: differing hyperparameters.
      for (const [i, lr] of [0.1, 0.01, 0.001].entries()) {
        writeRun(
          root,
          "sweep",
          `lr${i}`,
          60,
          { "train/loss": (s) => lr * 10 + Math.exp(-s / 20), "train/acc": (s) => 1 - lr - Math.exp(-s / 15) / 2 },
          { lr, batch: 32 * (i + 1), optimizer: i === 2 ? "sgd" : "adam" },
        );
      }
      // Many keys: only those on screen may load and draw.
      const many: Record<string, (s: number) => number> = {};
      for (let k = 0; k < LAZY_KEYS; k++)
        many[`group${k % 6}/metric_${String(k).padStart(3, "0")}`] = (s) => Math.sin(s / 10 + k);
      writeRun(root, "exp", "many", 100, many);
      live = openRun(root, "exp", "stream");
      dashboard = await serve(root);
      ({ launched, page } = await openPage(errors));
    });

    after(async () => {
      await launched?.close();
      await dashboard?.close();
      live?.close();
      rmSync(root, { recursive: true, force: true });
    });

    it("groups charts in collapsible sections by prefix and hides internal keys until asked", async () => {
      await open("run=exp/sections&tab=metrics");
      await grid();
      const sections = await page.$$eval("details.section", (d) => d.map((x) => x.getAttribute("data-section")));
      assert.deepEqual(sections, ["", "eval", "train"]);
      const keys = await page.$$eval(".chart", (c) => c.map((x) => x.getAttribute("data-key")).sort());
      assert.deepEqual(keys, ["eval/loss", "tokens_seen", "train/acc", "train/loss"]);
      assert.match(await page.innerText("#internal-note"), /2 hidden/);
      await page.check("#show-internal");
      await page.waitForSelector(card("loss__count"));
      assert.ok(await page.locator(card("rankscope/ranks_alive")).count());
      assert.match(page.url(), /internal=1/);
      await page.uncheck("#show-internal");
      await page.waitForFunction(() => document.querySelectorAll(".chart").length === 4);
      // Folding a section hides its charts and goes into the URL.
      await page.click('details[data-section="train"] > summary');
      assert.equal(await page.locator(`${card("train/loss")}`).isVisible(), false);
      await page.waitForFunction(() => location.hash.includes("fold=train"));
      await page.click('details[data-section="train"] > summary');
    });

    it("searches keys by regular expression and says when the pattern is invalid", async () => {
      await page.fill("#key-search", "^(train|eval)/loss$");
      await page.waitForFunction(() => document.querySelectorAll(".chart").length === 2);
      assert.deepEqual(await page.$$eval(".chart", (c) => c.map((x) => x.getAttribute("data-key")).sort()), [
        "eval/loss",
        "train/loss",
      ]);
      await page.fill("#key-search", "train/(");
      await page.waitForSelector("#key-search.invalid");
      await page.fill("#key-search", "");
      await page.waitForFunction(() => document.querySelectorAll(".chart").length === 4);
    });

    it("pins a chart to a Pinned section at the top, kept in the URL", async () => {
      await page.click(`${card("train/acc")} button.pin`);
      await page.waitForSelector('details[data-section="pinned"] .chart[data-key="train/acc"]');
      assert.equal(await page.$eval("details.section", (d) => d.getAttribute("data-section")), "pinned");
      assert.match(decodeURIComponent(page.url()), /pin=train\/acc/);
      await page.click(`${card("train/acc")} button.pin`);
      await page.waitForFunction(() => document.querySelector('details[data-section="pinned"]') === null);
    });

    it("marks NaN and ±Inf points in red and breaks the line there", async () => {
      await page.waitForSelector(`${card("train/loss")}[data-drawn]`);
      assert.equal(await page.getAttribute(card("train/loss"), "data-nonfinite"), "2");
      assert.ok((await pixelsNear(page, "train/loss", [220, 38, 38])) > 50, "red NaN/Inf marks are drawn");
      assert.equal(await pixelsNear(page, "eval/loss", [220, 38, 38]), 0, "a finite line has none");
      await shot(page, named("dashboard-nan-marks"), card("train/loss"));
    });

    it("hides a line on legend click and isolates it on shift-click", async () => {
      await open("run=exp/base&tab=metrics");
      await grid();
      const loss = card("loss");
      const before = await canvasOf(page, "loss");
      await page.click(`${loss} .legend-item >> nth=1`);
      await page.waitForSelector(`${loss}[data-hidden="1"]`);
      assert.notEqual(await canvasOf(page, "loss"), before);
      assert.equal(await page.getAttribute(`${loss} .legend-item >> nth=1`, "aria-pressed"), "false");
      await page.click(`${loss} .legend-item >> nth=1`);
      await page.waitForSelector(`${loss}[data-hidden="0"]`);
      await page.click(`${loss} .legend-item >> nth=0`, { modifiers: ["Shift"] });
      await page.waitForSelector(`${loss}[data-hidden="2"]`);
      await page.click(`${loss} .legend-item >> nth=0`, { modifiers: ["Shift"] });
      await page.waitForSelector(`${loss}[data-hidden="0"]`);
    });

    it("shows a tooltip with step, raw and smoothed value and time, and moves the cursor on every chart", async () => {
      const box = await page.locator(`${card("loss")} .u-over`).boundingBox();
      assert.ok(box !== null);
      await page.mouse.move(box.x + box.width * 0.5, box.y + box.height / 2);
      const tip = page.locator(`${card("loss")} .tooltip`);
      await tip.waitFor({ state: "visible" });
      const text = await tip.innerText();
      assert.match(
        text,
        /^step \d+ · \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\n/,
        "the step and the point's date and time, in full",
      );
      assert.match(text, / [\d.]+ \(smoothed [\d.]+\)/);
      // The other chart's cursor line moved to the same x.
      const left = await page.$eval(`${card("lr")} .u-cursor-x`, (n) => (n as HTMLElement).style.transform);
      assert.match(left, /translate/);
      assert.doesNotMatch(left, /translate\(-10px/);
      await shot(page, named("dashboard-tooltip"), card("loss"));
      await page.mouse.move(0, 0);
    });

    it("draws any metric as the x-axis (joined by step) and a log x-axis", async () => {
      await open("run=exp/sections&tab=metrics");
      await grid();
      await page.selectOption("#x-mode", "metric:tokens_seen");
      await page.waitForSelector(`${card("train/acc")}[data-x-mode="metric"][data-drawn]`);
      const [min, max] = ((await page.getAttribute(card("train/acc"), "data-x-range")) ?? "").split(",").map(Number);
      assert.ok(
        min !== undefined && max !== undefined && min >= 4096 * 0.5 && max >= 4096 * 190,
        `x runs over tokens seen: ${min}..${max}`,
      );
      assert.match(decodeURIComponent(page.url()), /x=metric:tokens_seen/);
      await page.check("#log-x");
      await page.waitForSelector(`${card("train/acc")}[data-log-x="1"][data-drawn]`);
      assert.match(page.url(), /logx=1/);
      await shot(page, named("dashboard-x-by-tokens-log"));
      await page.uncheck("#log-x");
      await page.selectOption("#x-mode", "step");
      await page.waitForSelector(`${card("train/acc")}[data-x-mode="step"][data-drawn]`);
    });

    it("draws the wall-time axis with its date row inside the chart, clear of the legend", async () => {
      await page.selectOption("#x-mode", "wall");
      const acc = card("train/acc");
      await page.waitForSelector(`${acc}[data-x-mode="wall"][data-drawn]`);
      // The date row is the lowest text on the canvas. It must be drawn whole: ink just above the
      // bottom edge and none on the last pixel rows (a row cut by the canvas edge inks them).
      const [textInk, edgeInk] = await page.$eval(`${acc} canvas`, (c) => {
        const canvas = c as HTMLCanvasElement;
        const ctx = canvas.getContext("2d");
        const ink = (from: number, rows: number): number => {
          const data = ctx?.getImageData(0, from, canvas.width, rows).data ?? new Uint8ClampedArray();
          let n = 0;
          for (let i = 3; i < data.length; i += 4) if ((data[i] ?? 0) > 60) n++;
          return n;
        };
        const edge = Math.max(1, Math.round(2 * devicePixelRatio));
        return [
          ink(canvas.height - Math.round(20 * devicePixelRatio), Math.round(20 * devicePixelRatio) - edge),
          ink(canvas.height - edge, edge),
        ];
      });
      assert.ok(textInk > 20, `the date row is drawn (${textInk} inked pixels)`);
      assert.equal(edgeInk, 0, "the date row is not cut by the chart's bottom edge");
      const canvasBox = await page.locator(`${acc} canvas`).boundingBox();
      const legendBox = await page.locator(`${acc} .legend`).boundingBox();
      assert.ok(
        canvasBox !== null && legendBox !== null && canvasBox.y + canvasBox.height <= legendBox.y + 1,
        "the legend starts below the axis",
      );
      await shot(page, named("dashboard-wall-axis"), acc);
      await page.selectOption("#x-mode", "step");
      await page.waitForSelector(`${acc}[data-x-mode="step"][data-drawn]`);
    });

    it("keeps the whole view in the URL: a copied link opens the same view", async () => {
      await open("run=sweep/lr0&run=sweep/lr1&tab=metrics&smooth=0.3&logy=1&q=acc&zoom=10,40&theme=dark");
      await grid();
      const acc = card("train/acc");
      await page.waitForSelector(`${acc}[data-drawn]`);
      assert.equal(await page.inputValue("#smoothing"), "0.3");
      assert.equal(await page.isChecked("#log-scale"), true);
      assert.equal(await page.inputValue("#key-search"), "acc");
      assert.equal(await page.locator(".chart").count(), 1);
      assert.equal(await page.getAttribute(acc, "data-x-range"), "10,40");
      assert.equal(await page.getAttribute("html", "data-theme"), "dark");
      assert.equal(await page.getAttribute(acc, "data-lines"), "2");
      // Dragging a zoom rewrites the URL; the reset button clears it.
      const box = await page.locator(`${acc} .u-over`).boundingBox();
      assert.ok(box !== null);
      await page.mouse.move(box.x + box.width * 0.2, box.y + 20);
      await page.mouse.down();
      await page.mouse.move(box.x + box.width * 0.6, box.y + 20, { steps: 4 });
      await page.mouse.up();
      await page.waitForFunction(() => !location.hash.includes("zoom=10%2C40") && location.hash.includes("zoom="));
      await page.click("#reset-zoom");
      await page.waitForFunction(() => !location.hash.includes("zoom="));
      await shot(page, named("dashboard-dark"));
    });

    it("gives each run one colour in the runs list and in every chart", async () => {
      const listColours = await page.$$eval('#runs tr[data-run^="sweep/lr"] .run-swatch', (s) =>
        s.map((x) => getComputedStyle(x).backgroundColor),
      );
      const legend = await page.$$eval(`${card("train/acc")} .legend-item .swatch`, (s) =>
        s.map((x) => getComputedStyle(x).backgroundColor),
      );
      assert.equal(new Set(listColours).size, 3);
      for (const c of legend) assert.ok(listColours.includes(c), `${c} is a run's colour`);
    });

    it("downloads a chart as CSV and PNG", async () => {
      await open("run=exp/base&tab=metrics&smooth=0");
      await grid();
      const [csv] = await Promise.all([page.waitForEvent("download"), page.click(`${card("lr")} button.csv`)]);
      assert.equal(csv.suggestedFilename(), "lr.csv");
      const text = readFileSync((await csv.path()) ?? "", "utf8")
        .trim()
        .split("\n");
      assert.equal(text[0], "line,step,time_ms,value");
      assert.equal(text.length, 1 + 120);
      assert.match(text[1] ?? "", /^value,0,\d+,0\.00005$/);
      const [png] = await Promise.all([page.waitForEvent("download"), page.click(`${card("lr")} button.png`)]);
      assert.equal(png.suggestedFilename(), "lr.png");
      const bytes = readFileSync((await png.path()) ?? "");
      assert.deepEqual([...bytes.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
    });

    it("draws only the charts on screen, and the rest as they are scrolled to", async () => {
      await open("run=exp/many&tab=metrics");
      await grid();
      const total = await page.locator(".chart").count();
      assert.equal(total, LAZY_KEYS);
      const loaded = await page.locator('.chart[data-loaded="1"]').count();
      const canvases = await page.locator(".chart canvas").count();
      assert.ok(loaded > 0 && loaded < 40, `only cards near the screen loaded: ${loaded}`);
      assert.ok(canvases <= loaded, `only on-screen cards have a canvas: ${canvases}`);
      const last = card(`group5/metric_${String(LAZY_KEYS - 1).padStart(3, "0")}`);
      assert.equal(await page.getAttribute(last, "data-loaded"), null);
      await page.locator(last).scrollIntoViewIfNeeded();
      await page.waitForSelector(`${last}[data-drawn]`);
      assert.ok((await page.locator(".chart canvas").count()) < 40, "cards scrolled away dropped their canvas");
    });

    it("draws histograms over time as a heatmap", async () => {
      await open("run=exp/base&tab=histograms");
      const hist = card("grad/hist");
      await page.waitForSelector(`${hist}[data-mode="heatmap"]`);
      assert.equal(await page.getAttribute(hist, "data-columns"), "2");
      const inked = await page.$eval(`${hist} canvas.heatmap`, (c) => {
        const canvas = c as HTMLCanvasElement;
        const data =
          canvas.getContext("2d")?.getImageData(0, 0, canvas.width, canvas.height).data ?? new Uint8ClampedArray();
        let n = 0;
        for (let i = 3; i < data.length; i += 4) if ((data[i] ?? 0) > 0) n++;
        return n;
      });
      assert.ok(inked > 1000, `the heatmap has cells: ${inked}`);
      await page.selectOption(`${hist} select.hist-step`, { label: "step 3" });
      await page.waitForSelector(`${hist}[data-step="3"]`);
    });

    it("lists runs in a table with hyperparameter and summary columns, sorts, filters and plots parallel coordinates", async () => {
      await open("tab=runs&run=sweep/lr0");
      const table = page.locator("table.runs-table");
      await table.waitFor();
      // The table is drawn before the source's runs page answers (the team server's later than the local index's).
      await page.waitForFunction(
        () => Number(document.querySelector("table.runs-table")?.getAttribute("data-rows")) >= 7,
        undefined,
        { timeout: PAGE_WAIT_MS },
      );
      await page.fill("#table-filter", "lr<0.05 batch>=64");
      await page.waitForSelector('table.runs-table[data-rows="2"]');
      await page.waitForFunction(() => document.querySelectorAll("table.runs-table tbody tr[data-run]").length === 2);
      assert.deepEqual((await tableRuns(page)).sort(), ["sweep/lr1", "sweep/lr2"]);
      await page.fill("#table-filter", "optimizer=adam");
      await page.waitForSelector('table.runs-table[data-rows="2"]');
      await page.fill("#table-filter", "sweep");
      await page.waitForSelector('table.runs-table[data-rows="3"]');
      await page.click('button.sort[data-col="p:lr"]');
      await waitForTableRuns(page, ["sweep/lr2", "sweep/lr1", "sweep/lr0"]);
      await page.click('button.sort[data-col="p:lr"]');
      await waitForTableRuns(page, ["sweep/lr0", "sweep/lr1", "sweep/lr2"]);
      assert.match(page.url(), /sort=-p%3Alr|sort=-p:lr/);
      const coords = page.locator("svg.parcoords");
      await coords.waitFor();
      assert.equal(await page.locator("svg.parcoords polyline.pc-line").count(), 3);
      // Ticking a run in the table selects it for the charts.
      await page.check('table.runs-table tr[data-run="sweep/lr2"] input[type="checkbox"]');
      await page.waitForFunction(() => location.hash.includes("run=sweep%2Flr2"));
      await shot(page, named("dashboard-runs-table"));
    });

    it("has tabs with role=tab and aria-selected, run rows reachable by keyboard, and text contrast of at least 4.5:1", async () => {
      await open("run=exp/base&tab=metrics");
      await grid();
      assert.equal(await page.getAttribute("#tabs", "role"), "tablist");
      assert.deepEqual(await page.locator('#tabs [role="tab"]').allTextContents(), [
        "Metrics",
        "Runs table",
        "Streams",
        "System",
        "Histograms",
        "Samples",
        "Logs",
        "Ranks",
        "Alerts",
        "Config",
        "Traces",
      ]);
      assert.equal(await page.getAttribute('[data-tab="metrics"]', "aria-selected"), "true");
      assert.equal(await page.getAttribute('[data-tab="config"]', "aria-selected"), "false");
      await page.focus('[data-tab="metrics"]');
      await page.keyboard.press("ArrowRight");
      assert.equal(await page.getAttribute('[data-tab="runs"]', "aria-selected"), "true");
      await page.focus('#runs tr[data-run="sweep/lr1"]');
      await page.keyboard.press("Enter");
      await page.waitForFunction(() => location.hash.includes("run=sweep%2Flr1") && !location.hash.includes("run=exp"));
      await page.keyboard.press("ArrowDown");
      const next = await page.evaluate(() => document.activeElement?.getAttribute("data-run"));
      assert.ok(typeof next === "string" && next !== "sweep/lr1", `ArrowDown moved the focus to the next run: ${next}`);
      await page.keyboard.press("Space");
      await page.waitForFunction(
        (other) => new URLSearchParams(location.hash.slice(1)).getAll("run").join(" ") === `sweep/lr1 ${other}`,
        next,
      );
      for (const theme of ["light", "dark"]) {
        await page.evaluate((t) => (document.documentElement.dataset["theme"] = t), theme);
        const ratios = await page.evaluate(() => {
          const parse = (c: string): number[] => (c.match(/[\d.]+/g) ?? []).slice(0, 3).map(Number);
          const lum = (c: string): number => {
            const [r, g, b] = parse(c).map((v) => {
              const s = v / 255;
              return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
            });
            return 0.2126 * (r ?? 0) + 0.7152 * (g ?? 0) + 0.0722 * (b ?? 0);
          };
          const probe = document.createElement("span");
          document.body.appendChild(probe);
          const colour = (v: string): string => {
            probe.style.color = `var(${v})`;
            return getComputedStyle(probe).color;
          };
          const muted = colour("--muted");
          const out = ["--card", "--bg"].map((bg) => {
            const a = lum(muted);
            const b = lum(colour(bg));
            return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
          });
          probe.remove();
          return out;
        });
        for (const r of ratios) assert.ok(r >= 4.5, `${theme}: grey text contrast ${r.toFixed(2)}:1`);
      }
      await page.evaluate(() => (document.documentElement.dataset["theme"] = "light"));
    });

    it("lays out under 1000 px: the runs list above the charts, nothing wider than the window", async () => {
      const narrow = await launched.context.newPage();
      try {
        for (const width of [900, 420]) {
          await narrow.setViewportSize({ width, height: 900 });
          await narrow.goto(`${dashboard.url}#run=exp/sections&tab=metrics`);
          await narrow.waitForSelector("body[data-charts-rendered]", { timeout: PAGE_WAIT_MS });
          await narrow.waitForSelector("#runs tbody tr.run");
          // Both boxes from one frame: two separate reads could straddle a scroll or a late render.
          const [sidebarBottom, mainTop] = await narrow.evaluate(() => [
            document.querySelector("#sidebar")?.getBoundingClientRect().bottom ?? Number.NaN,
            document.querySelector("main")?.getBoundingClientRect().top ?? Number.NaN,
          ]);
          assert.ok(
            sidebarBottom <= mainTop + 1,
            `${width}px: the runs list (bottom ${sidebarBottom}) sits above the charts (top ${mainTop})`,
          );
          const [scroll, client] = await narrow.evaluate(() => [
            document.documentElement.scrollWidth,
            document.documentElement.clientWidth,
          ]);
          assert.ok(scroll <= client + 1, `${width}px: page is ${scroll}px wide in a ${client}px window`);
          const chartBox = await narrow.locator(".chart").first().boundingBox();
          assert.ok(chartBox !== null && chartBox.width <= width, `${width}px: a chart fits (${chartBox?.width})`);
          await narrow.screenshot({ path: `${(await import("./support.js")).artifacts}/dashboard-${width}px.png` });
        }
      } finally {
        await narrow.close();
      }
    });

    it("keeps a live line bounded: old points thinned past the cap, the newest kept raw", async () => {
      const t0 = Date.now() - 3_600_000;
      const write = (from: number, to: number): void => {
        const steps = Float64Array.from({ length: to - from }, (_, i) => from + i);
        live.writeSeries(
          "fast",
          steps,
          steps.map((s) => t0 + s * 100),
          steps.map((s) => Math.sin(s / 300) + (s === 1234 ? 50 : 0)),
        );
      };
      write(0, 300);
      await dashboard.wrote();
      await open("run=exp/stream&tab=metrics&smooth=0");
      await grid();
      const fast = card("fast");
      await page.waitForSelector(`${fast}[data-points="300"]`);
      let next = 300;
      const reached = (lastStep: number): Promise<unknown> =>
        page.waitForFunction(
          ([sel, want]) =>
            Number((document.querySelector(sel as string)?.getAttribute("data-x-range") ?? "").split(",")[1]) >=
            (want as number),
          [fast, lastStep],
          { timeout: PAGE_WAIT_MS },
        );
      let most = 0;
      // 12,000 more points in four polls of 3,000 (a poll a second): the line passes the cap and is
      // thinned twice (6,300 → ~3,000, then 9,000 → ~3,000).
      for (let round = 0; round < 4; round++) {
        write(next, next + 3000);
        await dashboard.wrote();
        next += 3000;
        // Each poll's points arrive and the chart's x-axis reaches the newest step.
        await reached(next - 1);
        most = Math.max(most, Number(await page.getAttribute(fast, "data-points")));
      }
      assert.ok(
        most <= LIVE_POINT_CAP,
        `the line held at most ${most} points (cap ${LIVE_POINT_CAP}) for ${next} written`,
      );
      const points = Number(await page.getAttribute(fast, "data-points"));
      assert.ok(points <= LIVE_POINT_CAP, `${points} points held for ${next} written`);
      assert.ok(points >= 1000, `the newest points stay: ${points}`);
      // The spike in the thinned part is still drawn: the y-axis reaches it.
      const csv = await Promise.all([page.waitForEvent("download"), page.click(`${fast} button.csv`)]);
      const values = readFileSync((await csv[0].path()) ?? "", "utf8")
        .trim()
        .split("\n")
        .slice(1)
        .map((l) => Number(l.split(",")[3]));
      assert.ok(
        values.some((v) => v > 40),
        "the spike at step 1234 survived thinning",
      );
    });

    it("logged no errors in the page", () => {
      assert.deepEqual(errors, []);
    });
  });
