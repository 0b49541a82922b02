/**
 * W&B backend benchmark: history lines encoded per second (flush rows and stream rows), lines
 * delivered per second to a local server on 127.0.0.1 (a minimal stand-in for W&B: the cloud is
 * not reachable here), and the memory of the send queue during an outage against its bound.
 * Prints a markdown table.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BackendContext } from "../src/backends/backend.js";
import { WandbBackend } from "../src/backends/wandb/index.js";
import { setDiagnosticHandler } from "../src/core/diagnostics.js";
import type { Metric, StreamRecord } from "../src/core/metric.js";

setDiagnosticHandler(() => {});
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
const rows: string[][] = [];

/** Wall seconds and CPU seconds (user + system) of `fn`: the machine is shared, CPU time is the steadier figure. */
function timed(fn: () => void): { wall: number; cpu: number } {
  gc();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  fn();
  const wall = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  return { wall, cpu: (c.user + c.system) / 1e6 };
}

const rate = (n: number, s: number): string => Math.round(n / s).toLocaleString("en-US");

function context(runDir: string, mode: BackendContext["loggingMode"]): BackendContext {
  return {
    backendName: "wandb",
    displayName: "bench",
    loggingMode: mode,
    role: mode === "global_reduce" ? "controller" : "rank",
    identity: { rank: 0, rankName: "bench_r0", processName: "bench", localRank: 0, localWorldSize: 1 },
    runDir,
    experiment: "bench",
    trial: "t",
    resumeStep: 0,
    primaryMetadata: {},
  };
}

/**
 * A local server that answers the W&B calls the client makes (run upsert and resume status, run
 * files and their uploads, the file stream) and counts history lines.
 */
async function sinkServer(): Promise<{ server: Server; url: string; lines: () => number }> {
  let lines = 0;
  let url = "";
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method === "PUT") {
        res.writeHead(200).end(); // a run file's upload
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>;
      res.writeHead(200, { "content-type": "application/json" });
      if (req.url === "/graphql") {
        const v = body["variables"] as { name: string; project: string; files?: string[] };
        const files = (v.files ?? []).map((name) => ({ name, uploadUrl: `${url}/upload/${encodeURIComponent(name)}` }));
        res.end(
          JSON.stringify({
            data: {
              model: { bucket: null },
              upsertBucket: {
                bucket: { id: "1", name: v.name, project: { name: v.project, entity: { name: "e" } } },
                inserted: true,
              },
              createRunFiles: { runID: "1", uploadHeaders: [], files },
            },
          }),
        );
        return;
      }
      const files = body["files"] as Record<string, { content: string[] }> | undefined;
      lines += files?.["wandb-history.jsonl"]?.content.length ?? 0;
      res.end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { server, url, lines: () => lines };
}

/**
 * An outage: a server that drops every connection at once. (Keeping the port bound, instead of
 * closing it, means no other process on this machine can take the port and receive our requests.)
 */
