/**
 * The stream in one process with its real writer thread: exact counts below capacity, drops when
 * full, the probe line format, configuration, and per_rank_no_reduce backends fed through the ring.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, it } from "node:test";
import { resolveStreamConfig } from "../../src/stream/config.js";
import { float32Text } from "../../src/stream/format.js";
import { recordMetric, Reduce } from "../../src/index.js";
import { getCollector } from "../../src/core/collector.js";
import { MessageChannel, Worker } from "node:worker_threads";
import {
  attachStreamLink,
  flushStream,
  metricStreamProducer,
  startStream,
  stopStream,
  streamLinkForWorker,
  streamStats,
  streamValues,
} from "../../src/stream/stream.js";
import { collectDiagnostics, tempDir, waitFor } from "../helpers.js";
import { readStream } from "./helpers.js";

afterEach(async () => {
  await stopStream();
});

describe("stream file", () => {
  it("holds exactly the N values written below capacity, in order", async () => {
    const file = join(tempDir(), "exact.jsonl");
    startStream({ file, capacity: 65536, batchSize: 512, flushMs: 50 });
    const N = 50_000;
    const startedAt = Date.now();
    const data = new Float64Array(1);
    for (let i = 0; i < N; i++) {
      data[0] = i;
      streamValues("x", data, i);
    }
    await flushStream();
    assert.equal(streamStats().written, N, "flushStream waits until everything streamed so far is written");
    const counts = await stopStream();
    const { records, ends } = readStream(file);
    assert.equal(records.length, N);
    assert.ok(records.every((r, i) => r["index"] === i && (r["values"] as number[])[0] === i));
    // Stamped when recorded (to about a millisecond; the bound here only catches nonsense).
    const endedAt = Date.now();
    assert.ok(
      records.every(
        (r) => Date.parse(r["ts"] as string) >= startedAt - 5000 && Date.parse(r["ts"] as string) <= endedAt + 5000,
      ),
    );
    assert.deepEqual(counts, { written: N, dropped: 0, ringFull: 0, writeFailed: 0, backendDropped: 0 });
    assert.equal(ends.length, 1);
    assert.equal(ends[0]?.["stream_end"], "stop");
  });

  it("makes its writes on the file thread by default, every metric value in the file in order", async () => {
    const file = join(tempDir(), "threaded.jsonl");
    startStream({ file, capacity: 1 << 17, batchSize: 512, flushMs: 50 });
    const collector = getCollector();
    collector.stream = metricStreamProducer();
    try {
      recordMetric("threaded/x", -1, Reduce.SUM);
      await waitFor(() => streamStats().fileThread, {
        timeoutMs: 20_000,
        what: "the file thread to run",
        intervalMs: 10,
      });
      const N = 100_000; // many writes of 4096 lines: buffers handed over and reused many times
      for (let i = 0; i < N; i++) {
        recordMetric("threaded/x", i + 0.5, Reduce.SUM);
        if (i % 10_000 === 9_999) await flushStream();
      }
      await flushStream();
      assert.equal(streamStats().written, N + 1);
    } finally {
      collector.stream = null;
    }
    await stopStream();
    const { records } = readStream(file);
    assert.equal(records.length, 100_001);
    assert.ok(
      records.every((r, i) => r["value"] === (i === 0 ? -1 : i - 0.5)),
      "every value, in order",
    );
  });

  it("ends a stream that took no record without a final line (an idle controller beside rank 0)", async () => {
    const file = join(tempDir(), "shared-rank-0.jsonl");
    startStream({ file });
    assert.deepEqual(await stopStream(), { written: 0, dropped: 0, ringFull: 0, writeFailed: 0, backendDropped: 0 });
    startStream({ file });
    streamValues("x", [1], 0);
    await stopStream();
    const { records, ends } = readStream(file);
    assert.equal(records.length, 1);
    assert.equal(ends.length, 1, "only the stream that took a record says how it ended");
    assert.equal(ends[0]?.["written"], 1);
  });

  it("drops and counts when the ring is full, and the producer never waits", async () => {
    const file = join(tempDir(), "full.jsonl");
    // A writer that will not wake before stop: the ring can only hold its capacity.
    startStream({ file, capacity: 1024, batchSize: 1 << 20, flushMs: 3_600_000 });
    const values = [1, 2, 3];
    for (let i = 0; i < 5000; i++) streamValues("x", values, i);
    assert.equal(streamStats().ringFull, 5000 - 1024);
    const counts = await stopStream();
    assert.equal(counts?.written, 1024);
    assert.equal(counts?.ringFull, 3976);
    assert.equal(counts?.dropped, 3976);
    const { records, ends } = readStream(file);
    assert.deepEqual(
      records.map((r) => r["index"]),
      Array.from({ length: 1024 }, (_, i) => i),
      "the first 1024 were kept",
    );
    assert.equal(ends[0]?.["dropped"], 3976, "the final line says how many were dropped");
  });

  it("writes probes as {ts, rank, checkpoint, index, dtype, length, values}", async () => {
    const file = join(tempDir(), "probes.jsonl");
    startStream({ file, values: 4 });
    streamValues("logits", new Float32Array([0.1, -2.5, NaN, Infinity, 7]), 3);
    streamValues("hidden", new Float64Array([0.1, 1e-300]), 4);
    streamValues("plain", [1, 2], 5);
    streamValues("empty", [], 6);
    await stopStream();
    const lines = readFileSync(file, "utf8").trim().split("\n");
    const parsed = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const p of parsed.slice(0, 4)) {
      assert.deepEqual(Object.keys(p), ["ts", "rank", "checkpoint", "index", "dtype", "length", "values"]);
      assert.match(p["ts"] as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      assert.equal(p["rank"], 0);
    }
    assert.match(
      lines[0] as string,
      /"checkpoint":"logits","index":3,"dtype":"f32","length":5,"values":\[0\.1,-2\.5,"NaN","Infinity"\]\}$/,
    );
    assert.match(
      lines[1] as string,
      /"checkpoint":"hidden","index":4,"dtype":"f64","length":2,"values":\[0\.1,1e-300\]\}$/,
    );
    assert.match(lines[2] as string, /"checkpoint":"plain","index":5,"dtype":"number","length":2,"values":\[1,2\]\}$/);
    assert.match(lines[3] as string, /"checkpoint":"empty","index":6,"dtype":"number","length":0,"values":\[\]\}$/);
  });

  it("writes float32 values in their shortest form that reads back exactly", () => {
    for (const v of [0.1, 1 / 3, 123456.789, 1e-38, -0.5, 3.4028234663852886e38]) {
      const f = Math.fround(v);
      const text = float32Text(f);
      assert.equal(Math.fround(Number(text)), f, `${text} reads back as ${f}`);
      assert.ok(text.length <= 15, text);
    }
    assert.equal(float32Text(Math.fround(0.1)), "0.1");
  });

  it("rejects bad probe arguments with a clear error", async () => {
    startStream({ file: join(tempDir(), "bad.jsonl") });
    assert.throws(
      () => streamValues("x", 5 as unknown as number[], 0),
      /takes a Float32Array, a Float64Array or an array of numbers/,
    );
    assert.throws(() => streamValues("x", [1], "3" as unknown as number), /numeric index/);
    assert.throws(() => streamValues("", [1], 0), /checkpoint must be a non-empty string/);
  });

  it("warns once and counts when nothing says where the stream goes", async () => {
    await stopStream();
    const before = streamStats().noDestination;
    const seen = await collectDiagnostics(() => {
      for (let i = 0; i < 3; i++) streamValues("x", [1], i);
    });
    assert.equal(streamStats().noDestination - before, 3);
    assert.equal(seen.filter((d) => d.code === "stream.noDestination").length, 3);
    assert.match(seen[0]?.message ?? "", /RANKSCOPE_STREAM_FILE/);
  });
});

describe("metric records on the stream", () => {
  it("name each key once, and stay right when the collector is cleared and reuses ids", async () => {
    const file = join(tempDir(), "keys.jsonl");
    const collector = getCollector();
    collector.clear();
    collector.stream = metricStreamProducer({ file });
    try {
      recordMetric("first", 1, Reduce.MEAN);
      recordMetric("first", 2, Reduce.MEAN);
      collector.clear();
      recordMetric("second", 3, Reduce.SUM);
    } finally {
      collector.stream = null;
    }
    await stopStream();
    const { records } = readStream(file);
    assert.deepEqual(
      records.map((r) => [r["key"], r["value"], r["step"]]),
      [
        ["first", 1, 0],
        ["first", 2, 0],
        ["second", 3, 0],
      ],
    );
    assert.deepEqual(Object.keys(records[0] ?? {}), ["ts", "rank", "key", "value", "step"]);
  });

  it("name keys right in a second stream after the first stopped", async () => {
    const collector = getCollector();
    collector.clear();
    const files = [join(tempDir(), "one.jsonl"), join(tempDir(), "two.jsonl")];
    for (const [n, file] of files.entries()) {
      collector.stream = metricStreamProducer({ file });
      recordMetric("loss", n, Reduce.MEAN);
      collector.stream = null;
      await stopStream();
    }
    assert.deepEqual(
      files.map((f) => readStream(f).records.map((r) => [r["key"], r["value"]])),
      [[["loss", 0]], [["loss", 1]]],
    );
  });
});

describe("stream configuration", () => {
  it("takes the environment when no option is given", () => {
    const config = resolveStreamConfig(
      {},
      {
        RANKSCOPE_STREAM_FILE: "s.jsonl",
        RANKSCOPE_STREAM_BATCH: "7",
        RANKSCOPE_STREAM_FLUSH_MS: "20",
        RANKSCOPE_STREAM_VALUES: "3",
        RANKSCOPE_STREAM_CAPACITY: "64",
        RANKSCOPE_STREAM_EXIT_WAIT_MS: "500",
      },
    );
    assert.deepEqual(
      { ...config, file: config.file?.endsWith("s.jsonl") },
      {
        file: true,
        batchSize: 7,
        flushMs: 20,
        values: 3,
        capacity: 64,
        exitWaitMs: 500,
        handleSignals: true,
        fileThread: true,
      },
    );
  });

  it("uses defaults when nothing is set", () => {
    assert.deepEqual(resolveStreamConfig({}, {}), {
      file: undefined,
      batchSize: 100,
      flushMs: 1000,
      values: 10,
      capacity: 16384,
      exitWaitMs: 2000,
      handleSignals: true,
      fileThread: true,
    });
  });

  it("turns the file thread off from the environment or an option; the option wins, with a warning", async () => {
    assert.equal(resolveStreamConfig({}, { RANKSCOPE_STREAM_FILE_THREAD: "0" }).fileThread, false);
    assert.equal(resolveStreamConfig({ fileThread: false }, {}).fileThread, false);
    let config;
    const seen = await collectDiagnostics(
      () => (config = resolveStreamConfig({ fileThread: true }, { RANKSCOPE_STREAM_FILE_THREAD: "off" })),
    );
    assert.equal(config!["fileThread"], true);
    assert.match(seen[0]?.message ?? "", /fileThread=true overrides RANKSCOPE_STREAM_FILE_THREAD=off/);
    assert.throws(() => resolveStreamConfig({}, { RANKSCOPE_STREAM_FILE_THREAD: "maybe" }), {
      name: "TypeError",
      message: `RANKSCOPE_STREAM_FILE_THREAD="maybe" is not valid (it sets startStream's fileThread); valid: true/1/yes/on or false/0/no/off`,
    });
    assert.throws(
      () => resolveStreamConfig({ fileThread: "yes" } as never, {}),
      /startStream: fileThread must be true\/1\/yes\/on or false\/0\/no\/off, got "yes"/,
    );
  });

  it("lets an explicit option win over the environment, with a warning naming both", async () => {
    let config;
    const seen = await collectDiagnostics(() => {
      config = resolveStreamConfig(
        { batchSize: 5, file: "a.jsonl" },
        { RANKSCOPE_STREAM_BATCH: "7", RANKSCOPE_STREAM_FILE: "b.jsonl" },
      );
    });
    assert.equal(config!["batchSize"], 5);
    assert.match(String(config!["file"]), /a\.jsonl$/);
    assert.deepEqual(seen.map((d) => d.code).sort(), [
      "settings.override:startStream.batchSize",
      "settings.override:startStream.file",
    ]);
    assert.match(
      seen.find((d) => d.code === "settings.override:startStream.batchSize")?.message ?? "",
      /batchSize=5 overrides RANKSCOPE_STREAM_BATCH=7/,
    );
  });

  it("does not warn when option and environment agree", async () => {
    const seen = await collectDiagnostics(() => resolveStreamConfig({ values: 4 }, { RANKSCOPE_STREAM_VALUES: "4" }));
    assert.deepEqual(seen, []);
  });

  it("rejects a bad option or environment value with what is valid (the one settings policy)", () => {
    assert.throws(
      () => resolveStreamConfig({ capacity: 0 }, {}),
      /capacity must be an integer from 2 to 16777216, got 0/,
    );
    assert.throws(() => resolveStreamConfig({ flushMs: "fast" } as never, {}), /flushMs must be an integer/);
    assert.throws(
      () => resolveStreamConfig({ batch: 3 } as never, {}),
      /unknown option "batch"; valid: file, batchSize/,
    );
    assert.throws(() => resolveStreamConfig({}, { RANKSCOPE_STREAM_BATCH: "lots" }), {
      name: "TypeError",
      message: `RANKSCOPE_STREAM_BATCH="lots" is not valid (it sets startStream's batchSize); valid: an integer from 1 to 1048576`,
    });
  });
});

describe("a worker thread of the user", () => {
  it("streams through the main thread's writer into the same file, every value in order", async () => {
    const file = join(tempDir(), "threads.jsonl");
    startStream({ file, capacity: 65536 });
    const port = streamLinkForWorker();
    const api = import.meta.resolve("tsx/esm/api");
    const entry = new URL("./fixtures/linked-worker.ts", import.meta.url).href;
    const N = 20_000;
    const worker = new Worker(
      `import(${JSON.stringify(api)}).then((tsx) => tsx.tsImport(${JSON.stringify(entry)}, ${JSON.stringify(import.meta.url)}))`,
      {
        eval: true,
        workerData: { port, n: N },
        transferList: [port],
      },
    );
    for (let i = 0; i < N; i++) streamValues("main", [i], i);
    await new Promise<void>((resolve, reject) => {
      worker.once("message", () => resolve());
      worker.once("error", reject);
    });
    await worker.terminate();
    const counts = await stopStream();
    const { records } = readStream(file);
    for (const who of ["main", "worker"]) {
      const mine = records.filter((r) => r["checkpoint"] === who);
      assert.deepEqual(
        mine.map((r) => r["index"]),
        Array.from({ length: N }, (_, i) => i),
        `${who}: all, in order`,
      );
    }
    assert.equal(counts?.written, 2 * N);
    assert.equal(counts?.dropped, 0);
  });

  it("says clearly when the port is not a stream link", () => {
    const { port1 } = new MessageChannel();
    assert.throws(() => attachStreamLink(port1), /takes the port returned by streamLinkForWorker\(\)/);
    port1.close();
  });
});
