/**
 * A stream backend's queue (src/pipeline/stream-queue.ts) and its counts in a `BackendSet`: in
 * order, one call at a time, waiting batches sent together, bounded with every drop counted, and
 * a settle that waits only for what came before it (issue 24 case 4).
 */
import assert from "node:assert/strict";
import { describe, it, mock } from "node:test";
import type { BackendContext } from "../../src/backends/backend.js";
import { BackendSet } from "../../src/pipeline/backend-set.js";
import { validateBackendsConfig } from "../../src/pipeline/config.js";
import { MAX_BACKLOG_RECORDS, MAX_CALL_RECORDS, StreamQueue } from "../../src/pipeline/stream-queue.js";
import type { KeyState } from "../../src/core/key-state.js";
import type { StreamRecord } from "../../src/core/metric.js";
import { registerBackend } from "../../src/index.js";
import { collectDiagnostics } from "../helpers.js";

function records(from: number, count: number): StreamRecord[] {
  return Array.from({ length: count }, (_, i) => ({
    key: "k",
    value: from + i,
    step: 0,
    timestamp: 0,
    rank: 0,
    rankName: "r0",
    role: "rank" as const,
    thread: 0,
  }));
}

/** A backend whose calls end when the test says so. */
class HeldCalls {
  readonly calls: number[][] = [];
  private readonly releases: Array<() => void> = [];
  running = 0;
  maxRunning = 0;

  send = (batch: readonly StreamRecord[]): Promise<void> => {
    this.calls.push(batch.map((r) => r.value));
    this.running++;
    this.maxRunning = Math.max(this.maxRunning, this.running);
    return new Promise<void>((resolve) =>
      this.releases.push(() => {
        this.running--;
        resolve();
      }),
    );
  };

