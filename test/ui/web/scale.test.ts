/**
 * The dashboard at a team's scale in Debian's Chromium, over both sources: a local root of real
 * stores (`rankscope ui`) and a team server over a real PostgreSQL. Thousands of runs: the sidebar's
 * list and the runs table render only the rows in view, scroll to the last run, filter on the
 * server (tags, group, parameter comparisons, a metric's last value, text) and sort; the selected
 * runs grouped by a hyperparameter are drawn as mean ± std (or min–max) bands whose figures equal
 * the ones computed by hand from the runs' series.
 */
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { Page } from "playwright-core";
import type { TeamServer } from "../../../src/server/server.js";
import { startDashboard, type Dashboard } from "../../../src/ui/server.js";
import { RunSync } from "../../../src/sync/run-sync.js";
import { tempDir } from "../../helpers.js";
import { Postgres, postgresMissing } from "../../server/postgres.js";
import { insertRunRows, serverWithTokens } from "../../server/support.js";
import type { LaunchedBrowser } from "../browser.js";
import { manyRunSpec, seedManyRuns, type ManyRunSpec } from "../seed.js";
import { card, ensureWebBuilt, openPage, shot, writeRun } from "./support.js";
import { PAGE_WAIT_MS } from "../browser.js";

const N = 2000;
const SPECS: ManyRunSpec[] = Array.from({ length: N }, (_, i) => manyRunSpec(i));

/** Runs of two groups by `lr` whose `loss` figures are worked out by hand below. */
const BAND_RUNS: [string, number, (step: number) => number][] = [
  ["b1", 0.5, (s) => [1, 2, 3, 4][s] ?? NaN],
  ["b2", 0.5, (s) => [3, 2, 1, 0][s] ?? NaN],
  ["b3", 0.5, (s) => [2, 2, 2, 5][s] ?? NaN],
  ["b4", 0.7, (s) => 10 + s],
  ["b5", 0.7, (s) => 20 + s],
];
const TOTAL = N + BAND_RUNS.length;
/** Rows a list may render: those in view and the overscan, never thousands. */
const MAX_RENDERED = 80;

/** By hand: lr=0.5 at steps 0..3 has (1,3,2), (2,2,2), (3,1,2), (4,0,5); lr=0.7 has (10+s, 20+s). */
const EXPECTED_CSV: Record<string, { mean: number[]; std: number[]; min: number[]; max: number[]; runs: number }> = {
  "lr=0.5 (3 runs)": {
    mean: [2, 2, 2, 3],
    std: [Math.sqrt(2 / 3), 0, Math.sqrt(2 / 3), Math.sqrt(14 / 3)],
    min: [1, 2, 1, 0],
    max: [3, 2, 3, 5],
    runs: 3,
  },
  "lr=0.7 (2 runs)": {
    mean: [15, 16, 17, 18],
    std: [5, 5, 5, 5],
    min: [10, 11, 12, 13],
    max: [20, 21, 22, 23],
    runs: 2,
  },
};

const skipTeam = postgresMissing() ?? false;

interface Source {
  /** The dashboard's address (with `?token=` for the team server the first time). */
  url: string;
  /** Whether runs carry their metrics' last values (the team server's bare run rows do not). */
  summaries: boolean;
  close(): Promise<void>;
}

function bandRunsRoot(root: string): void {
  for (const [trial, lr, f] of BAND_RUNS) writeRun(root, "bands", trial, 4, { loss: f }, { lr, opt: "adam" });
}

