/**
 * Alerts in the dashboard, in Chromium over a real store: the banner names the alerts firing in
 * the selected run (worst level first in its colour), updates while the run goes on, and is gone
 * for a run without any; the Alerts tab lists each episode with its start and end; names from the
 * job stay text; `/api/alerts` answers the store's events. A screenshot goes to test-artifacts/.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import type { AlertEvent } from "../../../src/core/alert.js";
import type { StoreWriter } from "../../../src/store/writer.js";
import { startDashboard, type Dashboard } from "../../../src/ui/server.js";
import { tempDir } from "../../helpers.js";
import { launchChromium, type LaunchedBrowser } from "../browser.js";
import { openRun, trainingPoints } from "../seed.js";
import { ensureWebBuilt, shot } from "./support.js";
import { PAGE_WAIT_MS } from "../browser.js";

const XSS_TITLE = "<img src=x onerror=alert(1)>";
const t0 = Date.now() - 120_000;

function event(e: Omit<AlertEvent, "run" | "level" | "at"> & Partial<Pick<AlertEvent, "level" | "at">>): AlertEvent {
  return { run: "exp/alerting", level: "error", at: t0 + (e.step ?? 0) * 1000, ...e };
}

describe("alerts in the dashboard", () => {
  let root: string;
  let dashboard: Dashboard;
  let launched: LaunchedBrowser;
  let page: Page;
  let live: StoreWriter;
  const dialogs: string[] = [];
  const errors: string[] = [];

  before(async () => {
    ensureWebBuilt();
    root = tempDir("rankscope-ui-alerts-");
    const quiet = openRun(root, "exp", "quiet");
    quiet.write({ scalars: trainingPoints(0, 20, t0) });
    quiet.finish();
    live = openRun(root, "exp", "alerting");
    live.write({
      scalars: trainingPoints(0, 40, t0),
      alerts: [
        event({
          id: "nonfinite:loss#1",
          rule: "nonfinite",
          step: 12,
          key: "loss",
          value: NaN,
          message: "loss became NaN at step 12 (it was finite before)",
          state: "firing",
        }),
        event({
          id: "nonfinite:loss#1",
          rule: "nonfinite",
          step: 14,
          key: "loss",
          value: 0.4,
          message: "loss is finite again at step 14 (0.4)",
          state: "resolved",
        }),
        event({
          id: "rank_lost:Trainer_ab_r3#2",
          rule: "rank_lost",
          step: 20,
          rank: 3,
          rankName: "Trainer_ab_r3",
          host: "node-b",
          message: "rank 3 (Trainer_ab_r3) on node-b was lost (its process ended without a shutdown) at step 20",
          state: "firing",
        }),
        event({
          id: "spike:grad_norm#3",
          rule: "spike",
          level: "warning",
          step: 30,
          key: "grad_norm",
          value: 41,
          message:
            "grad_norm = 41 at step 30: a spike, 17 MADs from the rolling median 2.1 of its last 50 values (k = 6)",
          state: "firing",
        }),
        event({
          id: "user#4",
          rule: "user",
          level: "info",
          step: 35,
          title: XSS_TITLE,
          message: `${XSS_TITLE}: from rank 2`,
          rankName: "Trainer_ab_r2",
          state: "firing",
        }),
      ],
    });
    dashboard = await startDashboard({ root, port: 0 });
    launched = await launchChromium();
    page = await launched.context.newPage();
    page.on("dialog", (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    page.on("pageerror", (e) => errors.push(e.message));
  });

  after(async () => {
    await launched?.close();
    await dashboard?.close();
    live?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('/api/alerts answers the run\'s events in order (NaN as "NaN"), and checks its parameters', async () => {
    const answer = (await (await fetch(`${dashboard.url}api/alerts?run=exp/alerting`)).json()) as {
      alerts: Record<string, unknown>[];
    };
    assert.deepEqual(
      answer.alerts.map((a) => [a["seq"], a["id"], a["state"]]),
      [
        [1, "nonfinite:loss#1", "firing"],
        [2, "nonfinite:loss#1", "resolved"],
        [3, "rank_lost:Trainer_ab_r3#2", "firing"],
        [4, "spike:grad_norm#3", "firing"],
        [5, "user#4", "firing"],
      ],
    );
    assert.equal(answer.alerts[0]?.["value"], "NaN");
    const after2 = (await (await fetch(`${dashboard.url}api/alerts?run=exp/alerting&after=3`)).json()) as {
      alerts: unknown[];
    };
    assert.equal(after2.alerts.length, 2);
    assert.equal((await fetch(`${dashboard.url}api/alerts?run=exp/alerting&limit=0`)).status, 400);
    assert.deepEqual(await (await fetch(`${dashboard.url}api/alerts?run=exp/quiet`)).json(), { alerts: [] });
  });

  it("the banner names the alerts firing in the selected run, the worst level's colour, job text as text", async () => {
    await page.goto(`${dashboard.url}#run=exp/alerting`);
    const banner = page.locator("#alert-banner");
    await banner.locator("li").first().waitFor({ timeout: PAGE_WAIT_MS });
    assert.equal(await banner.getAttribute("class"), "alert-banner level-error");
    assert.match(await banner.locator(".alert-banner-head").innerText(), /^3 alerts firing/);
    assert.deepEqual(await banner.locator("li").allInnerTexts(), [
      `user from Trainer_ab_r2: ${XSS_TITLE}: from rank 2`,
      "spike: grad_norm = 41 at step 30: a spike, 17 MADs from the rolling median 2.1 of its last 50 values (k = 6)",
      "rank_lost: rank 3 (Trainer_ab_r3) on node-b was lost (its process ended without a shutdown) at step 20",
    ]);
    assert.equal(await page.locator("#alert-banner img").count(), 0);
    await shot(page, "alerts-banner.png");
  });

  it("the Alerts tab lists every episode: firing ones first, each with its start, its end and both messages", async () => {
    await page.click("#alert-banner .alert-open");
    await page.waitForSelector("#tab-alerts[aria-selected=true]");
    const rows = page.locator("table.alerts tbody tr");
    await rows.first().waitFor({ timeout: PAGE_WAIT_MS });
    assert.deepEqual(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-alert-id"))), [
      "user#4",
      "spike:grad_norm#3",
      "rank_lost:Trainer_ab_r3#2",
      "nonfinite:loss#1",
    ]);
    const cells = async (i: number): Promise<string[]> => rows.nth(i).locator("td").allInnerTexts();
    const lost = await cells(2);
    assert.deepEqual(lost.slice(0, 4), ["firing", "rank_lost", "error", "rank 3 (Trainer_ab_r3) on node-b"]);
    assert.match(lost[4] ?? "", /^step 20, /);
    assert.equal(lost[5], "");
    const resolved = await cells(3);
    assert.deepEqual(resolved.slice(0, 4), ["resolved", "nonfinite", "error", "loss"]);
    assert.match(resolved[5] ?? "", /^step 14, /);
    assert.match(
      resolved[6] ?? "",
      /loss became NaN at step 12 \(it was finite before\)\s+loss is finite again at step 14 \(0\.4\)/,
    );
    await shot(page, "alerts-tab.png");
    assert.match(page.url(), /tab=alerts/);
  });

  it("the banner follows a live run (an episode that ends leaves it), and is hidden for a run without alerts", async () => {
    live.write({
      alerts: [
        event({
          id: "rank_lost:Trainer_ab_r3#2",
          rule: "rank_lost",
          step: 41,
          rank: 3,
          rankName: "Trainer_ab_r3",
          host: "node-b",
          message: "rank 3 (Trainer_ab_r3) on node-b answers again at step 41",
          state: "resolved",
        }),
      ],
    });
    await page.waitForFunction(
      () => /2 alerts firing/.test(document.querySelector("#alert-banner .alert-banner-head")?.textContent ?? ""),
      undefined,
      { timeout: PAGE_WAIT_MS },
    );
    assert.equal(
      await page.locator("#alert-banner").getAttribute("class"),
      "alert-banner level-warning",
      "the worst firing level is now a warning",
    );
    await page.click('tr[data-run="exp/quiet"]');
    await page.waitForFunction(
      () => document.querySelector("#alert-banner")?.classList.contains("hidden") === true,
      undefined,
      { timeout: PAGE_WAIT_MS },
    );
    assert.match(await page.locator("#view").innerText(), /No alerts in this run\./);
    assert.deepEqual(dialogs, [], "nothing from the job ran");
    assert.deepEqual(errors, []);
  });

  it("an episode the run ended with reads `ended` in the Alerts tab, and leaves the banner", async () => {
    live.write({
      alerts: [
        event({
          id: "spike:grad_norm#3",
          rule: "spike",
          level: "warning",
          step: 40,
          key: "grad_norm",
          message: "the run ended while this was firing (last step 40)",
          state: "ended",
        }),
      ],
    });
    await page.goto(`${dashboard.url}#run=exp/alerting&tab=alerts`);
    const row = page.locator('table.alerts tbody tr[data-alert-id="spike:grad_norm#3"]');
    await page.waitForFunction(
      () =>
        document.querySelector('table.alerts tr[data-alert-id="spike:grad_norm#3"] .alert-state')?.textContent ===
        "ended",
      undefined,
      { timeout: PAGE_WAIT_MS },
    );
    const cells = await row.locator("td").allInnerTexts();
    assert.deepEqual(cells.slice(0, 4), ["ended", "spike", "warning", "grad_norm"]);
    assert.match(cells[5] ?? "", /^step 40, /);
    assert.match(cells[6] ?? "", /the run ended while this was firing \(last step 40\)/);
    assert.match(await page.locator("#alert-banner .alert-banner-head").innerText(), /^1 alert firing/);
    assert.deepEqual(errors, []);
  });
});
