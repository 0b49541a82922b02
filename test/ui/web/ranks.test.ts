/**
 * The Ranks tab in a real browser (Debian's Chromium), over stores written by real loggers:
 * - a job of 8 real thread ranks (`spawnRanks`, each tracing its step with a Tracer), rank 5 slow
 *   at every step and rank 2 at a few: the tab names rank 5 with its host and a chronic mark, and
 *   nobody else at the newest flush (rank 2 is not slow there); its heatmap has one row per rank,
 *   rank 5's marked;
 * - 1,024 ranks on 16 hosts: the controller's logger and store are real, its 16 host handles
 *   answer in-process with their ranks' timings as host agents forward them (rank 600 on node-9
 *   computing 300 ms longer at every flush, its step time equalised by the all-reduce): the
 *   heatmap's rows are the 16 hosts, and the table still names the rank, from the others' wait,
 *   with its host.
 * Both served by `rankscope ui` over the root and by a team server they were synced to (over a real
 * PostgreSQL): the same tab, the same names.
 * Screenshots: test-artifacts/dashboard-ranks.png (8 ranks), dashboard-ranks-1024.png, and
 * dashboard-ranks-server.png, dashboard-ranks-1024-server.png from the team server.
 */
import assert from "node:assert/strict";
import { hostname } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { spawnRanks } from "../../../src/transport/controller/launcher.js";
import { closeStores } from "../../../src/store/reader.js";
import { appendRankTiming, emptyTimingColumns } from "../../../src/core/step-timing.js";
import type { RankGroupHandle, RankGroupSnapshot } from "../../../src/pipeline/rank-handle.js";
import { tempDir } from "../../helpers.js";
import { launchChromium, type LaunchedBrowser } from "../browser.js";
import { ensureWebBuilt, shot, SOURCES, type Served } from "./support.js";
import type { StepPlan } from "../../controller/stragglers/fixtures/straggler-rank.js";
import { PAGE_WAIT_MS } from "../browser.js";

const RANK_MODULE = new URL("../../controller/stragglers/fixtures/straggler-rank.ts", import.meta.url);
/**
 * As in test/controller/stragglers/thread-ranks.test.ts: virtual ms (the fixture's clock), 1 s steps
 * and 20 s more for a slowed rank, and a 10 s bar, above the lateness the 5 s flush deadline lets through.
 */
const STRAGGLERS = { tolerance: 0.5, minExcessMs: 10_000 };

/** 8 thread ranks, 10 flushes; returns the chronic (5) and transient (2) ranks' names. */
async function eightRanks(runDir: string): Promise<{ chronic: string; transient: string }> {
  const logger = new MetricLogger({
    processName: "Controller",
    runDir,
    experiment: "ranks",
    trial: "eight",
    quiet: true,
    stragglers: STRAGGLERS,
  });
  await logger.initBackends({ store: { loggingMode: "global_reduce", waitForWrites: true } });
  const group = await spawnRanks({
    module: RANK_MODULE,
    ranksPerReplica: 8,
    kind: "thread",
    processName: "Trainer",
    logger,
  });
  for (let step = 0; step < 10; step++) {
    const plan: StepPlan = { baseMs: 1000, slowMs: 20_000, slow: step === 2 || step === 6 ? [5, 2] : [5] };
    await group.fanout("trainStep", step, plan);
    await logger.flush(step);
  }
  const names = { chronic: group.rankNames[5] ?? "", transient: group.rankNames[2] ?? "" };
  await group.stop();
  await logger.shutdown();
  return names;
}

const HOSTS = 16;
const PER_HOST = 64;
const SLOW_RANK = 600;

/** Host h's handle: its 64 ranks' step timings as an agent forwards them (rank 600 slower by 300 ms). */
function hostHandle(h: number): RankGroupHandle {
  const names = Array.from({ length: PER_HOST }, (_, i) => `Trainer_${h}_r${i}`);
  return {
    rankName: `host:node-${h}`,
    memberRanks: () => names,
    init: async () => undefined,
    shutdown: async () => undefined,
    flush: async (step: number): Promise<RankGroupSnapshot> => {
      const timing = emptyTimingColumns();
      for (let i = 0; i < PER_HOST; i++) {
        const r = h * PER_HOST + i;
        const compute = 120 + ((r * 7919 + step * 104729) % 97) / 10 + (r === SLOW_RANK ? 300 : 0);
        const wait = r === SLOW_RANK ? 2 : 300;
        const phases = [
          { name: "compute", kind: "phase" as const, count: 1, totalMs: compute },
          { name: "allreduce", kind: "barrier" as const, count: 1, totalMs: wait },
        ];
        appendRankTiming(timing, names[i] ?? "", r, `node-${h}`, 0.5 + (i % 13) / 10, [
          { prefix: "train_step", steps: 1, totalMs: compute + wait, phases },
        ]);
      }
      return {
        rankName: `host:node-${h}`,
        step,
        states: [],
        droppedKeyRecords: 0,
        group: { reporting: PER_HOST, missing: [], timing },
      };
    },
  };
}