async function localSource(): Promise<Source> {
  const root = tempDir("rankscope-ui-scale-");
  seedManyRuns(root, N);
  bandRunsRoot(root);
  const dashboard: Dashboard = await startDashboard({ root, port: 0 });
  return {
    url: dashboard.url,
    summaries: true,
    close: async () => {
      await dashboard.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

async function teamSource(): Promise<Source> {
  const root = tempDir("rankscope-ui-scale-team-");
  bandRunsRoot(root);
  const pg = await Postgres.start();
  let server: TeamServer | undefined;
  try {
    const t = await serverWithTokens(pg);
    server = t.server;
    for (const [trial] of BAND_RUNS)
      await new RunSync({ runDir: join(root, "bands", trial), url: t.server.url, token: t.write }).pass();
    await insertRunRows(t.server, SPECS);
    const team = t.server;
    return {
      url: `${team.url}/?token=${encodeURIComponent(t.read)}`,
      summaries: false,
      close: async () => {
        await team.close();
        await pg.close();
        rmSync(root, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await server?.close();
    await pg.close();
    throw error;
  }
}

function scaleTests(name: string, open: () => Promise<Source>, skip: string | false): void {
  describe(`the dashboard with ${TOTAL.toLocaleString("en-US")} runs in Chromium: ${name}`, { skip }, () => {
    let source: Source;
    let launched: LaunchedBrowser;
    let page: Page;
    const errors: string[] = [];

    const goto = async (hash: string): Promise<void> => {
      await page.goto(`${source.url.replace(/\?.*$/, "")}#${hash}`);
      await page.reload();
    };
    /** Ask the server what the page would (with the page's cookie). */
    const api = (path: string): Promise<{ runs: { id: string }[]; total: number }> =>
      page.evaluate(async (p) => {
        const r = await fetch(p, { credentials: "same-origin" });
        return (await r.json()) as { runs: { id: string }[]; total: number };
      }, `api/${path}`);
    const listIds = (): Promise<string[]> =>
      page.$$eval("#runs tbody tr.run[data-run]", (rows) => rows.map((r) => r.getAttribute("data-run") ?? ""));
    const countIs = (n: number): Promise<unknown> =>
      page.waitForSelector(`#runs-count[data-total="${n}"]`, { timeout: 60_000 });

    before(async () => {
      ensureWebBuilt();
      source = await open();
      ({ launched, page } = await openPage(errors));
      await page.goto(source.url);
    });

    after(async () => {
      await launched?.close();
      await source?.close();
    });

    it("lists every run in the sidebar, renders only the rows in view, and scrolls to the last run", async () => {
      await goto("tab=metrics&run=bands/b1");
      await countIs(TOTAL);
      assert.equal(await page.textContent("#runs-count"), `${TOTAL.toLocaleString("en-US")} runs`);
      const rendered = await page.locator("#runs tbody tr.run").count();
      assert.ok(rendered > 5 && rendered <= MAX_RENDERED, `${rendered} rows rendered of ${TOTAL}`);
      const first = await api("runs?offset=0&limit=3");
      assert.deepEqual(
        (await listIds()).slice(0, 3),
        first.runs.map((r) => r.id),
        "the list shows the server's first page in order",
      );
      await page.$eval("#sidebar", (s) => {
        s.scrollTop = s.scrollHeight;
      });
      const last = await api(`runs?offset=${TOTAL - 1}&limit=1`);
      await page.waitForSelector(
        `#runs tr.run[data-index="${TOTAL - 1}"][data-run=${JSON.stringify(last.runs[0]?.id ?? "")}]`,
        { timeout: PAGE_WAIT_MS },
      );
      const after = await page.locator("#runs tbody tr.run").count();
      assert.ok(after <= MAX_RENDERED, `${after} rows rendered at the bottom`);
      // Every row is drawn at the height the spacers stand for, so the scroll position cannot drift.
      const { rowHeight, heights, top, firstIndex } = await page.$eval("#runs", (table) => ({
        rowHeight: Number(table.getAttribute("data-row-height")),
        heights: [...table.querySelectorAll("tbody tr.run[data-run]")].map((r) => r.getBoundingClientRect().height),
        top: table.querySelector("tbody tr.spacer-top")?.getBoundingClientRect().height ?? NaN,
        firstIndex: Number(table.querySelector("tbody tr.run")?.getAttribute("data-index")),
      }));
      for (const h of heights)
        assert.ok(Math.abs(h - rowHeight) < 0.6, `a row ${h}px high, the list counts ${rowHeight}px`);
      assert.ok(Math.abs(top - firstIndex * rowHeight) < 1, `the top spacer stands for ${firstIndex} rows`);
      await shot(page, `scale-sidebar-${name}.png`, "#sidebar");
    });

    it("filters the list on the server: tags, group, parameter comparisons and text", async () => {
      const cases: [string, (s: ManyRunSpec) => boolean][] = [
        ["tag:rare group:g0", (s) => s.tags.includes("rare") && s.group === "g0"],
        ["lr<0.01 opt=sgd", (s) => s.params.lr < 0.01 && s.params.opt === "sgd"],
        ["group:g3 lr>=0.01", (s) => s.group === "g3" && s.params.lr >= 0.01],
        ["r0012", (s) => `${s.experiment}/${s.trial}`.includes("r0012")],
      ];
      await goto("tab=metrics&run=bands/b1");
      await countIs(TOTAL);
      for (const [text, matches] of cases) {
        const expected = new Set(SPECS.filter(matches).map((s) => `${s.experiment}/${s.trial}`));
        assert.ok(expected.size > 0 && expected.size < N, text);
        await page.fill("#run-filter", text);
        await countIs(expected.size);
        assert.equal(await page.textContent("#runs-count"), `${expected.size.toLocaleString("en-US")} runs match`);
        await page.waitForFunction(
          (want) => document.querySelectorAll("#runs tbody tr.run[data-run]").length >= want,
          Math.min(expected.size, 10),
          { timeout: PAGE_WAIT_MS },
        );
        const shown = await listIds();
        assert.ok(shown.length > 0 && shown.length <= MAX_RENDERED, `${text}: ${shown.length} rows rendered`);
        for (const id of shown) assert.ok(expected.has(id), `${text}: ${id} is shown but does not match`);
      }
      await page.fill("#run-filter", "");
      await countIs(TOTAL);
    });

    it("holds thousands of rows in the runs table: scrolls, sorts and filters on the server", async () => {
      await goto("tab=runs&run=bands/b1");
      const table = page.locator("table.runs-table");
      await page.waitForSelector(`table.runs-table[data-rows="${TOTAL}"]`, { timeout: 60_000 });
      assert.ok(Number(await table.getAttribute("data-rendered-rows")) <= MAX_RENDERED);
      // Scroll to the middle: the rows there come in, a page at a time, and only they are drawn.
      const middle = Math.floor(TOTAL / 2);
      await page.$eval(
        ".runs-table-wrap",
        (box, row) => {
          box.scrollTop = row * 26;
        },
        middle,
      );
      const expected = await api(`runs?offset=${middle}&limit=1`);
      await page.waitForSelector(
        `table.runs-table tr[data-index="${middle}"][data-run=${JSON.stringify(expected.runs[0]?.id ?? "")}]`,
        { timeout: PAGE_WAIT_MS },
      );
      assert.ok(Number(await table.getAttribute("data-rendered-rows")) <= MAX_RENDERED);
      // Sorted by lr on the server: the smallest first, whatever was loaded before.
      await page.click('button.sort[data-col="p:lr"]');
      await page.waitForFunction(() => (document.querySelector(".runs-table-wrap")?.scrollTop ?? 1) === 0);
      const smallest = SPECS.filter((s) => s.params.lr === 0.0001).map((s) => `${s.experiment}/${s.trial}`);
      await page.waitForFunction(
        (ids) =>
          ids.includes(document.querySelector("table.runs-table tbody tr[data-run]")?.getAttribute("data-run") ?? ""),
        smallest,
        { timeout: PAGE_WAIT_MS },
      );
      const filter = source.summaries ? "opt=sgd loss<6" : "opt=sgd lr>=0.01";
      // Kinds 4..7 are sgd; their last loss is the kind (4..7); lr ≥ 0.01 are kinds 4 and 5.
      const want = SPECS.filter(
        (s) => s.params.opt === "sgd" && (source.summaries ? s.loss < 6 : s.params.lr >= 0.01),
      ).length;
      await page.fill("#table-filter", filter);
      await page.waitForSelector(`table.runs-table[data-rows="${want}"]`, { timeout: PAGE_WAIT_MS });
      assert.equal(
        await page.textContent("#table-count"),
        `${want.toLocaleString("en-US")} of ${TOTAL.toLocaleString("en-US")} runs`,
      );
      await shot(page, `scale-table-${name}.png`, "table.runs-table");
    });

    it("draws the runs grouped by lr as mean ± std and min–max bands with the hand-computed figures", async () => {
      const runs = BAND_RUNS.map(([t]) => `run=bands/${t}`).join("&");
      const canvasOf = (): Promise<string> =>
        page.$eval(`${card("loss")} canvas`, (c) => (c as HTMLCanvasElement).toDataURL());
      const drawn: Record<string, string> = {};
      for (const band of ["std", "minmax", "none"]) {
        await goto(`tab=metrics&${runs}&smooth=0&groupby=param:lr&band=${band}`);
        await page.waitForSelector(`${card("loss")}[data-drawn="1"][data-bands="${band === "none" ? 0 : 2}"]`, {
          timeout: PAGE_WAIT_MS,
        });
        assert.equal(await page.inputValue("#group-by"), "param:lr");
        drawn[band] = await canvasOf();
        const [csv] = await Promise.all([page.waitForEvent("download"), page.click(`${card("loss")} button.csv`)]);
        const [head, ...rows] = readFileSync((await csv.path()) ?? "", "utf8")
          .trim()
          .split("\n");
        if (band === "none") {
          assert.equal(head, "line,step,time_ms,value");
          continue;
        }
        assert.equal(head, "line,step,time_ms,value,std,min,max,runs");
        assert.equal(rows.length, 8);
        for (const [label, figures] of Object.entries(EXPECTED_CSV)) {
          const mine = rows
            .filter((r) => r.startsWith(`${label},`))
            .map((r) =>
              r
                .slice(label.length + 1)
                .split(",")
                .map(Number),
            );
          assert.deepEqual(
            mine.map((r) => r[0]),
            [0, 1, 2, 3],
            `${label}: steps`,
          );
          for (const [i, r] of mine.entries()) {
            const [, , mean, std, min, max, count] = r;
            assert.ok(Math.abs((mean ?? NaN) - (figures.mean[i] ?? NaN)) < 1e-9, `${label} mean at ${i}: ${mean}`);
            assert.ok(Math.abs((std ?? NaN) - (figures.std[i] ?? NaN)) < 1e-9, `${label} std at ${i}: ${std}`);
            assert.equal(min, figures.min[i]);
            assert.equal(max, figures.max[i]);
            assert.equal(count, figures.runs);
          }
        }
      }
      assert.notEqual(drawn["std"], drawn["none"], "the ± std band is drawn");
      assert.notEqual(drawn["minmax"], drawn["std"], "the min–max band differs from ± std");
      await goto(`tab=metrics&${runs}&smooth=0&groupby=param:lr`);
      await page.waitForSelector(`${card("loss")}[data-drawn="1"][data-bands="2"]`, { timeout: PAGE_WAIT_MS });
      await shot(page, `scale-bands-${name}.png`, card("loss"));
    });

    it("logged no errors in the page", () => {
      assert.deepEqual(errors, []);
    });
  });
}

scaleTests("local root", localSource, false);
scaleTests("team server over PostgreSQL", teamSource, skipTeam);
