/**
 * Flush latency across ranks, controller side: `logger.flush(step)` from the call until the merged
 * states are ready, for 4 / 16 / 64 ranks × 100 / 1,000 keys with mixed reductions (mean, sum, max,
 * min, std), over a worker's MessagePort, child-process IPC and NATS. Also the bytes the
 * controller receives per key per rank. Ranks record between flushes (not timed); no backend is
 * attached, so the figure is gather + validate + merge.
 *
 * NATS twice: over an open nats-server, and over one that requires TLS with client certificates
 * and users with docs/security.md's per-run permissions (the controller and the ranks each with
 * their role's user) — what authentication costs a flush. `RANKS_BENCH_AUTH=1` measures only those
 * two, alternately (open, with auth, open, …: three rounds at 16 ranks), for the pair's ratio;
 * `RANKS_BENCH_AUTH=open` the open rounds alone.
 *
 * One host: 32 process ranks (IPC) and 32 thread ranks × 1,000 keys, flush answers as wire frames
 * (the default) and as JSON snapshots (`spawnRanks({ answers: "json" })`, the format before frames),
 * alternately in the same run: the controller's CPU per rank·key of each, and their ratio.
 * `RANKS_BENCH_ONE_HOST=1` measures only those.
 *
 * Uses the compiled package (`npm run build` first; `npm run bench` does).
 * Run: `npm run bench -- ranks`, or `RANKS_BENCH_QUICK=1` for a smaller grid.
 */
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NatsServer } from "../test/transport/support.js";
import { accountsFor, makeCertificates, ROLE_PASSWORD_ENV } from "../test/transport/auth-support.js";

// The compiled package at run time (fast rank start-up); the sources' types at compile time, so
// type-checking does not need a build.
const dist = (path: string): URL => new URL(`../dist/${path}`, import.meta.url);
const { MetricLogger, spawnRanks } = (await import(dist("index.js").href)) as typeof import("../src/index.js");
const { serveRanksOverNats } = (await import(
  dist("transport/controller/nats.js").href
)) as typeof import("../src/transport/controller/nats.js");
const { transportStats } = (await import(
  dist("transport/protocol/messages.js").href
)) as typeof import("../src/transport/protocol/messages.js");

const RANK_MODULE = new URL("./ranks-rank.mjs", import.meta.url);
const QUICK = process.env["RANKS_BENCH_QUICK"] === "1";
const RANK_COUNTS = QUICK ? [4, 16] : [4, 16, 64];
const KEY_COUNTS = [100, 1000];
const REPEATS = 7;
const AUTH_ONLY = process.env["RANKS_BENCH_AUTH"] === "1";
/** `RANKS_BENCH_AUTH=open`: the open server's rounds alone (the same figures from another build, e.g. main's, to pair with). */
const OPEN_ONLY = process.env["RANKS_BENCH_AUTH"] === "open";
const PASSWORD = "bench-Pw";

type Carrier =
  | "thread (MessagePort)"
  | "process (IPC)"
  | "thread (MessagePort, JSON)"
  | "process (IPC, JSON)"
  | "process (NATS)"
  | "process (NATS, TLS + auth)";
const ONE_HOST = process.env["RANKS_BENCH_ONE_HOST"] === "1";
/** The one-host comparison: ranks, rounds (frames and JSON alternately), and its carriers paired (frames, JSON). */
const ONE_HOST_RANKS = 32;
const ONE_HOST_ROUNDS = 2;
/** Flushes per one-host row (main-thread CPU comes in 10 ms ticks: enough flushes to average them). */
const ONE_HOST_REPEATS = 20;
const ONE_HOST_PAIRS: ReadonlyArray<readonly [Carrier, Carrier]> = [
  ["process (IPC)", "process (IPC, JSON)"],
  ["thread (MessagePort)", "thread (MessagePort, JSON)"],
];

/** The authenticated server's settings: its certificates, and the run ids it has users for. */
interface AuthSetup {
  readonly server: NatsServer;
  readonly certs: ReturnType<typeof makeCertificates>;
}

interface Row {
  carrier: Carrier;
  ranks: number;
  keys: number;
  medianMs: number;
  p90Ms: number;
  bytesPerKeyPerRank: number;
  usPerRankKey: number;
  /** CPU ms per flush (mean of the timed flushes): the controller, its nats-server, the rank processes, and all together. */
  controllerCpuMs: number;
  /** CPU ms per flush of the controller's main thread alone (/proc: thread ranks' own work excluded). */
  mainThreadCpuMs: number;
  natsCpuMs: number;
  ranksCpuMs: number;
  totalCpuMs: number;
}