async function manyRanks(runDir: string): Promise<void> {
  const logger = new MetricLogger({
    processName: "Controller",
    runDir,
    experiment: "ranks",
    trial: "many",
    quiet: true,
  });
  await logger.initBackends({ store: { loggingMode: "global_reduce", waitForWrites: true } });
  for (let h = 0; h < HOSTS; h++) await logger.registerRank(hostHandle(h));
  for (let step = 0; step < 30; step++) await logger.flush(step);
  await logger.shutdown();
}

/** The two runs, written once for every source (each serves the same root; none writes to it). */
let seeded: Promise<{ root: string; names: { chronic: string; transient: string } }> | undefined;
function seedRoot(): Promise<{ root: string; names: { chronic: string; transient: string } }> {
  seeded ??= (async () => {
    const root = tempDir("rankscope-ui-ranks-");
    const names = await eightRanks(join(root, "ranks", "eight"));
    await manyRanks(join(root, "ranks", "many"));
    closeStores();
    return { root, names };
  })();
  return seeded;
}

for (const [name, serve, skip] of SOURCES)
  describe(`the Ranks tab in Chromium: ${name}`, { skip }, () => {
    let names: { chronic: string; transient: string };
    let dashboard: Served;
    let launched: LaunchedBrowser;
    let page: Page;
    const errors: string[] = [];

    before(async () => {
      ensureWebBuilt();
      const { root, ...seed } = await seedRoot();
      names = seed.names;
      dashboard = await serve(root);
      launched = await launchChromium();
      page = await launched.context.newPage();
      page.on("pageerror", (e) => errors.push(e.message));
    });

    after(async () => {
      await launched?.close();
      await dashboard?.close();
    });

    it("names the chronic slow rank with its host, and nobody else, over a heatmap of its 8 ranks", async () => {
      await page.goto(`${dashboard.url}#run=ranks/eight&tab=ranks`);
      await page.waitForSelector("#ranks-body[data-drawn]", { timeout: PAGE_WAIT_MS });
      const rows = page.locator("#slow-ranks tr[data-rank]");
      assert.deepEqual(
        await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-rank"))),
        [names.chronic],
        "only the chronic rank is slow at the newest flush",
      );
      const text = await rows.first().innerText();
      assert.match(text, new RegExp(`${names.chronic} \\(rank 5\\)\\s+${hostname()}\\s+step`), text);
      assert.match(text, /compute/, "the phase that made it slow");
      assert.match(text, /chronic/);
      assert.match(
        await page.locator("#ranks-summary").innerText(),
        /^8 ranks · tracer train_step · median step [\d.]+ ms · skew \(max \/ median\) [\d.]+/,
      );
      assert.equal(await page.getAttribute("#ranks-heatmap", "data-rows"), "8");
      assert.equal(await page.getAttribute("#ranks-heatmap", "data-cols"), "10");
      assert.deepEqual(await page.locator(".heatmap-label.slow").allInnerTexts(), [`${names.chronic} · ${hostname()}`]);
      await page.selectOption("#ranks-measure", "latenessMs");
      await page.waitForSelector('#ranks-body[data-drawn="latenessMs"]', { timeout: PAGE_WAIT_MS });
      await shot(page, name === "local root" ? "dashboard-ranks.png" : "dashboard-ranks-server.png");
      assert.deepEqual(errors, []);
    });

    it("at 1,024 ranks shows hosts as rows and still names the slow rank with its host", async () => {
      await page.goto(`${dashboard.url}#run=ranks/many&tab=ranks`);
      await page.waitForSelector("#ranks-body[data-drawn]", { timeout: PAGE_WAIT_MS });
      assert.match(await page.locator("#ranks-summary").innerText(), /^1024 ranks on 16 hosts \(rows are hosts/);
      assert.equal(await page.getAttribute("#ranks-heatmap", "data-rows"), "16");
      const rows = page.locator("#slow-ranks tr[data-rank]");
      assert.deepEqual(
        await rows.evaluateAll((trs) => trs.map((tr) => [tr.getAttribute("data-rank"), tr.getAttribute("data-host")])),
        [["Trainer_9_r24", "node-9"]],
      );
      const text = await rows.first().innerText();
      // The barrier equalises step time (as an all-reduce does): the rank is named from the others' wait for it.
      assert.match(text, /Trainer_9_r24 \(rank 600\)\s+node-9\s+wait\s/, text);
      assert.match(text, /chronic/);
      assert.deepEqual(await page.locator(".heatmap-label.slow").allInnerTexts(), ["node-9 (64 ranks)"]);
      assert.deepEqual(
        (await page.locator(".heatmap-label").allInnerTexts()).slice(0, 3),
        ["node-0 (64 ranks)", "node-1 (64 ranks)", "node-2 (64 ranks)"],
        "hosts in natural order",
      );
      await page.selectOption("#ranks-measure", "waitMs");
      await page.waitForSelector('#ranks-body[data-drawn="waitMs"]', { timeout: PAGE_WAIT_MS });
      await shot(page, name === "local root" ? "dashboard-ranks-1024.png" : "dashboard-ranks-1024-server.png");
      assert.deepEqual(errors, []);
    });
  });
