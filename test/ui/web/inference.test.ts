/**
 * The Inference tab (issue 40 item 5) in Debian's Chromium, over a store written by a real run of
 * the inference API: two model-server replicas (child processes, examples/inference/model-server.ts)
 * serving two models, reduced by the controller into its store. The tab is offered for that run
 * and not for a training run; each model's latency cards draw p50/p90/p99 as three lines whose
 * values are the store's; the error rate is the store's errors / requests. Served by
 * `rankscope ui` and by a team server the run was synced to. Screenshots go to test-artifacts/.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { attributedKey, withSuffix } from "../../../src/core/attributes.js";
import { closeStores, series } from "../../../src/store/reader.js";
import { spawnRanks } from "../../../src/transport/controller/launcher.js";
import { collectDiagnostics, tempDir } from "../../helpers.js";
import { runLogger } from "../../inference/support.js";
import { csvOf, dashboardInChromium, ensureWebBuilt, shot, SOURCES, writeRun } from "./support.js";
import { PAGE_WAIT_MS } from "../browser.js";

const MODEL_SERVER = new URL("../../../examples/inference/model-server.ts", import.meta.url);
const MODELS = ["llama-3.1-70b", "llama-3.1-8b"];
const STEPS = 4;
const RUN = "serve/two-models";

/** An instrument's key of `model`, with an output suffix (`p99`, `total`). */
function keyOf(name: string, model: string, suffix: string): string {
  const attributes = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "rankscope-sim",
    "gen_ai.request.model": model,
  };
  return withSuffix(attributedKey(name, attributes), suffix);
}

/** The job: two replicas serving 8 requests of each model per flush, for STEPS flushes, into the controller's store (run `RUN` under `root`). */
async function serveTwoModels(root: string): Promise<void> {
  await collectDiagnostics(async () => {
    const store = { store: { loggingMode: "global_reduce", waitForWrites: true } } as const;
    const { logger } = await runLogger(root, "serve", "two-models", "Controller", store);
    const servers = await spawnRanks({ module: MODEL_SERVER, replicas: 2, processName: "ModelServer", logger });
    for (let step = 0; step < STEPS; step++) {
      await servers.fanout("serve", 8);
      await logger.flush(step);
    }
    await logger.shutdown();
  });
}

/** The store's values of a global key, by step. */
function stored(runDir: string, key: string): Map<number, number> {
  return new Map(series(runDir, key).points.map((p) => [p.step, p.value]));
}

const cardOf = (model: string, measure: string): string =>
  `.chart[data-model=${JSON.stringify(model)}][data-measure=${JSON.stringify(measure)}]`;