/** CPU ms a process used so far, from /proc (0 where there is none): utime + stime, in clock ticks of 10 ms. */
function processCpuMs(pid: number | undefined, path = `/proc/${pid ?? 0}/stat`): number {
  if (pid === undefined) return 0;
  try {
    const fields = readFileSync(path, "utf8").split(") ")[1]?.split(" ") ?? [];
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

/** CPU ms this process's main thread used so far (/proc/self/task/<pid>; 0 where there is none). */
function mainThreadCpuMs(): number {
  return processCpuMs(process.pid, `/proc/self/task/${process.pid}/stat`);
}

async function measure(
  carrier: Carrier,
  ranks: number,
  open: NatsServer,
  runId: string,
  auth: AuthSetup,
  keyCounts = KEY_COUNTS,
  repeats = REPEATS,
): Promise<Row[]> {
  const logger = new MetricLogger({
    processName: "Controller",
    runDir: join(tmpdir(), "rankscope-bench"),
    runId,
    flushDeadlineMs: 30_000,
    shutdownDeadlineMs: 20_000,
  });
  await logger.initBackends({});
  const { certs } = auth;
  const tls = { tlsCaFile: certs.ca, tlsCertFile: certs.clientCert, tlsKeyFile: certs.clientKey };
  const nats =
    carrier === "process (NATS)"
      ? await serveRanksOverNats({ url: open.url, logger })
      : carrier === "process (NATS, TLS + auth)"
        ? await serveRanksOverNats({
            url: auth.server.url,
            logger,
            auth: { ...tls, user: `${runId}-controller`, password: PASSWORD },
          })
        : undefined;
  const group = await spawnRanks({
    module: RANK_MODULE,
    replicas: ranks / 4,
    ranksPerReplica: 4,
    kind: carrier.startsWith("thread") ? "thread" : "process",
    processName: "Bench",
    logger,
    startDeadlineMs: 120_000,
    ...(nats !== undefined ? { nats } : {}),
    ...(carrier === "process (NATS, TLS + auth)" ? { natsAuth: { user: `${runId}-rank`, password: PASSWORD } } : {}),
    answers: carrier.endsWith("JSON)") ? "json" : "frames",
  });
  const rows: Row[] = [];
  const natsPid =
    carrier === "process (NATS)" ? open.pid : carrier === "process (NATS, TLS + auth)" ? auth.server.pid : undefined;
  const ranksCpu = (): number =>
    carrier.startsWith("thread") ? 0 : group.rankNames.reduce((sum, name) => sum + processCpuMs(group.pid(name)), 0);
  let step = 0;
  for (const keys of keyCounts) {
    const times: number[] = [];
    let bytes = 0;
    const cpu = { controller: 0, main: 0, nats: 0, ranks: 0 };
    for (let i = 0; i <= repeats; i++) {
      await group.fanout("recordMany", keys, 2, i);
      const before = nats !== undefined ? nats.stats.inBytes : transportStats().bytesIn;
      const [c0, m0, n0, r0] = [process.cpuUsage(), mainThreadCpuMs(), processCpuMs(natsPid), ranksCpu()];
      const t0 = performance.now();
      const result = await logger.flush(step++);
      const elapsed = performance.now() - t0;
      const c1 = process.cpuUsage(c0);
      const [m1, n1, r1] = [mainThreadCpuMs(), processCpuMs(natsPid), ranksCpu()];
      const after = nats !== undefined ? nats.stats.inBytes : transportStats().bytesIn;
      if (result.missingRanks.length > 0) throw new Error(`flush missed ${result.missingRanks.join(", ")}`);
      if (i === 0) continue; // warm-up
      times.push(elapsed);
      bytes += after - before;
      cpu.controller += (c1.user + c1.system) / 1000;
      cpu.main += m1 - m0;
      cpu.nats += n1 - n0;
      cpu.ranks += r1 - r0;
    }
    times.sort((a, b) => a - b);
    const medianMs = quantile(times, 0.5);
    rows.push({
      carrier,
      ranks,
      keys,
      medianMs,
      p90Ms: quantile(times, 0.9),
      bytesPerKeyPerRank: bytes / repeats / (ranks * keys),
      usPerRankKey: (medianMs * 1000) / (ranks * keys),
      controllerCpuMs: cpu.controller / repeats,
      mainThreadCpuMs: cpu.main / repeats,
      natsCpuMs: cpu.nats / repeats,
      ranksCpuMs: cpu.ranks / repeats,
      totalCpuMs: (cpu.controller + cpu.nats + cpu.ranks) / repeats,
    });
  }
  await logger.shutdown();
  return rows;
}

const started = performance.now();
const nats = await NatsServer.start();
// TLS with client certificates the server verifies, and per-run users with the template's permissions.
const certs = makeCertificates();
const plan: Array<[Carrier, number, string]> = [];
if (ONE_HOST) {
  // Only the one-host pairs (below).
} else if (AUTH_ONLY || OPEN_ONLY) {
  const carriers: Carrier[] = OPEN_ONLY ? ["process (NATS)"] : ["process (NATS)", "process (NATS, TLS + auth)"];
  for (let round = 0; round < 3; round++) for (const carrier of carriers) plan.push([carrier, 16, `benchR${round}x16`]);
} else {
  for (const carrier of [
    "thread (MessagePort)",
    "process (IPC)",
    "process (NATS)",
    "process (NATS, TLS + auth)",
  ] as Carrier[]) {
    for (const ranks of RANK_COUNTS) plan.push([carrier, ranks, `bench${ranks}`]);
  }
}
if (!AUTH_ONLY && !OPEN_ONLY) {
  for (let round = 0; round < ONE_HOST_ROUNDS; round++) {
    for (const [frames, json] of ONE_HOST_PAIRS) {
      // JSON first in even rounds, frames first in odd ones: neither always runs on a warmer machine.
      const pair = round % 2 === 0 ? [json, frames] : [frames, json];
      for (const carrier of pair) plan.push([carrier, ONE_HOST_RANKS, `oneHost${round}`]);
    }
  }
}
const tlsBlock = `tls: { cert_file: ${JSON.stringify(certs.serverCert)}, key_file: ${JSON.stringify(certs.serverKey)}, ca_file: ${JSON.stringify(certs.ca)}, verify: true }\n`;
const secure = await NatsServer.start({
  config: tlsBlock + accountsFor([...new Set(plan.map(([, , runId]) => runId))]),
  env: {
    [ROLE_PASSWORD_ENV.controller]: PASSWORD,
    [ROLE_PASSWORD_ENV.host]: PASSWORD,
    [ROLE_PASSWORD_ENV.rank]: PASSWORD,
  },
});
const rows: Row[] = [];
try {
  for (const [carrier, ranks, runId] of plan) {
    const t0 = performance.now();
    const oneHost = ranks === ONE_HOST_RANKS;
    rows.push(
      ...(await measure(
        carrier,
        ranks,
        nats,
        runId,
        { server: secure, certs },
        oneHost ? [1000] : KEY_COUNTS,
        oneHost ? ONE_HOST_REPEATS : REPEATS,
      )),
    );
    process.stderr.write(`  ${carrier}, ${ranks} ranks: done in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  }
} finally {
  await nats.stop();
  await secure.stop();
}

const fmt = (n: number, d = 1): string => n.toFixed(d);
/** Rows of the main grid: the one-host rounds are summed up in their own table. */
const oneHostRow = (r: Row): boolean => r.ranks === ONE_HOST_RANKS;
const oneHostRows = rows.filter(oneHostRow);
rows.splice(0, rows.length, ...rows.filter((r) => !oneHostRow(r)));
process.stdout.write(
  "| carrier | ranks | keys | ranks×keys | flush median (ms) | flush p90 (ms) | µs per rank·key | bytes in per key per rank |\n",
);
process.stdout.write("|---|---:|---:|---:|---:|---:|---:|---:|\n");
for (const r of rows) {
  process.stdout.write(
    `| ${r.carrier} | ${r.ranks} | ${r.keys} | ${r.ranks * r.keys} | ${fmt(r.medianMs)} | ${fmt(r.p90Ms)} | ${fmt(r.usPerRankKey, 2)} | ${fmt(r.bytesPerKeyPerRank, 0)} |\n`,
  );
}
// What authentication costs: the flush median with TLS + auth over the open server's, per rank and key count (medians of the rounds).
const medianOf = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
process.stdout.write(
  "\nCPU per flush (mean of the timed flushes; ranks and nats-server from /proc):\n\n| carrier | ranks | keys | controller ms | nats-server ms | ranks ms | all ms |\n|---|---:|---:|---:|---:|---:|---:|\n",
);
for (const r of rows)
  process.stdout.write(
    `| ${r.carrier} | ${r.ranks} | ${r.keys} | ${fmt(r.controllerCpuMs)} | ${fmt(r.natsCpuMs, 0)} | ${fmt(r.ranksCpuMs, 0)} | ${fmt(r.totalCpuMs, 0)} |\n`,
  );
process.stdout.write(
  "\nNATS with TLS (client certificates) + per-run users ÷ open NATS (medians of the rounds):\n\n| ranks × keys | open: flush median ms | TLS + auth | ratio | open: all CPU ms | TLS + auth | ratio |\n|---|---:|---:|---:|---:|---:|---:|\n",
);
for (const ranks of [...new Set(rows.map((r) => r.ranks))]) {
  for (const keys of KEY_COUNTS) {
    const of = (carrier: Carrier, f: (r: Row) => number): number =>
      medianOf(rows.filter((r) => r.carrier === carrier && r.ranks === ranks && r.keys === keys).map(f));
    const [open, secured] = [
      of("process (NATS)", (r) => r.medianMs),
      of("process (NATS, TLS + auth)", (r) => r.medianMs),
    ];
    const [openCpu, securedCpu] = [
      of("process (NATS)", (r) => r.totalCpuMs),
      of("process (NATS, TLS + auth)", (r) => r.totalCpuMs),
    ];
    if (Number.isFinite(open) && Number.isFinite(secured)) {
      process.stdout.write(
        `| ${ranks} × ${keys} | ${fmt(open)} | ${fmt(secured)} | ${fmt(secured / open, 2)}× | ${fmt(openCpu, 0)} | ${fmt(securedCpu, 0)} | ${fmt(securedCpu / openCpu, 2)}× |\n`,
      );
    }
  }
}
/** The median, the two middle values' mean for an even count. */
const middleOf = (xs: number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  const half = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[half] ?? NaN) : ((sorted[half - 1] ?? NaN) + (sorted[half] ?? NaN)) / 2;
};
if (oneHostRows.length > 0) {
  process.stdout.write(
    `\nOne host, ${ONE_HOST_RANKS} ranks × 1,000 keys: flush answers as wire frames vs JSON snapshots in the same run (${ONE_HOST_REPEATS} flushes per round, ${ONE_HOST_ROUNDS} rounds alternating, median of the rounds). ` +
      "Controller CPU per flush: its main thread (/proc), and the whole process (process.cpuUsage: for thread ranks that includes the ranks' own work):\n\n" +
      "| carrier | answers | controller main thread CPU ms | µs per rank·key | whole process CPU ms | flush median ms | bytes in per key per rank | JSON ÷ frames (main thread CPU) |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
  );
  for (const [frames, json] of ONE_HOST_PAIRS) {
    const of = (carrier: Carrier, f: (r: Row) => number): number =>
      middleOf(oneHostRows.filter((r) => r.carrier === carrier).map(f));
    const ratio = of(json, (r) => r.mainThreadCpuMs) / of(frames, (r) => r.mainThreadCpuMs);
    for (const [carrier, answers] of [
      [json, "JSON (before)"],
      [frames, "wire frames"],
    ] as const) {
      const main = of(carrier, (r) => r.mainThreadCpuMs);
      process.stdout.write(
        `| ${frames} | ${answers} | ${fmt(main)} | ${fmt((main * 1000) / (ONE_HOST_RANKS * 1000), 3)} | ${fmt(of(carrier, (r) => r.controllerCpuMs))} | ${fmt(of(carrier, (r) => r.medianMs))} | ${fmt(
          of(carrier, (r) => r.bytesPerKeyPerRank),
          0,
        )} | ${carrier === frames ? `${fmt(ratio, 1)}×` : ""} |\n`,
      );
    }
  }
}
process.stdout.write(
  `\n${REPEATS} flushes per row after one warm-up; every key gets 2 values per rank per step. Whole run: ${fmt((performance.now() - started) / 1000)} s.\n`,
);
