/**
 * The Inference tab at one flush (issue 40 item 5) in Debian's Chromium, over a store written by a
 * real run of the inference API: four model-server replicas (child processes,
 * test/fixtures/replica-server.ts) serving two models, one of them (rank 2) prefilling twelve times
 * slower; the controller's store holds the reduced lines and a `per_rank_reduce` store each
 * replica's own. For each model the slowest replicas name rank 2 first, marked as standing out,
 * with its own p50 TTFT from the store against the median replica's; nobody else is marked. The
 * TTFT and TPOT distributions at a step picked with the step chooser, then with a click on a
 * chart, are the store's histograms of that flush, and the picked flush is kept in the address:
 * a reload, and the address opened in another page, show it again. Served by `rankscope ui` and by a team server
 * the run was synced to. Screenshots go to test-artifacts/.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import { attributedKey, withSuffix } from "../../../src/core/attributes.js";
import { medianOfFinite } from "../../../src/core/stands-out.js";
import { closeStores, histograms, series } from "../../../src/store/reader.js";
import { GLOBAL_RANK } from "../../../src/store/read-types.js";
import { spawnRanks } from "../../../src/transport/controller/launcher.js";
import { collectDiagnostics, tempDir } from "../../helpers.js";
import { runLogger } from "../../inference/support.js";
import { dashboardInChromium, ensureWebBuilt, shot, SOURCES } from "./support.js";
import { PAGE_WAIT_MS } from "../browser.js";

const REPLICA = new URL("../../fixtures/replica-server.ts", import.meta.url);
const MODELS = ["llama-3.1-70b", "llama-3.1-8b"];
const REPLICAS = 4;
const SLOW_RANK = 2;
/**
 * How many times longer rank 2 prefills. The others' TTFT is timer sleeps too: at load 20 their
 * p50 spread enough that 4× no longer stood out by the rule (its bar grows with the spread), so
 * the slow replica is far slower than any load makes the others.
 */
const SLOWDOWN = 12;
const STEPS = 4;
const RUN = "serve/replicas";
const TTFT = "gen_ai.server.time_to_first_token";
const TPOT = "gen_ai.server.time_per_output_token";

/** An instrument's key of `model` (with an output suffix when given). */
function keyOf(name: string, model: string, suffix?: string): string {
  const key = attributedKey(name, {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "rankscope-sim",
    "gen_ai.request.model": model,
  });
  return suffix === undefined ? key : withSuffix(key, suffix);
}

/** The job: four replicas, rank 2 twelve times slower to prefill, 8 requests of each model per replica and flush; a reduced and a per-rank store (run `RUN` under `root`). */
async function serveWithASlowReplica(root: string): Promise<void> {
  await collectDiagnostics(async () => {
    const { logger } = await runLogger(root, "serve", "replicas", "Controller", {
      store: { loggingMode: "global_reduce", waitForWrites: true },
      replicas: { type: "store", loggingMode: "per_rank_reduce", waitForWrites: true, deadlineMs: 30_000 },
    });
    const servers = await spawnRanks({ module: REPLICA, replicas: REPLICAS, processName: "ModelServer", logger });
    for (let step = 0; step < STEPS; step++) {
      await servers.fanout("serve", 8, SLOW_RANK, SLOWDOWN);
      await logger.flush(step);
    }
    await logger.shutdown();
  });
}

/** A line's value at a step in the store. */
function storedAt(runDir: string, key: string, rank: number, step: number): number | undefined {
  return series(runDir, key, { rank }).points.find((p) => p.step === step)?.value;
}

const atCard = (model: string, measure: string): string =>
  `.inference-at-card[data-model=${JSON.stringify(model)}][data-measure=${JSON.stringify(measure)}]`;

/** A card's data attribute once it reads `step`. */
async function cardAt(page: Page, selector: string, step: number): Promise<void> {
  await page.waitForSelector(`${selector}[data-step="${step}"]`, { state: "attached", timeout: PAGE_WAIT_MS });
}