describe("the Inference tab, over a real run of the inference API", () => {
  let root: string;
  let runDir: string;

  before(async () => {
    ensureWebBuilt();
    root = tempDir("rankscope-ui-inference-");
    runDir = join(root, "serve", "two-models");
    await serveTwoModels(root);
    writeRun(root, "train", "plain", 20, { "train/loss": (s) => 1 / (s + 1) });
  });

  after(() => {
    closeStores();
    rmSync(root, { recursive: true, force: true });
  });

  for (const [name, serve, skip] of SOURCES)
    describe(name, { skip }, () => {
      const ui = dashboardInChromium(serve, () => root);
      const suffix = name === "local root" ? "" : "-server";

      it("offers the tab for a run with inference keys only", async () => {
        await ui.page.goto(`${ui.dashboard.url}#run=train/plain&tab=metrics`);
        await ui.page.waitForSelector("body[data-charts-rendered]", { timeout: PAGE_WAIT_MS });
        await ui.page.waitForSelector("#tab-metrics");
        assert.equal(await ui.page.locator("#tab-inference").count(), 0);
        await ui.page.goto(`${ui.dashboard.url}#run=${RUN}&tab=metrics`);
        await ui.page.reload();
        await ui.page.click("#tab-inference", { timeout: PAGE_WAIT_MS });
        await ui.page.waitForFunction(() => location.hash.includes("tab=inference"));
        // The view draws once the run's keys have arrived (after the hash changes: slower on a busy machine).
        await ui.page.waitForFunction(
          (n) => document.querySelectorAll("section.inference-model").length >= n,
          MODELS.length,
          {
            timeout: PAGE_WAIT_MS,
          },
        );
        const models = await ui.page.$$eval("section.inference-model", (s) =>
          s.map((x) => x.getAttribute("data-model")),
        );
        assert.deepEqual(models, MODELS);
        // The search box narrows the models.
        await ui.page.fill("#key-search", "70b");
        await ui.page.waitForFunction(() => document.querySelectorAll("section.inference-model").length === 1);
        assert.equal(await ui.page.getAttribute("section.inference-model", "data-model"), "llama-3.1-70b");
        await ui.page.fill("#key-search", "");
        await ui.page.waitForFunction(() => document.querySelectorAll("section.inference-model").length === 2);
      });

      for (const model of MODELS)
        it(`draws ${model}'s TTFT p50/p90/p99 as three lines holding the store's values`, async () => {
          await ui.page.goto(`${ui.dashboard.url}#run=${RUN}&tab=inference&smooth=0`);
          await ui.page.reload();
          const ttft = cardOf(model, "time to first token");
          await ui.page.locator(ttft).scrollIntoViewIfNeeded({ timeout: PAGE_WAIT_MS });
          await ui.page.waitForSelector(`${ttft}[data-drawn="1"]`, { timeout: PAGE_WAIT_MS });
          assert.equal(await ui.page.getAttribute(ttft, "data-lines"), "3");
          const drawn = await csvOf(ui.page, ttft);
          assert.deepEqual([...drawn.keys()], ["p50", "p90", "p99"]);
          for (const p of ["p50", "p90", "p99"]) {
            const want = stored(runDir, keyOf("gen_ai.server.time_to_first_token", model, p));
            assert.equal(want.size, STEPS, `${p}: a value per flush in the store`);
            assert.deepEqual(drawn.get(p), want, `${model} ${p}`);
          }
          // TPOT and request duration are there too, three lines each.
          for (const measure of ["time per output token", "request duration"]) {
            const selector = cardOf(model, measure);
            await ui.page.locator(selector).scrollIntoViewIfNeeded();
            await ui.page.waitForSelector(`${selector}[data-lines="3"]`, { timeout: PAGE_WAIT_MS });
          }
        });

      it("draws the error rate as the store's errors / requests, and the rates per second", async () => {
        const model = "llama-3.1-70b";
        await ui.page.goto(`${ui.dashboard.url}#run=${RUN}&tab=inference&smooth=0`);
        await ui.page.reload();
        const rate = cardOf(model, "error rate");
        await ui.page.locator(rate).scrollIntoViewIfNeeded({ timeout: PAGE_WAIT_MS });
        await ui.page.waitForSelector(`${rate}[data-drawn="1"]`, { timeout: PAGE_WAIT_MS });
        const requests = stored(runDir, keyOf("inference/requests", model, "total"));
        const errorKey = withSuffix(
          attributedKey("inference/errors", {
            "error.type": "timeout",
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "rankscope-sim",
            "gen_ai.request.model": model,
          }),
          "total",
        );
        const failed = stored(runDir, errorKey);
        const want = new Map([...requests].map(([step, n]) => [step, (failed.get(step) ?? 0) / n]));
        assert.ok(
          [...want.values()].every((v) => v > 0),
          "the simulated 70b model fails one request in eight",
        );
        assert.deepEqual((await csvOf(ui.page, rate)).get("errors / requests"), want);
        for (const measure of ["tokens/s", "requests/s"]) {
          const selector = cardOf(model, measure);
          await ui.page.locator(selector).scrollIntoViewIfNeeded();
          await ui.page.waitForSelector(`${selector}[data-lines="2"]`, { timeout: PAGE_WAIT_MS });
        }
        await ui.page.locator("section.inference-model").first().scrollIntoViewIfNeeded();
        await ui.page.setViewportSize({ width: 1400, height: 1300 });
        for (const m of MODELS) {
          await ui.page.locator(cardOf(m, "error rate")).scrollIntoViewIfNeeded();
          await ui.page.waitForSelector(`${cardOf(m, "error rate")}[data-drawn="1"]`, { timeout: PAGE_WAIT_MS });
        }
        await ui.page.evaluate(() => window.scrollTo(0, 0));
        await shot(ui.page, `inference-view${suffix}.png`);
        assert.deepEqual(ui.errors, []);
      });

      it("exports the view as a report that draws it with no server", async () => {
        await ui.page.goto(`${ui.dashboard.url}#run=${RUN}&tab=inference&smooth=0`);
        await ui.page.reload();
        const ttft = cardOf("llama-3.1-8b", "time to first token");
        await ui.page.locator(ttft).scrollIntoViewIfNeeded({ timeout: PAGE_WAIT_MS });
        await ui.page.waitForSelector(`${ttft}[data-drawn="1"]`, { timeout: PAGE_WAIT_MS });
        const [download] = await Promise.all([ui.page.waitForEvent("download"), ui.page.click("#export")]);
        const file = join(root, `inference-report${suffix}.html`);
        await download.saveAs(file);
        const report = await ui.launched.context.newPage();
        const asked: string[] = [];
        await report.route("**/*", (route) => {
          const url = route.request().url();
          if (url === `file://${file}`) return route.continue();
          asked.push(url);
          return route.abort();
        });
        await report.goto(`file://${file}`);
        await report.locator(ttft).scrollIntoViewIfNeeded({ timeout: PAGE_WAIT_MS });
        await report.waitForSelector(`${ttft}[data-drawn="1"]`, { timeout: PAGE_WAIT_MS });
        assert.equal(await report.getAttribute(ttft, "data-lines"), "3");
        const drawn = await csvOf(report, ttft);
        const want = stored(runDir, keyOf("gen_ai.server.time_to_first_token", "llama-3.1-8b", "p99"));
        assert.deepEqual(drawn.get("p99"), want);
        assert.deepEqual(asked, []);
        await report.close();
      });
    });
});
