/**
 * The dashboard server under the heaviest requests its caps allow: `/api/lines` over a run with a
 * 1M-point key, asked for as many lines as one request may carry. Measured in one process: the
 * request's wall time, the longest the event loop was held (what other requests wait at most),
 * the latency of small requests sent every 5 ms meanwhile, and the size of the answer plain and
 * gzipped. The case the issue reported (200 lines × 2,000 points of a 1M-point key, ~1 s blocked,
 * 11 MB) is now refused with a 400; its figures are shown for the read alone.
 */
import { rmSync } from "node:fs";
import { request } from "node:http";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { gunzipSync } from "node:zlib";
import { GLOBAL_RANK } from "../src/store/schema.js";
import { StoreWriter } from "../src/store/writer.js";
import { nonFiniteReplacer } from "../src/core/json.js";
import { startDashboard } from "../src/ui/server.js";
import { createStoreSource } from "../src/ui/store-source.js";
import { tempDir } from "../test/helpers.js";

const POINTS = 1_000_000;

interface Answer {
  status: number;
  bytes: number;
  encoding: string | undefined;
  body: Buffer;
}

function get(port: number, path: string, gzip: boolean): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path, headers: gzip ? { "Accept-Encoding": "gzip" } : {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const body = Buffer.concat(chunks);
          resolve({ status: res.statusCode ?? 0, bytes: body.length, encoding: res.headers["content-encoding"], body });
        });
      },
    );
    req.on("error", reject);
    req.end();
  });
}

function seed(root: string): void {
  const writer = StoreWriter.open({
    runDir: join(root, "bench", "long"),
    role: "controller",
    rank: GLOBAL_RANK,
    rankName: "controller",
    experiment: "bench",
    trial: "long",
  });
  const steps = new Float64Array(POINTS);
  const walls = new Float64Array(POINTS);
  const values = new Float64Array(POINTS);
  const t0 = Date.now() - POINTS * 10;
  for (let i = 0; i < POINTS; i++) {
    steps[i] = i;
    walls[i] = t0 + i * 10;
    values[i] = Math.exp(-i / 2e5) + 0.05 * Math.sin(i / 13) + (i % 9973 === 0 ? 1 : 0);
  }
  writer.writeSeries("train/loss", steps, walls, values);
  for (let k = 0; k < 20; k++) {
    const n = 20_000;
    writer.writeSeries(
      `eval/metric_${k}`,
      steps.subarray(0, n),
      walls.subarray(0, n),
      values.subarray(k * 1000, k * 1000 + n),
    );
  }
  writer.finish();
}

function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
}

const root = tempDir("rankscope-bench-ui-server-");
const loadBefore = loadavg()[0] ?? NaN;
seed(root);
const dashboard = await startDashboard({ root, port: 0 });
const rows: string[] = [];
try {
  const cases = [
    {
      label: "200 lines × 1,000 points of the 1M-point key (at the caps)",
      lines: Array.from({ length: 200 }, () => ["train/loss", null, null]),
      maxPoints: 1000,
    },
    {
      label: "100 lines × 2,000 points of the 1M-point key (at the caps)",
      lines: Array.from({ length: 100 }, () => ["train/loss", null, null]),
      maxPoints: 2000,
    },
    {
      label: "a zoom: 1 line, steps 500,000–502,000 raw (before)",
      lines: [["train/loss", null, "499999", 502000]],
      maxPoints: 2000,
    },
    {
      label: "20 keys × 20,000 points, a grid's first load",
      lines: Array.from({ length: 20 }, (_, k) => [`eval/metric_${k}`, null, null]),
      maxPoints: 2000,
    },
    {
      label: "200 lines × 2,000 points of the 1M-point key (the issue's request)",
      lines: Array.from({ length: 200 }, () => ["train/loss", null, null]),
      maxPoints: 2000,
    },
  ];
  for (const c of cases) {
    const path = `/api/lines?run=bench/long&maxPoints=${c.maxPoints}&lines=${encodeURIComponent(JSON.stringify(c.lines))}`;
    await get(dashboard.port, path, true); // warm: statements prepared, pages cached
    const loop = monitorEventLoopDelay({ resolution: 1 });
    const probes: number[] = [];
    let running = true;
    const probe = async (): Promise<void> => {
      while (running) {
        const t = performance.now();
        await get(dashboard.port, "/api/version", false);
        probes.push(performance.now() - t);
        await new Promise((r) => setTimeout(r, 5));
      }
    };
    loop.enable();
    const prober = probe();
    const start = performance.now();
    const zipped = await get(dashboard.port, path, true);
    const wall = performance.now() - start;
    running = false;
    await prober;
    loop.disable();
    const plain = await get(dashboard.port, path, false);
    if (zipped.status === 200 && gunzipSync(zipped.body).length !== plain.bytes)
      throw new Error("gzip answer does not decompress to the plain one");
    const held = loop.max / 1e6;
    const answer =
      zipped.status === 200
        ? `${(plain.bytes / 1e6).toFixed(2)} MB → ${(zipped.bytes / 1e6).toFixed(2)} MB gzip (${(plain.bytes / zipped.bytes).toFixed(1)}×)`
        : `${zipped.status}: ${JSON.parse(zipped.body.toString()).error.slice(0, 80)}…`;
    rows.push(
      `| ${c.label} | ${wall.toFixed(0)} | ${held.toFixed(0)} | ${percentile(probes, 50).toFixed(1)} / ${Math.max(...probes).toFixed(1)} | ${answer} |`,
    );
  }
  // What the server did before: every line read and the whole answer serialised in one go, the
  // event loop held throughout (measured here as one synchronous block).
  const source = createStoreSource(root);
  const runDir = join(root, "bench", "long");
  for (const [lines, maxPoints] of [
    [200, 1000],
    [200, 2000],
  ] as const) {
    const start = performance.now();
    const out = [];
    for (let i = 0; i < lines; i++) out.push(await source.series(runDir, "train/loss", { maxPoints }));
    const bytes = Buffer.byteLength(JSON.stringify({ lines: out }, nonFiniteReplacer));
    const held = performance.now() - start;
    rows.push(
      `| former server, ${lines} lines × ${maxPoints.toLocaleString("en-US")} points read back to back | ${held.toFixed(0)} | ${held.toFixed(0)} (all of it) | — | ${(bytes / 1e6).toFixed(2)} MB, not compressed |`,
    );
  }
} finally {
  await dashboard.close();
  rmSync(root, { recursive: true, force: true });
}
process.stdout.write(
  `One process (server and client), ${cpus().length} CPUs, load average ${loadBefore.toFixed(1)} → ${(loadavg()[0] ?? NaN).toFixed(1)}. Target: no request holds the event loop more than ~100 ms.\n\n`,
);
process.stdout.write(
  "| request | wall ms | longest event-loop hold ms | /api/version meanwhile, median / max ms | answer |\n|---|---:|---:|---:|---|\n",
);
process.stdout.write(`${rows.join("\n")}\n`);