async function outageServer(): Promise<{ server: Server; url: string }> {
  const server = createServer();
  server.on("connection", (socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function metrics(n: number, step: number, now: number): Metric[] {
  return Array.from({ length: n }, (_, i) => ({
    key: `train/metric_${i}`,
    value: step * 0.001 + i,
    reduce: "mean",
    step,
    timestamp: now,
  }));
}

const runDir = mkdtempSync(join(tmpdir(), "rankscope-bench-wandb-"));
const sink = await sinkServer();

// 1. Encoding: rows of 20 scalars per flush, queued for a server that answers (no waiting on it).
{
  const backend = new WandbBackend({
    loggingMode: "global_reduce",
    baseUrl: sink.url,
    apiKey: "bench",
    runId: "enc-flush",
    maxQueuedBytes: 1 << 30,
    sendIntervalMs: 60_000,
  });
  await backend.init(context(runDir, "global_reduce"));
  const batches = Array.from({ length: 1000 }, (_, s) => metrics(20, s, Date.now()));
  const steps = 100_000;
  const t = timed(() => {
    for (let step = 0; step < steps; step++) {
      backend.logBatch(batches[step % 1000] as Metric[], step);
      void backend.flushed(); // live: returns nothing (only a spooling writer waits for the disk)
    }
  });
  rows.push([
    "history rows encoded (flush, 20 scalars/row)",
    `${rate(steps, t.cpu)} rows per CPU-s (${rate(steps * 20, t.cpu)} values)`,
    `wall: ${rate(steps, t.wall)} rows/s`,
  ]);
  await backend.finish();
}

// 2. Encoding: stream rows (one raw value per row, with global_step and its own _timestamp).
{
  const backend = new WandbBackend({
    loggingMode: "per_rank_no_reduce",
    baseUrl: sink.url,
    apiKey: "bench",
    runId: "enc-stream",
    maxQueuedBytes: 1 << 30,
    sendIntervalMs: 60_000,
  });
  await backend.init(context(runDir, "per_rank_no_reduce"));
  const now = Date.now();
  const batch: StreamRecord[] = Array.from({ length: 1000 }, (_, i) => ({
    key: "probe/latency",
    value: i * 0.5,
    step: 3,
    timestamp: now + i,
    rank: 0,
    rankName: "bench_r0",
    role: "rank",
    thread: 0,
  }));
  const batches = 1000;
  const t = timed(() => {
    for (let b = 0; b < batches; b++) backend.logStream(batch);
  });
  rows.push([
    "history lines encoded (stream, 1 value/line)",
    `${rate(batches * 1000, t.cpu)} lines per CPU-s`,
    `wall: ${rate(batches * 1000, t.wall)} lines/s`,
  ]);
  await backend.finish();
}

// 3. Delivery to a local server: encode, batch, POST, until everything is acknowledged.
{
  const backend = new WandbBackend({
    loggingMode: "per_rank_no_reduce",
    baseUrl: sink.url,
    apiKey: "bench",
    runId: "deliver",
    sendIntervalMs: 0,
    finishTimeoutMs: 300_000,
    maxQueuedBytes: 1 << 30,
  });
  await backend.init(context(runDir, "per_rank_no_reduce"));
  const now = Date.now();
  const batch: StreamRecord[] = Array.from({ length: 1000 }, (_, i) => ({
    key: "probe/latency",
    value: i * 0.5,
    step: 3,
    timestamp: now + i,
    rank: 0,
    rankName: "bench_r0",
    role: "rank",
    thread: 0,
  }));
  const start = sink.lines();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (let b = 0; b < 200; b++) {
    backend.logStream(batch);
    if (b % 10 === 0) await new Promise((resolve) => setImmediate(resolve));
  }
  await backend.finish();
  const seconds = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  const delivered = sink.lines() - start;
  if (delivered !== 200 * batch.length) {
    // A figure of a delivery that did not happen would read as a (slow) success: fail the bench.
    process.stderr.write(
      `wandb bench: the local server received ${delivered} of ${200 * batch.length} history lines\n`,
    );
    process.exitCode = 1;
  }
  rows.push([
    "history lines delivered to a local server (127.0.0.1, same process)",
    `${rate(delivered, (c.user + c.system) / 1e6)} lines per CPU-s (client + server)`,
    `wall: ${rate(delivered, seconds)} lines/s; ${delivered.toLocaleString("en-US")} lines in 1 MiB requests`,
  ]);
}

// 4. Outage: the server is down; the queue must stay within its bound and spill to the spool.
{
  const bound = 8 * 1024 * 1024;
  const outage = await outageServer();
  const backend = new WandbBackend({
    loggingMode: "global_reduce",
    baseUrl: outage.url,
    apiKey: "bench",
    runId: "outage",
    maxQueuedBytes: bound,
    retryBudgetMs: 600_000,
    finishTimeoutMs: 100,
  });
  await backend.init(context(runDir, "global_reduce"));
  gc();
  const heap0 = process.memoryUsage().heapUsed;
  let maxHeap = heap0;
  let maxRetained = heap0;
  const steps = 200_000;
  const batches = Array.from({ length: 100 }, (_, s) => metrics(5, s, Date.now()));
  for (let step = 0; step < steps; step++) {
    backend.logBatch(batches[step % 100] as Metric[], step);
    void backend.flushed();
    if (step % 1000 === 0) await new Promise((resolve) => setImmediate(resolve));
    if (step % 10_000 === 0) {
      maxHeap = Math.max(maxHeap, process.memoryUsage().heapUsed);
      gc();
      maxRetained = Math.max(maxRetained, process.memoryUsage().heapUsed);
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  const writer = backend.runWriter;
  await backend.finish();
  outage.server.close();
  gc();
  const mib = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MiB`;
  rows.push([
    "queue during an outage (200k rows ≈ 36 MiB of history)",
    `max queued ${mib(writer?.stats.maxQueuedBytes ?? 0)} (bound ${mib(bound)})`,
    `${(writer?.stats.linesSpooled ?? 0).toLocaleString("en-US")} lines spooled (${writer?.spoolLostChars ?? 0} chars lost to a slow disk); heap retained after GC +${mib(maxRetained - heap0)} max (send queue + the spool's disk-write buffer, bound 16 MiB), peak +${mib(maxHeap - heap0)}`,
  ]);
}

sink.server.close();
rmSync(runDir, { recursive: true, force: true });

process.stdout.write("| measure | result | notes |\n|---|---|---|\n");
for (const row of rows) process.stdout.write(`| ${row.join(" | ")} |\n`);
