/**
 * Record from anywhere (issue 12, case 5): metrics recorded in worker threads the user started
 * with `new Worker(...)` — real worker threads, not spawnRanks ranks — reach the flush of the
 * process's main thread, checked in the jsonl backend's file; a worker that exits sends what it
 * had; a worker too busy to answer is named, the flush keeps its deadline, and its values come
 * once, in a later flush; a worker started inside a rank's process reports through that rank.
 */
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { Worker } from "node:worker_threads";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { recordMetric } from "../../src/core/collector.js";
import { workerGatherer } from "../../src/core/worker-link.js";
import { spawnRanks } from "../../src/transport/controller/launcher.js";
import { collectDiagnostics, tempDir, waitFor, within } from "../helpers.js";

const USER_WORKER = new URL("../fixtures/user-worker.mjs", import.meta.url);
const FETCHER_RANK = new URL("../fixtures/fetcher-rank.ts", import.meta.url);
const dirs: string[] = [];
const workers: Worker[] = [];

after(async () => {
  await Promise.all(workers.map((w) => w.terminate()));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface UserWorker {
  readonly worker: Worker;
  send(message: Record<string, unknown>, answer: string): Promise<void>;
  readonly exited: Promise<number>;
}

async function startWorker(): Promise<UserWorker> {
  const worker = new Worker(USER_WORKER);
  workers.push(worker);
  const waiting = new Map<string, Array<() => void>>();
  const next = (t: string): Promise<void> =>
    new Promise((resolve) => {
      const list = waiting.get(t) ?? [];
      list.push(resolve);
      waiting.set(t, list);
    });
  worker.on("message", (m: { t: string }) => waiting.get(m.t)?.shift()?.());
  const exited = new Promise<number>((resolve) => worker.once("exit", resolve));
  const ready = next("ready");
  await Promise.race([ready, exited.then(() => Promise.reject(new Error("the worker exited before it was ready")))]);
  return {
    worker,
    exited,
    send: async (message, answer) => {
      const answered = next(answer);
      worker.postMessage(message);
      await answered;
    },
  };
}

function newLogger(flushDeadlineMs = 5000): { logger: MetricLogger; runDir: string } {
  const runDir = tempDir();
  dirs.push(runDir);
  return { logger: new MetricLogger({ processName: "Controller", runDir, flushDeadlineMs }), runDir };
}

/** The value of `key` at each step in the run's metrics.jsonl. */
function jsonlValues(runDir: string, key: string): Map<number, number> {
  const values = new Map<number, number>();
  for (const line of readFileSync(join(runDir, "metrics.jsonl"), "utf8").split("\n")) {
    if (line === "") continue;
    const record = JSON.parse(line) as { key: string; value: number; step: number };
    if (record.key === key) values.set(record.step, record.value);
  }
  return values;
}

const knownWorkers = (): number => workerGatherer()?.knownWorkers ?? 0;

test("metrics recorded in the user's own worker threads reach the main thread's flush, each value once", async () => {
  const { logger, runDir } = newLogger();
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
  const known = knownWorkers();
  const [a, b] = await Promise.all([startWorker(), startWorker()]);
  await a.send({ t: "record", key: "anywhere/sum", value: 2, reduce: "sum" }, "recorded");
  await b.send({ t: "record", key: "anywhere/sum", value: 3, reduce: "sum" }, "recorded");
  await b.send({ t: "record", key: "anywhere/max", value: 9, reduce: "max" }, "recorded");
  await waitFor(() => knownWorkers() >= known + 2, {
    timeoutMs: 10_000,
    what: "both workers to link to the main thread",
  });
  recordMetric("anywhere/sum", 1, "sum");
  const first = await logger.flush(0);
  assert.equal(first.metrics.find((m) => m.key === "anywhere/sum")?.value, 6, "main 1 + worker 2 + worker 3");
  await a.send({ t: "record", key: "anywhere/sum", value: 4, reduce: "sum" }, "recorded");
  await logger.flush(1);
  await logger.flush(2);
  await logger.shutdown();
  assert.deepEqual(
    [...jsonlValues(runDir, "anywhere/sum")],
    [
      [0, 6],
      [1, 4],
    ],
  );
  assert.deepEqual([...jsonlValues(runDir, "anywhere/max")], [[0, 9]]);
  for (const w of [a, b]) w.worker.postMessage({ t: "exit" });
  assert.deepEqual(
    await within(Promise.all([a.exited, b.exited]), { timeoutMs: 10_000, what: "both workers to exit" }),
    [0, 0],
  );
});

test("a worker that exits after recording: what it recorded reaches the next flush", async () => {
  const { logger, runDir } = newLogger();
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
  const worker = await startWorker();
  await worker.send({ t: "record", key: "leaving/sum", value: 5, reduce: "sum" }, "recorded");
  worker.worker.postMessage({ t: "exit" });
  assert.equal(await within(worker.exited, { timeoutMs: 10_000, what: "the worker to exit" }), 0);
  await waitFor(async () => (await logger.flush(0)).metrics.some((m) => m.key === "leaving/sum"), {
    timeoutMs: 10_000,
    what: "the exited worker's values",
  });
  await logger.shutdown();
  assert.equal(
    [...jsonlValues(runDir, "leaving/sum").values()].reduce((n, v) => n + v, 0),
    5,
  );
});

test("a worker too busy to answer: the flush keeps its deadline and names it; its values come once, later", async () => {
  const { logger, runDir } = newLogger(1000);
  let threadId = -1;
  const seen = await collectDiagnostics(async () => {
    await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
    const known = knownWorkers();
    const worker = await startWorker();
    threadId = worker.worker.threadId;
    await worker.send({ t: "record", key: "busy/sum", value: 7, reduce: "sum" }, "recorded");
    await waitFor(() => knownWorkers() >= known + 1, { timeoutMs: 10_000, what: "the worker to link" });
    const blocking = new Promise<void>((resolve) =>
      worker.worker.on("message", (m: { t: string }) => m.t === "blocking" && resolve()),
    );
    // Stuck until the flush below returned without it (by its deadline), then released.
    const release = new Int32Array(new SharedArrayBuffer(4));
    const unblocked = worker.send({ t: "block", ms: 60_000, release: release.buffer }, "unblocked");
    // The flush's question travels on another channel than the block message: ask only once the worker is busy.
    await within(blocking, { timeoutMs: 10_000, what: "the worker to start its busy loop" });
    const started = Date.now();
    const during = await logger.flush(0);
    const took = Date.now() - started;
    Atomics.store(release, 0, 1);
    Atomics.notify(release, 0);
    assert.ok(took < 1000 + 2000, `the flush returned in ${took} ms (deadline 1000 ms)`);
    assert.equal(
      during.metrics.find((m) => m.key === "busy/sum"),
      undefined,
      "the busy worker's value is not in this flush",
    );
    await unblocked;
    let step = 1;
    await waitFor(async () => (await logger.flush(step++)).metrics.some((m) => m.key === "busy/sum"), {
      timeoutMs: 10_000,
      what: "the busy worker's value in a later flush",
    });
    await logger.flush(step++);
    await logger.shutdown();
    worker.worker.postMessage({ t: "exit" });
    await within(worker.exited, { timeoutMs: 10_000, what: "the worker to exit" });
  });
  assert.ok(
    seen.some(
      (d) =>
        d.code === `collector.workerMissing:${threadId}` && /did not answer the flush within 500 ms/.test(d.message),
    ),
    "the worker is named",
  );
  assert.equal(
    [...jsonlValues(runDir, "busy/sum").values()].reduce((n, v) => n + v, 0),
    7,
    "logged once",
  );
});

test("a worker thread started inside a rank process (a fetcher) reports through that rank to the controller", async () => {
  const { logger, runDir } = newLogger(10_000);
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
  const ranks = await spawnRanks({ module: FETCHER_RANK, ranksPerReplica: 2, processName: "Fetching", logger });
  await ranks.fanout("fetchAndRecord", "fetcher/sum", 5);
  let step = 0;
  // The fetcher's first values may reach the rank one flush later (its link is announced asynchronously): wait, then check the total.
  await waitFor(async () => [...fetcherValues(await logger.flush(step++))].length > 0, {
    timeoutMs: 20_000,
    what: "the fetchers' values at the controller",
  });
  await ranks.fanout("fetchAndRecord", "fetcher/sum", 1);
  await logger.flush(step++);
  await logger.flush(step++);
  await ranks.fanout("stopFetcher");
  await logger.shutdown();
  const total = [...jsonlValues(runDir, "fetcher/sum").values()].reduce((n, v) => n + v, 0);
  assert.equal(total, 2 * 5 + 2 * 1, "both ranks' fetchers, every value once");
});

function fetcherValues(result: { metrics: readonly { key: string; value: number }[] }): number[] {
  return result.metrics.filter((m) => m.key === "fetcher/sum").map((m) => m.value);
}
