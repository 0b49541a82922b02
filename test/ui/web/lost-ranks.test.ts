/**
 * Lost ranks and killed runs in the dashboard, in a real browser (Debian's Chromium) over stores
 * written by real jobs (issue 20 item 15, issue 24 item 3):
 * - a job whose rank 1 was killed with SIGKILL at step 2 and that then shut down normally: the
 *   runs list says `finished` with a `1 rank lost` badge, a note over the view names the rank, the
 *   step and why, and the rank's line is labelled `lost after step 2` (and dashed);
 * - a job whose controller was killed with SIGKILL: the runs list says `crashed` and the page
 *   stops polling it (no `/api/lines` request over several polls).
 * Screenshot: test-artifacts/dashboard-lost-rank.png.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { closeStores, series } from "../../../src/store/reader.js";
import { spawnRanks } from "../../../src/transport/controller/launcher.js";
import { startDashboard, type Dashboard } from "../../../src/ui/server.js";
import { collectDiagnostics, runNode, tempDir, waitFor } from "../../helpers.js";
import { isAlive, SUM_RANK } from "../../transport/support.js";
import { launchChromium, type LaunchedBrowser } from "../browser.js";
import { card, ensureWebBuilt, shot } from "./support.js";

const KILLED_JOB = fileURLToPath(new URL("../../store/fixtures/killed-job.mjs", import.meta.url));
const KEY = "my_sum_rank_metric";
/**
 * The deadline of every wait here that only a loaded machine makes long (a rank's store opening and
 * committing, a killed process being noticed or reaped, Chromium drawing or polling): deadlines in tests are
 * for hangs, not speed, and on the shared 2-core machine at load average 13-25 a rank's store took
 * over 20 s to show its first three steps. 90 s is met by a starved machine; a hang still ends.
 */
const LOADED_MACHINE_MS = 90_000;

/** A job of three process ranks whose rank 1 is killed after step 2; it then flushes steps 3..5 and shuts down. Returns the victim's name. */
async function jobLosingARank(runDir: string): Promise<string> {
  const logger = new MetricLogger({
    processName: "Controller",
    runDir,
    experiment: "exp",
    trial: "lossy",
    quiet: true,
    // A rank opens its own store (rankStore) when it starts; on a loaded machine that took over the
    // ranks' default backend deadline (half the flush deadline, 2.5 s), so the rank skipped its
    // store's calls and steps 0-2 never reached it. The same deadline for hangs as the waits.
    flushDeadlineMs: LOADED_MACHINE_MS,
    backendDeadlineMs: LOADED_MACHINE_MS,
  });
  let victim = "";
  await collectDiagnostics(async () => {
    await logger.initBackends({
      store: { loggingMode: "global_reduce", waitForWrites: true },
      rankStore: { type: "store", loggingMode: "per_rank_reduce" },
    });
    const ranks = await spawnRanks({ module: SUM_RANK, ranksPerReplica: 3, processName: "Lossy", logger });
    victim = ranks.rankNames[1] as string;
    for (let step = 0; step < 6; step++) {
      if (step === 3) {
        // Once its own store has its steps 0-2 (its writer commits every 200 ms), so its line shows up to the loss.
        await waitFor(() => series(runDir, KEY, { rank: 1 }).points.length === 3, {
          timeoutMs: LOADED_MACHINE_MS,
          what: `${victim}'s steps 0-2 in the store`,
        });
        process.kill(ranks.pid(victim) as number, "SIGKILL");
        await waitFor(() => !logger.rankNames.includes(victim), {
          timeoutMs: LOADED_MACHINE_MS,
          what: `${victim} to be deregistered`,
        });
      }
      await ranks.fanout("myFn");
      await logger.flush(step);
    }
    await logger.shutdown();
  });
  return victim;
}