  /** End the oldest running call, and let the queue go on. */
  async releaseOne(): Promise<void> {
    this.releases.shift()?.();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe("StreamQueue", () => {
  it("hands records over in order, one call at a time; batches that waited go out together", async () => {
    const backend = new HeldCalls();
    const queue = new StreamQueue("held", backend.send);
    queue.push(records(0, 2));
    queue.push(records(2, 3));
    queue.push(records(5, 1));
    assert.deepEqual(backend.calls, [[0, 1]], "one call runs; the others wait for it");
    assert.equal(queue.backlog, 6);
    await backend.releaseOne();
    assert.deepEqual(
      backend.calls,
      [
        [0, 1],
        [2, 3, 4, 5],
      ],
      "the two waiting batches go out in one call",
    );
    await backend.releaseOne();
    assert.equal(queue.backlog, 0);
    assert.equal(backend.maxRunning, 1);
  });

  it("a call takes at most MAX_CALL_RECORDS waiting records; a larger single batch goes alone", async () => {
    const backend = new HeldCalls();
    const queue = new StreamQueue("held", backend.send);
    queue.push(records(0, 1));
    queue.push(records(1, MAX_CALL_RECORDS - 1));
    queue.push(records(MAX_CALL_RECORDS, 1));
    queue.push(records(MAX_CALL_RECORDS + 1, MAX_CALL_RECORDS + 5));
    await backend.releaseOne();
    await backend.releaseOne();
    await backend.releaseOne();
    assert.deepEqual(
      backend.calls.map((c) => c.length),
      [1, MAX_CALL_RECORDS, MAX_CALL_RECORDS + 5],
    );
    assert.deepEqual(
      backend.calls.flat(),
      Array.from({ length: 2 * MAX_CALL_RECORDS + 6 }, (_, i) => i),
    );
  });

  it("a synchronous backend gets each batch within push", () => {
    const got: number[] = [];
    const queue = new StreamQueue("sync", (batch) => void got.push(...batch.map((r) => r.value)));
    queue.push(records(0, 2));
    assert.deepEqual(got, [0, 1]);
    queue.push(records(2, 1));
    assert.deepEqual(got, [0, 1, 2]);
    assert.equal(queue.backlog, 0);
  });

  it("past its backlog bound a batch is dropped for this backend, counted and reported once", async () => {
    const backend = new HeldCalls();
    const queue = new StreamQueue("held", backend.send, 10);
    const seen = await collectDiagnostics(() => {
      queue.push(records(0, 6));
      queue.push(records(6, 4));
      queue.push(records(10, 1));
      queue.push(records(11, 3));
    });
    assert.equal(queue.backlog, 10);
    assert.equal(queue.dropped, 4);
    assert.equal(queue.takeDropped(), 4);
    assert.equal(queue.takeDropped(), 0, "taken once per flush");
    assert.deepEqual(
      seen.filter((d) => d.code === "stream.backlogFull:held").map((d) => d.count),
      [1, 2],
    );
    await backend.releaseOne();
    await backend.releaseOne();
    assert.deepEqual(
      backend.calls.flat(),
      Array.from({ length: 10 }, (_, i) => i),
      "what was kept arrives in order",
    );
  });

  it("settled() waits for what was pushed before it, not for what comes after", async () => {
    const backend = new HeldCalls();
    const queue = new StreamQueue("held", backend.send);
    queue.push(records(0, 1));
    let done: boolean | undefined;
    void queue.settled(60_000).then((v) => (done = v));
    queue.push(records(1, 1));
    await backend.releaseOne();
    assert.equal(done, true, "the record pushed before settled() was delivered; the later one is still queued");
    assert.equal(queue.backlog, 1);
    await backend.releaseOne();
  });

  it("settled(waitMs) gives up at its deadline while the backend hangs, and says so", async () => {
    mock.timers.enable({ apis: ["setTimeout"] });
    try {
      const backend = new HeldCalls();
      const queue = new StreamQueue("held", backend.send);
      queue.push(records(0, 3));
      let done: boolean | undefined;
      void queue.settled(250).then((v) => (done = v));
      mock.timers.tick(249);
      await Promise.resolve();
      assert.equal(done, undefined);
      mock.timers.tick(1);
      await Promise.resolve();
      assert.equal(done, false);
      assert.equal(queue.backlog, 3, "the records are still its backlog");
    } finally {
      mock.timers.reset();
    }
  });
});

describe("BackendSet stream queues", () => {
  const context = (name: string): BackendContext => ({
    backendName: name,
    displayName: "r0",
    loggingMode: "per_rank_no_reduce",
    role: "rank",
    identity: { rank: 0, rankName: "r0", processName: "R", localRank: 0, localWorldSize: 1 },
    runDir: ".",
    experiment: "e",
    trial: "t",
    resumeStep: 0,
    primaryMetadata: {},
  });

  it("a hung stream backend costs only itself: the other gets everything at once, its backlog and drops are counted per flush and in deliveryStats", async () => {
    let hung = 0;
    const fast: number[] = [];
    const releases: Array<() => void> = [];
    registerBackend("streamHung", () => ({
      logBatch() {},
      logStream: (batch: readonly StreamRecord[]) => {
        hung += batch.length;
        return new Promise<void>((resolve) => releases.push(resolve));
      },
    }));
    registerBackend("streamFast", () => ({
      logBatch() {},
      logStream: (batch: readonly StreamRecord[]) => void fast.push(...batch.map((r) => r.value)),
    }));
    const validated = await validateBackendsConfig({
      streamHung: { loggingMode: "per_rank_no_reduce" },
      streamFast: { loggingMode: "per_rank_no_reduce" },
    });
    const set = await BackendSet.start(validated, (v) => context(v.type), 60_000);

    const value = (states: KeyState[], key: string): number | undefined => {
      const s = states.find((st) => st.key === key)?.state;
      return s !== undefined && "sum" in s ? Number(s.sum) : undefined;
    };
    assert.deepEqual(set.takeUndeliveredStates(), [], "no stream counts before any backlog");

    const big = Math.floor(MAX_BACKLOG_RECORDS * 0.6);
    await collectDiagnostics(() => {
      set.logStream(records(0, big));
      set.logStream(records(big, big));
      set.logStream(records(2 * big, 5));
    });
    assert.equal(fast.length, 2 * big + 5, "the healthy backend got every record, at once");
    assert.equal(hung, big, "the hung one got its first call only");
    const states = set.takeUndeliveredStates();
    assert.equal(value(states, "rankscope/stream_backlog/streamHung"), big + 5);
    assert.equal(value(states, "rankscope/stream_backend_dropped/streamHung"), big);
    assert.equal(
      value(states, "rankscope/stream_backlog/streamFast"),
      undefined,
      "a backend never behind logs no counts",
    );
    assert.deepEqual(set.deliveryStats()["streamHung"], {
      late: 0,
      skipped: 0,
      failed: 0,
      undelivered: 0,
      streamBacklog: big + 5,
      streamDropped: big,
    });
    assert.equal(
      value(set.takeUndeliveredStates(), "rankscope/stream_backend_dropped/streamHung"),
      0,
      "drops are counted once, at the next flush",
    );

    // Released: the backlog goes out (in one more call) and a settle returns.
    releases.shift()?.();
    await new Promise((resolve) => setImmediate(resolve));
    releases.shift()?.();
    await set.settleStream(60_000);
    assert.equal(hung, big + 5);
    assert.equal(
      value(set.takeUndeliveredStates(), "rankscope/stream_backlog/streamHung"),
      0,
      "once behind, its backlog is logged at every flush, back to 0",
    );
    await set.finish();
  });
});
