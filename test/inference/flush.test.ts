/**
 * A client stream that crosses flushes, through a real logger's flush — in the controller's own
 * process, and in replica processes answering in wire frames: each flush holds the chunk times
 * measured since the one before (a mark holds its time; the collector has it appended before the
 * states are taken), and a stream never ended still has its chunks logged.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { inferenceModel } from "../../src/inference/requests.js";
import { spawnRanks } from "../../src/transport/controller/launcher.js";
import { tempDir } from "../helpers.js";
import { runLogger } from "./support.js";

/** The backends of both tests: the flush's reduced values, as JSON lines. */
const JSONL = { jsonl: { loggingMode: "global_reduce" } } as const;

const chunkCount = (metrics: readonly { key: string; value: number }[]): number | undefined =>
  metrics.find((m) => m.key.startsWith("gen_ai.client.operation.time_per_output_chunk/count{"))?.value;

test("a client stream's chunk times are in the flush they were measured in, ended or not", async () => {
  const { logger } = await runLogger(tempDir("rankscope-inference-flush-"), "client", "stream", "Client", JSONL);
  const model = inferenceModel({ model: "m", provider: "p", side: "client" });
  try {
    const ended = model.start();
    const open = model.start(); // never ended
    ended.firstToken();
    open.firstToken();
    for (let i = 0; i < 5; i++) ended.token();
    for (let i = 0; i < 2; i++) open.token();
    assert.equal(chunkCount((await logger.flush(0)).metrics), 7, "flush 0: the 7 chunks after the first ones");
    for (let i = 0; i < 3; i++) ended.token();
    assert.equal(chunkCount((await logger.flush(1)).metrics), 3, "flush 1: the 3 since");
    ended.end();
    open.token();
    const last = await logger.flush(2);
    assert.equal(chunkCount(last.metrics), 1, "flush 2: the open stream's one chunk");
    assert.ok(last.metrics.some((m) => m.key.startsWith("gen_ai.client.operation.duration/count{")));
  } finally {
    await logger.shutdown();
  }
});

test("replicas' open client streams: each flush holds the chunks each replica measured since the last", async () => {
  const { logger } = await runLogger(tempDir("rankscope-inference-flush-"), "client", "replicas", "Client", JSONL);
  try {
    const replicas = await spawnRanks({
      module: new URL("../fixtures/client-stream.ts", import.meta.url),
      replicas: 2,
      processName: "Client",
      logger,
    });
    await replicas.fanout("chunks", 4); // each: its first chunk, then 4 chunks (4 chunk times)
    assert.equal(chunkCount((await logger.flush(0)).metrics), 2 * 4);
    await replicas.fanout("chunks", 5);
    assert.equal(chunkCount((await logger.flush(1)).metrics), 2 * 5);
  } finally {
    await logger.shutdown();
  }
});
