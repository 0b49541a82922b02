/**
 * Several keys on one chart (issues 39 and 40) in Debian's Chromium: a Metrics view whose address
 * says `combine=train/loss,val/loss` shows a "Combined" card with one line per key, each in its own
 * colour, whose CSV download holds the store's values of both keys; the toolbar's "combine keys"
 * box adds such a card (the address keeps it) and its ✕ removes it. A report written with that
 * view (`rankscope report --view`, and `--combine`) draws the same card from its file with the
 * network blocked. Screenshot: test-artifacts/combined.png.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import { closeStores, series } from "../../../src/store/reader.js";
import { builtCli, runNode, tempDir } from "../../helpers.js";
import { launchChromium, type LaunchedBrowser } from "../browser.js";
import { csvOf, ensureWebBuilt, serveLocal, shot, writeRun, type Served } from "./support.js";
import { PAGE_WAIT_MS } from "../browser.js";

const STEPS = 30;
const KEYS = ["train/loss", "val/loss"] as const;
const RUN = "exp/combo";
const COMBINED = `.chart[data-combined=${JSON.stringify(KEYS.join(","))}]`;

/** The store's values of a global key, by step. */
function stored(runDir: string, key: string): Map<number, number> {
  return new Map(series(runDir, key).points.map((p) => [p.step, p.value]));
}

/** The combined card drawn with a line per key holding the store's values, and the keys' colours apart. */
async function checkCombinedCard(page: Page, runDir: string): Promise<void> {
  await page.waitForSelector(`details[data-section="combined"] ${COMBINED}[data-drawn="1"]`, { timeout: PAGE_WAIT_MS });
  assert.equal(await page.getAttribute(COMBINED, "data-lines"), "2");
  const drawn = await csvOf(page, COMBINED);
  assert.deepEqual([...drawn.keys()].sort(), [...KEYS]);
  for (const key of KEYS) assert.deepEqual(drawn.get(key), stored(runDir, key), `${key}'s line is the store's`);
  const colours = await page.$$eval(`${COMBINED} .legend .swatch`, (s) =>
    s.map((x) => getComputedStyle(x).backgroundColor),
  );
  assert.equal(colours.length, 2);
  assert.equal(new Set(colours).size, 2, `each key has its own colour: ${colours.join(" ")}`);
}

describe("several keys on one chart", () => {
  let root: string;
  let runDir: string;
  let dashboard: Served;
  let browser: LaunchedBrowser;
  let page: Page;
  const errors: string[] = [];

  before(async () => {
    ensureWebBuilt();
    root = tempDir("rankscope-ui-combined-");
    runDir = join(root, "exp", "combo");
    writeRun(root, "exp", "combo", STEPS, {
      "train/loss": (s) => 2 / (s + 1),
      "val/loss": (s) => 2.5 / (s + 1) + 0.1,
      "train/lr": () => 0.01,
    });
    writeRun(root, "exp", "other", STEPS, { "train/loss": (s) => 3 / (s + 1), "val/loss": (s) => 3.5 / (s + 1) });
    dashboard = await serveLocal(root);
    browser = await launchChromium();
    page = await browser.context.newPage();
    await page.addInitScript("window.__name = (f) => f");
    page.on("pageerror", (e) => errors.push(e.message));
  });

  after(async () => {
    await browser?.close();
    await dashboard?.close();
    closeStores();
    rmSync(root, { recursive: true, force: true });
  });

  it("draws the address's combined chart with one line per key, the store's values", async () => {
    const combine = encodeURIComponent(KEYS.join(","));
    await page.goto(`${dashboard.url}#run=${encodeURIComponent(RUN)}&tab=metrics&smooth=0&combine=${combine}`);
    await checkCombinedCard(page, runDir);
    await shot(page, "combined.png", COMBINED);
    // Each key keeps its own card too.
    for (const key of KEYS) await page.waitForSelector(`.chart[data-key=${JSON.stringify(key)}]`);
    assert.deepEqual(errors, []);
  });

  it("overlaying two runs, draws a line per key × run, labelled with key and run", async () => {
    const runs = `run=${encodeURIComponent(RUN)}&run=${encodeURIComponent("exp/other")}`;
    await page.goto(`${dashboard.url}#${runs}&tab=metrics&smooth=0&combine=${encodeURIComponent(KEYS.join(","))}`);
    await page.reload();
    await page.waitForSelector(`${COMBINED}[data-drawn="1"][data-lines="4"]`, { timeout: PAGE_WAIT_MS });
    const drawn = await csvOf(page, COMBINED);
    assert.deepEqual([...drawn.keys()].sort(), KEYS.flatMap((key) => [`${key} · ${RUN}`, `${key} · exp/other`]).sort());
    for (const key of KEYS) {
      assert.deepEqual(drawn.get(`${key} · ${RUN}`), stored(runDir, key));
      assert.deepEqual(drawn.get(`${key} · exp/other`), stored(join(root, "exp", "other"), key));
    }
  });

  it("adds a combined chart from the toolbar, keeps it in the address, and removes it with ✕", async () => {
    await page.goto(`${dashboard.url}#run=${encodeURIComponent(RUN)}&tab=metrics&smooth=0`);
    await page.reload();
    await page.waitForSelector(`.chart[data-key="train/lr"]`, { timeout: PAGE_WAIT_MS });
    assert.equal(await page.locator(COMBINED).count(), 0);
    await page.fill("#combine", "train/loss, val/loss");
    await page.press("#combine", "Enter");
    await checkCombinedCard(page, runDir);
    assert.deepEqual(new URLSearchParams(new URL(page.url()).hash.slice(1)).getAll("combine"), [KEYS.join(",")]);
    await page.click(`${COMBINED} button.remove`);
    await page.waitForFunction(() => !location.hash.includes("combine"));
    assert.equal(await page.locator(COMBINED).count(), 0);
  });

  for (const [how, args] of [
    ["--view", ["--view", `#tab=metrics&smooth=0&combine=${encodeURIComponent(KEYS.join(","))}`]],
    ["--combine", ["--view", "#smooth=0", "--combine", KEYS.join(","), "--keys", "^train/lr$"]],
  ] as const)
    it(`draws the same card in a report written with ${how}, offline`, async () => {
      const out = join(root, `report${how}.html`);
      const result = await runNode([builtCli(), "report", RUN, "--root", root, "-o", out, ...args], {}, { raw: true });
      assert.equal(result.code, 0, result.stderr);
      const offline = await browser.context.newPage();
      const asked: string[] = [];
      await offline.route("**/*", (route) => {
        const url = route.request().url();
        if (url === `file://${out}`) return route.continue();
        asked.push(url);
        return route.abort();
      });
      await offline.goto(`file://${out}`);
      await checkCombinedCard(offline, runDir);
      assert.deepEqual(asked, [], "no request leaves the file");
      await offline.close();
    });
});
