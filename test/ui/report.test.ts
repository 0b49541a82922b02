/**
 * `rankscope report` (issue 39, item 1) in Debian's Chromium with the network blocked: a report of
 * two runs written by the real store writer, made by the built CLI, opens from its file with every
 * request refused and none made, draws its charts with the values the store holds (each chart's CSV
 * download: every point of the short run, and real points of the long run, its min, max and last
 * kept, downsampled as the dashboard is), keeps them interactive (a line toggled from the legend,
 * zoom), shows the runs table with the hyperparameters and the notes, and carries no secret. The
 * "Export report" button of the dashboard and of a team server the runs were synced to downloads
 * the same file for its view; `--server` writes it from a dashboard that requires a token; a
 * grouped view's report draws its bands. A real job's report (`rankscope demo`) draws every metric
 * chart with each line's points exactly as its store holds them (the values shown under the
 * cursor moving no card's CSV button), and its Streams, System, Histograms and Samples tabs.
 * Screenshots: test-artifacts/report.png, report-runs-table.png, report-job-samples.png.
 */
import assert from "node:assert/strict";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { gunzipSync } from "node:zlib";
import type { BrowserContext, Page } from "playwright-core";
import { isInternalKey } from "../../src/core/internal-keys.js";
import * as store from "../../src/store/reader.js";
import { REPORT_DATA_ID } from "../../src/ui/report-data.js";
import { startDashboard } from "../../src/ui/server.js";
import { builtCli, runNode, tempDir } from "../helpers.js";
import { launchChromium, type LaunchedBrowser } from "./browser.js";
import { card, ensureWebBuilt, shot, SOURCES, writeRun } from "./web/support.js";

const SHORT = 200;
const LONG = 5_000;
const loss = (step: number): number => 2 * Math.exp(-step / 700) + 0.05 * Math.sin(step * 1.7);
const accuracy = (step: number): number => 1 - 1 / (1 + step / 37);
const SECRET = "sk-live-0123456789abcdef";

/** Open `file` with every request but the file itself refused; the URLs asked are pushed to `asked`. */
async function openOffline(context: BrowserContext, file: string, asked: string[]): Promise<Page> {
  const page = await context.newPage();
  await page.route("**/*", (route) => {
    const url = route.request().url();
    if (url === `file://${file}`) return route.continue();
    asked.push(url);
    return route.abort();
  });
  await page.goto(`file://${file}`);
  return page;
}

/** A chart's CSV download: rows of [line, step, value]. */
async function chartCsv(page: Page, key: string): Promise<Array<[string, number, number]>> {
  const [download] = await Promise.all([page.waitForEvent("download"), page.click(`${card(key)} button.csv`)]);
  const text = readFileSync(await download.path(), "utf8");
  return text
    .trim()
    .split("\n")
    .slice(1)
    .map((row) => {
      const [line = "", step = "", , value = ""] = row.split(",");
      return [line, Number(step), Number(value)];
    });
}

/**
 * The CSV a chart's button makes, taken from the blob it hands to the download (the same code as a
 * click's, without Chromium's download machinery): with the demo's page scrolled to its end, the
 * download of one card (rollout/reward_std) never came in 3 of 3 runs, by mouse click or dispatched
 * click, while the same button downloaded its file on a page where fewer cards were visited.
 * Chromium's downloads are the other tests' (`chartCsv`).
 */
async function chartCsvMade(page: Page, key: string): Promise<Array<[string, number, number]>> {
  const text = await page.evaluate(
    async (selector) => {
      const original = URL.createObjectURL.bind(URL);
      let made: Blob | undefined;
      URL.createObjectURL = (object: Blob | MediaSource): string => {
        if (object instanceof Blob) made = object;
        return original(object);
      };
      try {
        document.querySelector<HTMLButtonElement>(selector)?.click();
      } finally {
        URL.createObjectURL = original;
      }
      return made === undefined ? null : await made.text();
    },
    `${card(key)} button.csv`,
  );
  assert.ok(text !== null, `${key}: its CSV button made no file`);
  return text
    .trim()
    .split("\n")
    .slice(1)
    .map((row) => {
      const [line = "", step = "", , value = ""] = row.split(",");
      return [line, Number(step), Number(value)];
    });
}

