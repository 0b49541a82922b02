/**
 * The local dashboard's runs index (`src/ui/run-index.ts`) over real stores written by the real
 * store writer and by a real job: it lists what a fresh read of the root lists, and stays right as
 * runs are added (also in a new folder three levels down), written, finished, relabelled and
 * deleted; a pass with nothing changed reads no store, a change reads only the run that changed,
 * and finished runs are re-checked on their slower cadence. `/api/runs` answers an unchanged page
 * with a 304.
 */
import assert from "node:assert/strict";
import { realpathSync, rmSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { closeStores } from "../../src/store/reader.js";
import type { StoreWriter } from "../../src/store/writer.js";
import { recordMetric } from "../../src/core/collector.js";
import { Reduce } from "../../src/core/registry.js";
import { getOrCreateMetricLogger } from "../../src/controller/metric-logger.js";
import { writeFileAtomicSync } from "../../src/io/atomic-write.js";
import { COLD_CHECK_MS, LIVE_READ_MS, PASS_GAP_MS, RunIndex } from "../../src/ui/run-index.js";
import { RunLabelReader } from "../../src/ui/run-labels.js";
import { startDashboard, type Dashboard } from "../../src/ui/server.js";
import type { LabelledRun } from "../../src/ui/source.js";
import { createStoreSource } from "../../src/ui/store-source.js";
import { runNode, tempDir, waitFor } from "../helpers.js";
import { openRun, seedFinishedRun, trainingPoints } from "./seed.js";
import { writeRun } from "./web/support.js";

interface Page {
  runs: LabelledRun[];
  total: number;
}

async function runsOf(dashboard: Dashboard, query = "summary=1"): Promise<Page> {
  const answer = await fetch(new URL(`/api/runs?${query}`, dashboard.url));
  assert.equal(answer.status, 200);
  return (await answer.json()) as Page;
}

/** What a fresh read of the root lists (a new source: its first pass reads every run). */
async function freshList(root: string): Promise<Page> {
  const source = createStoreSource(root);
  try {
    await source.index.refreshAll();
    return JSON.parse(JSON.stringify(await source.listRuns({ summary: true }))) as Page;
  } finally {
    await source.close?.();
  }
}

describe("runs index: a dashboard over a changing root", () => {
  let root: string;
  let dashboard: Dashboard;
  let live: StoreWriter;
  const t0 = Date.now() - 600_000;

  before(async () => {
    root = tempDir("rankscope-run-index-");
    seedFinishedRun(root);
    writeRun(root, "exp", "doomed", 5, { loss: (s) => s });
    writeRun(root, "exp", "headless", 5, { loss: (s) => s });
    live = openRun(root, "exp", "live");
    live.write({ scalars: trainingPoints(0, 10, t0) });
    dashboard = await startDashboard({ root, port: 0 });
  });

  after(async () => {
    await dashboard.close();
    rmSync(root, { recursive: true, force: true });
  });

  const find = (page: Page, id: string): LabelledRun | undefined => page.runs.find((r) => r.id === id);

  it("lists what a fresh read of the root lists", async () => {
    const page = await runsOf(dashboard);
    assert.deepEqual(page.runs.map((r) => r.id).sort(), ["exp/base", "exp/doomed", "exp/headless", "exp/live"]);
    assert.deepEqual(page, await freshList(root));
    assert.equal(find(page, "exp/live")?.status, "running");
  });

  it("shows a run added in a new folder three levels down", async () => {
    writeRun(root, "team/sweep", "t1", 3, { loss: () => 0.25 }, { lr: 0.01 });
    const page = await waitFor(
      async () => {
        const p = await runsOf(dashboard);
        return find(p, "team/sweep/t1") !== undefined ? p : null;
      },
      { timeoutMs: 20_000, what: "the new run in the list" },
    );
    const added = find(page, "team/sweep/t1");
    assert.deepEqual(
      [added?.experiment, added?.trial, added?.status, added?.params],
      ["team/sweep", "t1", "finished", { lr: 0.01 }],
    );
    assert.deepEqual(added?.summary, { loss: 0.25 });
  });

  it("follows a live run's points and its finish", async () => {
    live.write({ scalars: trainingPoints(10, 20, t0).map((p) => (p.key === "lr" ? { ...p, value: 0.5 } : p)) });
    await waitFor(async () => find(await runsOf(dashboard), "exp/live")?.summary?.["lr"] === 0.5, {
      timeoutMs: 20_000,
      what: "the live run's new last value",
    });
    live.finish("finished");
    const done = await waitFor(
      async () => {
        const run = find(await runsOf(dashboard), "exp/live");
        return run?.status === "finished" ? run : null;
      },
      { timeoutMs: 20_000, what: "the live run finished" },
    );
    assert.ok(done.endedAt !== null);
  });

  it("shows new tags and group when run.json is rewritten", async () => {
    writeFileAtomicSync(join(root, "exp", "base", "run.json"), JSON.stringify({ tags: ["relabelled"], group: "g2" }));
    const run = await waitFor(
      async () => {
        const r = find(await runsOf(dashboard), "exp/base");
        return r?.group === "g2" ? r : null;
      },
      { timeoutMs: 20_000, what: "the new labels" },
    );
    assert.deepEqual(run.tags, ["relabelled"]);
  });

  it("drops a deleted run, and a run whose metrics.db was deleted", async () => {
    closeStores();
    rmSync(join(root, "exp", "doomed"), { recursive: true, force: true });
    for (const file of ["metrics.db", "metrics.db-wal", "metrics.db-shm"]) {
      try {
        unlinkSync(join(root, "exp", "headless", file));
      } catch {
        // -wal and -shm are gone once the last connection closed
      }
    }
    await waitFor(
      async () => {
        const ids = (await runsOf(dashboard)).runs.map((r) => r.id);
        return !ids.includes("exp/doomed") && !ids.includes("exp/headless");
      },
      { timeoutMs: 20_000, what: "the deleted runs to leave the list" },
    );
  });

  it("ends equal to a fresh read of the root", async () => {
    // Every change above seen: the index answers exactly what reading every store again answers.
    const fresh = await freshList(root);
    const page = await waitFor(
      async () => {
        const p = await runsOf(dashboard);
        return JSON.stringify(p) === JSON.stringify(fresh) ? p : null;
      },
      { timeoutMs: 20_000, what: "the index to equal a fresh read" },
    );
    assert.deepEqual(page.runs.map((r) => r.id).sort(), ["exp/base", "exp/live", "team/sweep/t1"]);
  });

  it("answers an unchanged page with 304 Not Modified, and a changed one in full", async () => {
    const first = await fetch(new URL("/api/runs?limit=10", dashboard.url));
    const etag = first.headers.get("etag");
    assert.ok(etag !== null && etag.length > 2);
    const again = await fetch(new URL("/api/runs?limit=10", dashboard.url), { headers: { "If-None-Match": etag } });
    assert.equal(again.status, 304);
    assert.equal((await again.text()).length, 0);
    writeRun(root, "exp", "late", 3, { loss: () => 1 });
    const changed = await waitFor(
      async () => {
        const r = await fetch(new URL("/api/runs?limit=10", dashboard.url), { headers: { "If-None-Match": etag } });
        return r.status === 200 ? r : (await r.text(), null);
      },
      { timeoutMs: 20_000, what: "a 200 once a run was added" },
    );
    assert.notEqual(changed.headers.get("etag"), etag);
    assert.ok(((await changed.json()) as Page).runs.some((r) => r.id === "exp/late"));
  });
});

describe("runs index: a real job's run", () => {
  it("is listed running with its last values while it logs, and finished when it shuts down", async () => {
    const root = tempDir("rankscope-run-index-job-");
    const dashboard = await startDashboard({ root, port: 0 });
    try {
      const logger = await getOrCreateMetricLogger({ root, experiment: "job", trial: "t" });
      await logger.initBackends(
        { store: { loggingMode: "global_reduce", waitForWrites: true } },
        { runConfig: { lr: 0.003 }, tags: ["nightly"] },
      );
      for (let step = 0; step < 3; step++) {
        recordMetric("train/loss", 3 - step, Reduce.MEAN);
        await logger.flush(step);
      }
      const running = await waitFor(
        async () => (await runsOf(dashboard)).runs.find((r) => r.id === "job/t" && r.summary?.["train/loss"] === 1),
        {
          timeoutMs: 20_000,
          what: "the job's run with its last loss",
        },
      );
      assert.deepEqual([running.status, running.tags, running.params["lr"]], ["running", ["nightly"], 0.003]);
      await logger.shutdown();
      await waitFor(async () => (await runsOf(dashboard)).runs.find((r) => r.id === "job/t")?.status === "finished", {
        timeoutMs: 20_000,
        what: "the job's run finished",
      });
    } finally {
      await dashboard.close();
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("runs index: a job killed with every process", () => {
  it("reads crashed within LIVE_READ_MS though none of its files changed", async () => {
    const root = realpathSync(tempDir("rankscope-run-index-killed-"));
    let now = 1_000_000;
    const index = new RunIndex(root, new RunLabelReader(root), { now: () => now, watch: false });
    const writer = [
      `import { StoreWriter } from "./src/store/writer.ts";`,
      `const w = StoreWriter.open({ runDir: ${JSON.stringify(join(root, "job", "killed"))}, role: "controller", rank: -1, rankName: "controller", experiment: "job", trial: "killed" });`,
      `w.write({ scalars: [{ key: "loss", step: 0, wall: Date.now(), value: 1 }] });`,
      `console.log("ready");`,
      `setInterval(() => {}, 1000);`,
    ].join("\n");
    try {
      let listedRunning = false;
      const job = runNode(
        ["--input-type=module", "-e", writer],
        {},
        {
          deadlineMs: 60_000,
          onStdout: (text, child) => {
            if (!text.includes("ready") || listedRunning) return;
            listedRunning = true;
            void index.update().then(async () => {
              const run = (await index.current()).runs.find((r) => r.row.id === "job/killed");
              assert.equal(run?.row.status, "running");
              child.kill("SIGKILL");
            });
          },
        },
      );
      const result = await job;
      assert.equal(result.signal, "SIGKILL", result.stderr);
      now += LIVE_READ_MS;
      await index.update();
      const run = (await index.current()).runs.find((r) => r.row.id === "job/killed");
      assert.equal(
        run?.row.status,
        "crashed",
        "a run whose processes are all gone reads crashed, with no file changed",
      );
    } finally {
      index.close();
      closeStores();
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe("runs index: bounded work", () => {
  it("reads no store when nothing changed, only the changed run when one did, and finished runs on their slower cadence", async () => {
    const root = realpathSync(tempDir("rankscope-run-index-work-"));
    let now = 1_000_000;
    // Polling alone, as on a network filesystem where the kernel reports no changes.
    const index = new RunIndex(root, new RunLabelReader(root), { now: () => now, watch: false });
    try {
      for (let i = 0; i < 5; i++) writeRun(root, "done", `r${i}`, 4, { loss: () => i });
      const live = openRun(root, "exp", "live");
      live.write({ scalars: [{ key: "loss", step: 0, wall: t(0), value: 1 }] });
      await index.update();
      assert.equal(index.changeCount, 6, "the first pass read every run once");
      now += PASS_GAP_MS;
      await index.update();
      assert.equal(index.changeCount, 6, "nothing changed: no store read");

      live.write({ scalars: [{ key: "loss", step: 1, wall: t(1), value: 0.5 }] });
      now += PASS_GAP_MS;
      await index.update();
      assert.equal(index.changeCount, 7, "only the live run was read again");
      assert.equal(lastLoss(await index.current(), "exp/live"), 0.5);
      now += COLD_CHECK_MS;
      await index.update();
      assert.equal(index.changeCount, 7, "a sweep of the finished runs found nothing changed: no store read");

      // A finished run written again (a resume): not looked at on every pass…
      const resumed = openRun(root, "done", "r0");
      resumed.write({ scalars: [{ key: "loss", step: 9, wall: t(9), value: 42 }] });
      resumed.finish("finished");
      now += PASS_GAP_MS;
      await index.update();
      assert.equal(lastLoss(await index.current(), "done/r0"), 0, "a finished run is not checked on every pass");
      // …but within its cold cadence.
      now += COLD_CHECK_MS;
      await index.update();
      assert.equal(lastLoss(await index.current(), "done/r0"), 42, "checked again within COLD_CHECK_MS");
      live.finish("finished");
    } finally {
      index.close();
      closeStores();
      rmSync(root, { recursive: true, force: true });
    }
  });

  it("with the kernel's change reports, sees a finished run written again on the next pass", async () => {
    const root = realpathSync(tempDir("rankscope-run-index-watch-"));
    let now = 1_000_000;
    const index = new RunIndex(root, new RunLabelReader(root), { now: () => now });
    try {
      for (let i = 0; i < 3; i++) writeRun(root, "done", `r${i}`, 4, { loss: () => i });
      await index.update();
      now += COLD_CHECK_MS;
      await index.update();
      const reads = index.changeCount;
      const resumed = openRun(root, "done", "r1");
      resumed.write({ scalars: [{ key: "loss", step: 9, wall: t(9), value: 42 }] });
      resumed.finish("finished");
      const seen = await waitFor(
        async () => {
          now += PASS_GAP_MS;
          await index.update();
          return lastLoss(await index.current(), "done/r1") === 42;
        },
        { timeoutMs: 10_000, what: "the resumed run's new last value" },
      );
      assert.ok(seen);
      assert.ok(now - 1_000_000 - COLD_CHECK_MS < COLD_CHECK_MS, "seen before its cold check was due");
      assert.equal(index.changeCount, reads + 1, "only that run was read again");
    } finally {
      index.close();
      closeStores();
      rmSync(root, { recursive: true, force: true });
    }
  });
});

function t(step: number): number {
  return 1.7e12 + step * 1000;
}

function lastLoss(
  current: { runs: { row: LabelledRun; lastValues: Readonly<Record<string, number>> }[] },
  id: string,
): number | undefined {
  return current.runs.find((r) => r.row.id === id)?.lastValues["loss"];
}