/** A job (fixture) killed with SIGKILL after three flushes; resolves once its ranks are gone too. */
async function killedJob(runDir: string): Promise<void> {
  let pids: number[] = [];
  const result = await runNode(
    [KILLED_JOB, runDir],
    {},
    {
      raw: true,
      onStdout: (out, child) => {
        const ready = /ready (\{.*\})\n/.exec(out);
        if (ready === null || pids.length > 0) return;
        pids = (JSON.parse(ready[1] as string) as { ranks: number[] }).ranks;
        child.kill("SIGKILL");
      },
    },
  );
  assert.equal(result.signal, "SIGKILL", result.stderr);
  await waitFor(() => pids.length > 0 && pids.every((pid) => !isAlive(pid)), {
    timeoutMs: LOADED_MACHINE_MS,
    what: "the killed job's ranks to exit",
  });
}

describe("lost ranks and killed runs in Chromium", () => {
  let root: string;
  let victim: string;
  let dashboard: Dashboard;
  let launched: LaunchedBrowser;
  let page: Page;
  const lineRequests: string[] = [];

  before(async () => {
    ensureWebBuilt();
    root = tempDir("rankscope-ui-lost-");
    victim = await jobLosingARank(join(root, "exp", "lossy"));
    await killedJob(join(root, "killed", "t"));
    closeStores();
    dashboard = await startDashboard({ root, port: 0 });
    launched = await launchChromium();
    page = await launched.context.newPage();
    // Playwright's own waits (a row to appear, its text, a navigation) under the same deadline.
    page.setDefaultTimeout(LOADED_MACHINE_MS);
    page.setDefaultNavigationTimeout(LOADED_MACHINE_MS);
    page.on("request", (r) => {
      if (new URL(r.url()).pathname === "/api/lines") lineRequests.push(r.url());
    });
  });

  after(async () => {
    await launched?.close();
    await dashboard?.close();
  });

  it("marks the lost rank: a badge on the run, a note naming it, its line labelled and dashed", async () => {
    await page.goto(`${dashboard.url}#run=exp/lossy`);
    const row = page.locator('tr[data-run="exp/lossy"]');
    await row.waitFor();
    assert.match(await row.innerText(), /exp\s+lossy\s+finished\s+1 rank lost/);
    assert.match(
      (await row.locator(".chip.lost").getAttribute("title")) ?? "",
      new RegExp(`rank 1 \\(${victim}\\) after step 2: exited \\(killed by SIGKILL\\)`),
    );
    await page.waitForSelector(`${card(KEY)}[data-drawn]`, { timeout: LOADED_MACHINE_MS });
    assert.equal(
      (await page.locator(".lost-note").innerText()).trim(),
      `⚠ rank 1 (${victim}) lost after step 2: exited (killed by SIGKILL)`,
    );
    const labels = await page.$$eval(`${card(KEY)} .legend-label`, (l) => l.map((x) => x.textContent));
    assert.deepEqual(labels.slice(0, 1), ["all ranks"]);
    assert.ok(labels.includes(`rank 1 (${victim}) · lost after step 2`), labels.join(" | "));
    assert.equal(labels.filter((l) => l?.includes("lost") === true).length, 1, "only the lost rank is marked");
    await shot(page, "dashboard-lost-rank.png");
  });

  it("a run whose controller was killed reads crashed and is not polled", async () => {
    const row = page.locator('tr[data-run="killed/t"]');
    assert.match(await row.innerText(), /killed\s+t\s+crashed/);
    await page.goto(`${dashboard.url}#run=killed/t`);
    await page.waitForSelector(`${card(KEY)}[data-drawn]`, { timeout: LOADED_MACHINE_MS });
    const polls = Number((await page.getAttribute("body", "data-polls")) ?? "0");
    const before = lineRequests.length;
    await page.waitForFunction((n) => Number(document.body.dataset["polls"] ?? "0") >= n + 3, polls, {
      timeout: LOADED_MACHINE_MS,
    });
    assert.equal(lineRequests.length, before, "three polls passed without asking for the crashed run's lines");
    assert.equal(await page.locator("#live").innerText(), "");
  });
});