describe("the Inference tab at one flush: slowest replicas and distributions", () => {
  let root: string;
  let runDir: string;

  before(async () => {
    ensureWebBuilt();
    root = tempDir("rankscope-ui-inference-at-");
    runDir = join(root, "serve", "replicas");
    await serveWithASlowReplica(root);
  });

  after(() => {
    closeStores();
    rmSync(root, { recursive: true, force: true });
  });

  for (const [name, serve, skip] of SOURCES)
    describe(name, { skip }, () => {
      const ui = dashboardInChromium(serve, () => root, { viewport: { width: 1400, height: 1000 } });
      const suffix = name === "local root" ? "" : "-server";

      it("names the slow replica first, standing out, with the store's p50 TTFT against the median replica's", async () => {
        await ui.page.goto(`${ui.dashboard.url}#run=${RUN}&tab=inference&smooth=0`);
        await ui.page.reload();
        const last = STEPS - 1;
        for (const model of MODELS) {
          const card = atCard(model, "slowest replicas");
          await cardAt(ui.page, card, last);
          await ui.page.waitForSelector(`${card} tr[data-rank]`, { state: "attached", timeout: PAGE_WAIT_MS });
          const rows = await ui.page.$$eval(`${card} tr[data-rank]`, (trs) =>
            trs.map((tr) => [
              tr.getAttribute("data-rank"),
              tr.getAttribute("data-value"),
              tr.getAttribute("data-stands-out"),
            ]),
          );
          const p50 = keyOf(TTFT, model, "p50");
          const perRank = Array.from({ length: REPLICAS }, (_, rank) => storedAt(runDir, p50, rank, last) ?? NaN);
          assert.ok(
            perRank.every((v) => Number.isFinite(v)),
            `${model}: each replica's own p50 TTFT is in the store`,
          );
          assert.equal(rows.length, 3, "the three slowest replicas");
          assert.deepEqual(rows[0], [String(SLOW_RANK), String(perRank[SLOW_RANK]), "1"], `${model}: rank 2 first`);
          assert.deepEqual(
            rows.slice(1).map((r) => r[2]),
            ["0", "0"],
            `${model}: no other replica stands out`,
          );
          const shown = rows.map((r) => Number(r[1]));
          assert.deepEqual(
            shown,
            [...shown].sort((a, b) => b - a),
            "slowest first",
          );
          for (const [rank, value] of rows) assert.equal(Number(value), perRank[Number(rank)], `rank ${rank}`);
          assert.equal(Number(await ui.page.getAttribute(card, "data-median")), medianOfFinite(perRank));
          assert.match(
            (await ui.page.textContent(`${card} tr.stands-out`)) ?? "",
            /ModelServer_.*_r0.*ms.*×.*stands out|chronic/,
          );
        }
        assert.deepEqual(ui.errors, []);
      });

      it("shows the TTFT and TPOT histograms of the flush picked with the chooser or a click on a chart, and again from its address", async () => {
        await ui.page.goto(`${ui.dashboard.url}#run=${RUN}&tab=inference&smooth=0`);
        await ui.page.reload();
        const model = "llama-3.1-8b";
        const ttft = atCard(model, "TTFT distribution");
        const tpot = atCard(model, "TPOT distribution");
        await cardAt(ui.page, ttft, STEPS - 1);
        const storedCounts = (key: string, step: number): readonly number[] | undefined =>
          histograms(runDir, key).find((h) => h.rank === GLOBAL_RANK && h.step === step)?.histogram.bucketCounts;
        const drawnCounts = async (selector: string, on = ui.page): Promise<unknown> =>
          JSON.parse((await on.getAttribute(selector, "data-counts")) ?? "null");
        const stepInAddress = (on: Page): string | null =>
          new URLSearchParams(new URL(on.url()).hash.slice(1)).get("step");
        /** Every panel of the model at `step`, the distributions the store's of that flush, the chooser on it. */
        const expectFlush = async (on: Page, step: number): Promise<void> => {
          for (const [selector, key] of [
            [ttft, keyOf(TTFT, model)],
            [tpot, keyOf(TPOT, model)],
          ] as const) {
            await cardAt(on, selector, step);
            assert.deepEqual(await drawnCounts(selector, on), storedCounts(key, step), `${key} at step ${step}`);
          }
          await cardAt(on, atCard(model, "slowest replicas"), step);
          await cardAt(on, atCard("llama-3.1-70b", "TTFT distribution"), step);
          assert.equal(await on.inputValue("#inference-step"), String(step));
        };
        // The chooser: step 1.
        await ui.page.selectOption("#inference-step", "1");
        for (const [selector, key] of [
          [ttft, keyOf(TTFT, model)],
          [tpot, keyOf(TPOT, model)],
        ] as const) {
          await cardAt(ui.page, selector, 1);
          const want = storedCounts(key, 1);
          assert.equal(
            want?.reduce((a, b) => a + b, 0),
            REPLICAS * 8,
            `${key}: every request of the flush`,
          );
          assert.deepEqual(await drawnCounts(selector), want, `${key} at step 1`);
        }
        await cardAt(ui.page, atCard(model, "slowest replicas"), 1);
        // The picked flush is in the address: a reload shows step 1 again, not the newest.
        assert.equal(stepInAddress(ui.page), "1");
        await ui.page.reload();
        await expectFlush(ui.page, 1);
        // A click on the TTFT chart's first point: step 0, for every panel.
        const chart = `.chart[data-model="${model}"][data-measure="time to first token"]`;
        await ui.page.locator(chart).scrollIntoViewIfNeeded();
        await ui.page.waitForSelector(`${chart}[data-drawn="1"]`, { timeout: PAGE_WAIT_MS });
        const over = ui.page.locator(`${chart} .u-over`);
        await over.hover({ position: { x: 2, y: 20 } });
        await over.click({ position: { x: 2, y: 20 } });
        await cardAt(ui.page, ttft, 0);
        await cardAt(ui.page, tpot, 0);
        await cardAt(ui.page, atCard("llama-3.1-70b", "slowest replicas"), 0);
        assert.equal(await ui.page.inputValue("#inference-step"), "0");
        assert.deepEqual(await drawnCounts(ttft), storedCounts(keyOf(TTFT, model), 0));
        await ui.page.locator(atCard(model, "slowest replicas")).scrollIntoViewIfNeeded();
        await shot(ui.page, `inference-at${suffix}.png`);
        // A link to the view, opened in another page, shows step 0 too.
        assert.equal(stepInAddress(ui.page), "0");
        const shared = await ui.launched.context.newPage();
        await shared.goto(ui.page.url());
        await expectFlush(shared, 0);
        await shared.close();
        assert.deepEqual(ui.errors, []);
      });

      it("hides the internal keys checkbox on the Inference tab, and shows it on Metrics", async () => {
        await ui.page.goto(`${ui.dashboard.url}#run=${RUN}&tab=inference`);
        await ui.page.reload();
        await ui.page.waitForSelector("#inference-step");
        assert.equal(await ui.page.isVisible("#show-internal"), false);
        await ui.page.click("#tab-metrics");
        await ui.page.waitForSelector("body[data-charts-rendered]", { timeout: PAGE_WAIT_MS });
        assert.equal(await ui.page.isVisible("#show-internal"), true);
      });
    });
});
