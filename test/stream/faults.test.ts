/**
 * Write faults and slow sinks: the user's loop goes on, one clear error is reported, every lost
 * record is counted, and memory stays bounded by the ring.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { closeSync, createReadStream, existsSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, it } from "node:test";
import { resetDiagnostics, setDiagnosticHandler, type Diagnostic } from "../../src/core/diagnostics.js";
import { flushStream, startStream, stopStream, streamStats, streamValues } from "../../src/stream/stream.js";
import { collectDiagnostics, tempDir, waitFor } from "../helpers.js";
import { readStream, runChild, STREAM_CHILD } from "./helpers.js";

afterEach(async () => {
  await stopStream();
});

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const SHORT = new Float32Array([1, 2, 3, 4]);
/** 512 values: ~4.6 KB lines, so even a few dozen make a write long enough for the file thread. */
const LONG = new Float32Array(512).map((_, i) => Math.sin(i));

/** Stream `count` probes in chunks, yielding between chunks as a real loop with I/O would. */
async function streamChunks(count: number, from = 0, values: Float32Array = SHORT): Promise<void> {
  for (let i = from; i < from + count; i++) {
    streamValues("x", values, i);
    if (i % 1000 === 999) await yieldToLoop();
  }
}

/**
 * Every fault, with the writes made on the writer's file thread (the default; the test first waits
 * until it runs) and made by the writer itself (`fileThread: false`).
 */
for (const fileThread of [true, false]) {
  describe(
    `stream write faults, writes made ${fileThread ? "on the file thread" : "by the writer"}`,
    { skip: !existsSync("/dev/full") && "no /dev/full here" },
    () => {
      /**
       * Start a stream on this path and wait until it runs there. With the file thread, probes carry
       * 512 values: only writes of 128 KB or more go to the file thread (shorter ones are made by the
       * writer), and 100 of these lines make ~460 KB.
       */
      async function start(file: string): Promise<void> {
        startStream({ file, flushMs: 10, fileThread, values: fileThread ? 512 : 10 });
        if (fileThread)
          await waitFor(() => streamStats().fileThread, {
            timeoutMs: 20_000,
            what: "the file thread to run",
            intervalMs: 10,
          });
      }
      const probe = fileThread ? LONG : SHORT;

      it("/dev/full (ENOSPC): the loop finishes, one clear error, every record counted as dropped, memory bounded", async () => {
        const N = 300_000;
        const result = await runChild(STREAM_CHILD, ["devfull", String(N)], {
          RANKSCOPE_STREAM_FILE: "/dev/full",
          RANKSCOPE_STREAM_FLUSH_MS: "20",
          RANKSCOPE_STREAM_FILE_THREAD: String(fileThread),
        });
        assert.equal(result.code, 0, result.stderr);
        const report = JSON.parse(result.stdout.trim().split("\n").pop() as string) as {
          counts: Record<string, number>;
          rssGrowth: number;
          fileThread: boolean;
        };
        assert.equal(report.counts["written"], 0);
        assert.equal(
          report.counts["dropped"],
          N,
          "every record is either dropped at the ring or counted as a failed write",
        );
        assert.equal((report.counts["ringFull"] ?? 0) + (report.counts["writeFailed"] ?? 0), N);
        const errors = result.stderr.split("\n").filter((l) => l.includes("[rankscope] error"));
        assert.equal(errors.length, 1, result.stderr);
        assert.match(
          errors[0] as string,
          /could not write \/dev\/full: ENOSPC.*dropped and counted \(rankscope\/stream_dropped\)/,
        );
        assert.ok(report.rssGrowth < 64 * 1024 * 1024, `rss grew by ${report.rssGrowth} bytes`);
        assert.equal(report.fileThread, fileThread, "the writes were made on the path under test");
      });

      it("a directory that vanishes: one error, the lost records counted, the loop unaffected", async () => {
        const dir = join(tempDir(), "run");
        const file = join(dir, "streams", "rank-0.jsonl");
        const seen = await collectDiagnostics(async () => {
          await start(file);
          await streamChunks(100, 0, probe);
          await flushStream();
          assert.equal(streamStats().written, 100);
          assert.equal(streamStats().fileThread, fileThread);
          rmSync(dir, { recursive: true, force: true });
          let from = 100;
          await waitFor(
            async () => {
              await streamChunks(100, from, probe);
              from += 100;
              await flushStream();
              return streamStats().writeFailed > 0;
            },
            { timeoutMs: 20_000, what: "a write to fail after the folder was removed", intervalMs: 0 },
          );
          await streamChunks(1000, from, probe);
          await stopStream();
        });
        const stats = streamStats();
        assert.ok(stats.writeFailed > 0);
        assert.equal(stats.dropped, stats.writeFailed + stats.ringFull);
        const errors = seen.filter((d) => d.level === "error");
        assert.equal(errors.length, 1, JSON.stringify(errors));
        assert.match(errors[0]?.message ?? "", /rank-0\.jsonl was deleted \(or its directory removed\)/);
        assert.equal(existsSync(dir), false, "the directory is not silently recreated");
      });

      it(
        "a descriptor closed under the writer: one error, lost records counted, then writing resumes",
        { skip: !existsSync("/proc/self/fd") && "needs /proc/self/fd" },
        async () => {
          const file = join(tempDir(), "closed.jsonl");
          // Collected here rather than with collectDiagnostics: the loop below waits for the error.
          resetDiagnostics();
          const seen: Diagnostic[] = [];
          const restore = setDiagnosticHandler((d) => seen.push(d), { everyTime: true });
          try {
            await start(file);
            await streamChunks(100, 0, probe);
            await flushStream();
            // Find the writer's descriptor of the file and close it from this thread (same process).
            const fd = readdirSync("/proc/self/fd")
              .map(Number)
              .find((n) => {
                try {
                  return readlinkSync(`/proc/self/fd/${n}`) === file;
                } catch {
                  return false;
                }
              });
            assert.notEqual(fd, undefined, "the writer holds the file open");
            assert.equal(streamStats().fileThread, fileThread);
            closeSync(fd as number);
            // The writer notices at its next write (EBADF: those records are lost and counted) or at its
            // periodic check of the file (EBADF from fstat: nothing lost), whichever comes first; either
            // way it reports once and reopens the file.
            let from = 100;
            await waitFor(
              () => {
                for (const end = from + 100; from < end; from++) streamValues("x", probe, from);
                return seen.some((d) => d.level === "error");
              },
              { timeoutMs: 20_000, what: "the writer to report the closed descriptor", intervalMs: 10 },
            );
            const reportedAt = streamStats().written;
            await waitFor(
              () => {
                streamValues("x", [1], -1);
                return streamStats().written > reportedAt;
              },
              { timeoutMs: 20_000, what: "writing to resume after the file is reopened", intervalMs: 10 },
            );
            await stopStream();
          } finally {
            restore();
          }
          const errors = seen.filter((d) => d.level === "error");
          assert.equal(errors.length, 1, JSON.stringify(errors));
          assert.match(errors[0]?.message ?? "", /could not write .*closed\.jsonl: EBADF/);
          const stats = streamStats();
          const { records } = readStream(file);
          assert.equal(records.length, stats.written, "what was counted as written is in the file");
          assert.equal(stats.dropped, stats.writeFailed + stats.ringFull, "every lost record is counted");
        },
      );
    },
  );
}