/** The data a report carries, decoded as the page decodes it. */
function reportText(html: string): string {
  const packed = new RegExp(`id="${REPORT_DATA_ID}">([^<]*)<`).exec(html)?.[1] ?? "";
  return gunzipSync(Buffer.from(packed, "base64")).toString("utf8");
}

describe("rankscope report in Chromium, offline", () => {
  let root: string;
  let browser: LaunchedBrowser;
  before(async () => {
    ensureWebBuilt();
    root = tempDir("report-");
    writeRun(root, "exp", "short", SHORT, { loss, "eval/accuracy": accuracy }, { lr: 0.01, api_key: SECRET });
    writeRun(root, "exp", "long", LONG, { loss, "eval/accuracy": accuracy }, { lr: 0.003, api_key: SECRET });
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
  });

  it("draws the store's values with no request leaving the file", async () => {
    const out = join(root, "report.html");
    const notes = join(root, "notes.md");
    writeFileSync(notes, "## Why\nThe **long** run's lr is lower. <script>alert(1)</script>\n");
    const result = await runNode(
      [
        builtCli(),
        "report",
        "exp/short",
        "exp/long",
        "--root",
        root,
        "-o",
        out,
        "--title",
        "LR sweep",
        "--notes",
        notes,
      ],
      {},
      { raw: true },
    );
    assert.equal(result.code, 0, result.stderr);
    const html = readFileSync(out, "utf8");
    assert.ok(!html.includes(SECRET) && !reportText(html).includes(SECRET), "the report carries no secret");
    assert.ok(!html.includes("<script>alert(1)</script>"), "notes are escaped");

    const asked: string[] = [];
    const page = await openOffline(browser.context, out, asked);
    await page.waitForSelector(`${card("loss")}[data-drawn="1"]`);
    await page.waitForSelector(`${card("eval/accuracy")}[data-drawn="1"]`);
    assert.match((await page.textContent("#report-header")) ?? "", /LR sweep[\s\S]*exp\/short[\s\S]*exp\/long/);
    assert.match((await page.innerHTML("#report-notes")) ?? "", /<strong>long<\/strong>/);

    for (const [key, f] of [
      ["loss", loss],
      ["eval/accuracy", accuracy],
    ] as const) {
      const rows = await chartCsv(page, key);
      const short = rows.filter(([line]) => line === "exp/short");
      const long = rows.filter(([line]) => line === "exp/long");
      assert.deepEqual(
        short.map(([, step, value]) => [step, value]),
        Array.from({ length: SHORT }, (_, s) => [s, f(s)]),
        `${key}: every point of the short run, exactly`,
      );
      assert.ok(long.length > 100 && long.length <= 600, `${key}: the long run downsampled (${long.length} points)`);
      for (const [, step, value] of long) assert.equal(value, f(step), `${key} at step ${step} is the store's value`);
      const values = Array.from({ length: LONG }, (_, s) => f(s));
      const kept = long.map(([, , v]) => v);
      assert.ok(kept.includes(Math.min(...values)) && kept.includes(Math.max(...values)), `${key}: min and max kept`);
      assert.equal(long[long.length - 1]?.[1], LONG - 1, `${key}: the last step kept`);
    }

    // Interactive: a line toggled off from the legend, and a zoom by dragging.
    await page
      .locator(`${card("loss")} .legend-item`)
      .first()
      .click();
    await page.waitForSelector(`${card("loss")}[data-hidden="1"]`);
    const plot = page.locator(`${card("eval/accuracy")} .u-over`);
    const box = await plot.boundingBox();
    assert.ok(box !== null);
    await page.mouse.move(box.x + box.width * 0.2, box.y + box.height / 2);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.5, box.y + box.height / 2, { steps: 5 });
    await page.mouse.up();
    await page.waitForFunction(() => location.hash.includes("zoom="));
    await shot(page, "report.png");

    await page.click("#tab-runs");
    await page.waitForSelector("table.runs-table tbody tr[data-run]");
    const table = (await page.textContent("table.runs-table")) ?? "";
    assert.match(table, /0\.003/);
    // The hyperparameter that differs between the runs is highlighted; the one they share is not.
    assert.deepEqual(await page.$$eval("table.runs-table th.differs", (ths) => ths.map((th) => th.textContent)), [
      "lr",
    ]);
    assert.equal(await page.locator("table.runs-table td.differs").count(), 2);
    assert.match(table, /0\.01/);
    await shot(page, "report-runs-table.png");
    assert.equal((await page.textContent("#error")) ?? "", "", "no error shown");
    assert.deepEqual(asked, [], "no request left the file");
    await page.close();
  });

  for (const [name, serve, skip] of SOURCES)
    it(`the Export report button downloads the report of its view: ${name}`, { skip }, async () => {
      const dashboard = await serve(root);
      try {
        const page = await browser.context.newPage();
        await page.goto(`${dashboard.url}#tab=metrics&run=exp%2Fshort&q=loss&smooth=0`);
        await page.waitForSelector(`${card("loss")}[data-drawn="1"]`);
        const [download] = await Promise.all([page.waitForEvent("download"), page.click("#export")]);
        const file = join(root, `exported-${name.split(" ")[0] ?? ""}.html`);
        await download.saveAs(file);
        await page.close();
        const html = readFileSync(file, "utf8");
        assert.ok(!reportText(html).includes(SECRET), "the exported report carries no secret");

        const asked: string[] = [];
        const report = await openOffline(browser.context, file, asked);
        await report.waitForSelector(`${card("loss")}[data-drawn="1"]`);
        assert.equal(await report.locator(card("eval/accuracy")).count(), 0, "only the keys of the view's search");
        assert.equal(await report.inputValue("#key-search"), "loss");
        assert.equal(await report.inputValue("#smoothing"), "0");
        const rows = await chartCsv(report, "loss");
        assert.deepEqual(
          rows.map(([, step, value]) => [step, value]),
          Array.from({ length: SHORT }, (_, s) => [s, loss(s)]),
        );
        assert.equal(await report.locator("#export").count(), 0, "a report has no Export button");
        assert.deepEqual(asked, []);
        await report.close();
      } finally {
        await dashboard.close();
      }
    });

  it("--server writes the report of runs on a server, read with its token", async () => {
    const token = "report-read-token-0123456789";
    const dashboard = await startDashboard({ root, port: 0, host: "127.0.0.1", token });
    const base = dashboard.url.split("?")[0] ?? dashboard.url;
    try {
      const out = join(root, "server-report.html");
      const notes = join(root, "server-notes.md");
      writeFileSync(notes, "Read from the *server*.\n");
      const refused = await runNode([builtCli(), "report", "exp/long", "--server", base, "-o", out], {}, { raw: true });
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /answered 401/);
      const result = await runNode(
        [
          builtCli(),
          "report",
          "exp/long",
          "--server",
          base,
          "--token",
          token,
          "--keys",
          "^loss$",
          "--notes",
          notes,
          "-o",
          out,
        ],
        {},
        { raw: true },
      );
      assert.equal(result.code, 0, result.stderr);
      const html = readFileSync(out, "utf8");
      assert.ok(!html.includes(token) && !reportText(html).includes(token), "the token is not in the report");
      const asked: string[] = [];
      const page = await openOffline(browser.context, out, asked);
      await page.waitForSelector(`${card("loss")}[data-drawn="1"]`);
      assert.equal(await page.locator(card("eval/accuracy")).count(), 0);
      assert.match((await page.innerHTML("#report-notes")) ?? "", /<em>server<\/em>/);
      const long = (await chartCsv(page, "loss")).map(([, step, value]) => [step, value]);
      for (const [step = NaN, value = NaN] of long) assert.equal(value, loss(step));
      assert.deepEqual(asked, []);
      await page.close();
    } finally {
      await dashboard.close();
    }
    // The server gone: the error names it and why, not "fetch failed".
    const gone = await runNode(
      [builtCli(), "report", "exp/long", "--server", base, "--token", token, "-o", join(root, "gone.html")],
      {},
      { raw: true },
    );
    assert.equal(gone.code, 1);
    assert.match(
      gone.stderr,
      new RegExp(`could not reach the server at ${base.replace(/[.?*+^$()[\]{}|\\]/g, "\\$&")}.*ECONNREFUSED`),
    );
  });

  it("a real job's report draws every chart with the values its store holds", async () => {
    const jobRoot = tempDir("report-job-");
    const job = await runNode([builtCli(), "demo", "--steps", "12"], { RANKSCOPE_ROOT: jobRoot }, { raw: true });
    assert.equal(job.code, 0, job.stderr);
    const [trial = ""] = readdirSync(join(jobRoot, "default"));
    const runDir = join(jobRoot, "default", trial);
    const out = join(jobRoot, "job.html");
    const made = await runNode([builtCli(), "report", runDir, "-o", out], {}, { raw: true });
    assert.equal(made.code, 0, made.stderr);
    const asked: string[] = [];
    const page = await openOffline(browser.context, out, asked);
    await page.waitForSelector(".chart[data-drawn='1']");
    const keys = store.keys(runDir, "scalar").filter((k) => !isInternalKey(k.key));
    assert.ok(keys.length > 5, "the demo logs metrics");
    // The values under the cursor (shown on every chart, the cursors being synced) move no card:
    // the mouse goes from a chart to a card's CSV button below it and finds the button where it was.
    await page.waitForSelector("body[data-charts-rendered]");
    await page.evaluate(() => new Promise((frame) => requestAnimationFrame(() => requestAnimationFrame(frame))));
    const buttons = (): Promise<number[]> =>
      page.$$eval(".chart[data-drawn='1'] button.csv", (all) => all.map((b) => b.getBoundingClientRect().top));
    const still = await buttons();
    const plot = await page.locator(".chart[data-drawn='1'] .u-over").first().boundingBox();
    assert.ok(plot !== null);
    await page.mouse.move(plot.x + plot.width / 2, plot.y + plot.height / 2);
    await page.waitForSelector(".chart .legend-value:not(:empty)");
    assert.deepEqual(await buttons(), still, "showing the values under the cursor moves no CSV button");
    await page.mouse.move(0, 0);
    for (const { key, ranks } of keys) {
      await page.locator(card(key)).scrollIntoViewIfNeeded();
      await page.waitForSelector(`${card(key)}[data-drawn="1"]`);
      const drawn = (await chartCsvMade(page, key)).map(([, step, value]) => `${step}:${value}`).sort();
      const held = ranks
        .flatMap((rank) => store.series(runDir, key, { rank, maxPoints: Infinity }).points)
        .map((p) => `${p.step}:${p.value}`)
        .sort();
      assert.deepEqual(drawn, held, `${key}: every line's points, as the store holds them`);
    }
    for (const tab of ["streams", "system", "histograms", "samples"]) {
      await page.click(`#tab-${tab}`);
      await page.waitForSelector(
        tab === "samples" ? "#view table" : tab === "histograms" ? "#view canvas" : ".chart[data-drawn='1']",
      );
    }
    await shot(page, "report-job-samples.png");
    assert.equal((await page.textContent("#error")) ?? "", "", "no error shown");
    assert.deepEqual(asked, [], "no request left the file");
    await page.close();
  });

  it("a grouped view's report draws each group's mean and band", async () => {
    const out = join(root, "grouped.html");
    const made = await runNode(
      [
        builtCli(),
        "report",
        "exp/short",
        "exp/long",
        "--root",
        root,
        "--view",
        "#groupby=group&band=minmax",
        "-o",
        out,
      ],
      {},
      { raw: true },
    );
    assert.equal(made.code, 0, made.stderr);
    const asked: string[] = [];
    const page = await openOffline(browser.context, out, asked);
    await page.waitForSelector(`${card("loss")}[data-drawn="1"]`);
    assert.equal(await page.getAttribute(card("loss"), "data-bands"), "1", "one group (no group set): one band");
    assert.equal(await page.inputValue("#group-by"), "group");
    assert.equal((await page.textContent("#error")) ?? "", "");
    assert.deepEqual(asked, []);
    await page.close();
  });
});