describe("long lines", () => {
  it("are written a megabyte at a time, so the writer's memory stays bounded", async () => {
    // Probes of 2,048 doubles make ~45 KB lines: 4,096 of them (a full write by count) would
    // need a 180 MB buffer.
    const file = join(tempDir(), "long.jsonl");
    startStream({ file, capacity: 4096, values: 2048, batchSize: 1 << 20, flushMs: 3_600_000 });
    const data = new Float64Array(2048).map((_, i) => Math.sin(i) / 3);
    streamValues("long", data, -1);
    // Measure from when every thread of the stream runs (a thread's own start costs memory too).
    await waitFor(() => streamStats().fileThread, {
      timeoutMs: 20_000,
      what: "the file thread to run",
      intervalMs: 10,
    });
    await flushStream();
    const before = process.memoryUsage().rss;
    let growth = 0;
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 4000; i++) streamValues("long", data, i);
      // The ring holds 4,096 lines: the next round may start only when this one is written. The
      // default wait is bounded for users' loops; on a loaded machine 4,000 45 KB lines outlast it.
      await flushStream(60_000);
      growth = Math.max(growth, process.memoryUsage().rss - before);
    }
    const counts = await stopStream();
    assert.equal(counts?.written, 12_001);
    assert.ok(growth < 64 * 1024 * 1024, `rss grew by ${(growth / 1e6).toFixed(0)} MB`);
  });
});

describe("a slow sink", { skip: process.platform === "win32" && "needs mkfifo" }, () => {
  it("keeps memory bounded by the ring and never makes the producer wait", async () => {
    const fifo = join(tempDir(), "slow.fifo");
    execFileSync("mkfifo", [fifo]);
    // A reader that takes one small chunk every 20 ms: far slower than the producer.
    const reader = createReadStream(fifo, { highWaterMark: 4096 });
    let readBytes = 0;
    reader.on("data", (chunk) => {
      readBytes += chunk.length;
      reader.pause();
      setTimeout(() => reader.resume(), 20);
    });
    startStream({ file: fifo, capacity: 4096, flushMs: 10 });
    // Wait until the writer has the pipe open and writes, and the reader reads what it wrote, so the
    // sink really is the slow reader. (Waiting for the reader's first chunk here, not checking for
    // one after the producer ran: on a loaded machine the reader's thread-pool read could land
    // after the producer's 400,000 records.)
    await waitFor(
      () => {
        streamValues("warmup", [0], 0);
        return streamStats().written > 0 && readBytes > 0;
      },
      { timeoutMs: 20_000, what: "the writer to write into the pipe and the reader to read it", intervalMs: 10 },
    );
    const startCounts = streamStats();
    const rssBefore = process.memoryUsage().rss;
    const N = 400_000;
    await streamChunks(N);
    const rssGrowth = process.memoryUsage().rss - rssBefore;
    const stats = streamStats();
    assert.ok(stats.ringFull > 0, "records were dropped at the full ring instead of waiting");
    assert.ok(rssGrowth < 64 * 1024 * 1024, `rss grew by ${rssGrowth} bytes`);
    // Let the reader catch up so the writer can finish.
    reader.removeAllListeners("data");
    reader.on("data", () => {});
    reader.resume();
    const counts = await stopStream();
    const total =
      (counts?.written ?? 0) +
      (counts?.ringFull ?? 0) -
      startCounts.written -
      startCounts.ringFull -
      startCounts.pending;
    assert.equal(total, N, "every record is written or counted as dropped");
    reader.destroy();
  });
});
