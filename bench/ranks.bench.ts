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
const { serveRanksOverNats } = (await import(dist("transport/controller/nats.js").href)) as typeof import("../src/transport/controller/nats.js");
const { transportStats } = (await import(dist("transport/protocol/messages.js").href)) as typeof import("../src/transport/protocol/messages.js");

const RANK_MODULE = new URL("./ranks-rank.mjs", import.meta.url);
const QUICK = process.env["RANKS_BENCH_QUICK"] === "1";
const RANK_COUNTS = QUICK ? [4, 16] : [4, 16, 64];
const KEY_COUNTS = [100, 1000];
const REPEATS = 7;
const AUTH_ONLY = process.env["RANKS_BENCH_AUTH"] === "1";
/** `RANKS_BENCH_AUTH=open`: the open server's rounds alone (the same figures from another build, e.g. main's, to pair with). */
const OPEN_ONLY = process.env["RANKS_BENCH_AUTH"] === "open";
const PASSWORD = "bench-Pw";

type Carrier = "thread (MessagePort)" | "process (IPC)" | "process (NATS)" | "process (NATS, TLS + auth)";

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
  natsCpuMs: number;
  ranksCpuMs: number;
  totalCpuMs: number;
}

/** CPU ms a process used so far, from /proc (0 where there is none): utime + stime, in clock ticks of 10 ms. */
function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

async function measure(carrier: Carrier, ranks: number, open: NatsServer, runId: string, auth: AuthSetup): Promise<Row[]> {
  const logger = new MetricLogger({ processName: "Controller", runDir: join(tmpdir(), "rankscope-bench"), runId, flushDeadlineMs: 30_000, shutdownDeadlineMs: 20_000 });
  await logger.initBackends({});
  const { certs } = auth;
  const tls = { tlsCaFile: certs.ca, tlsCertFile: certs.clientCert, tlsKeyFile: certs.clientKey };
  const nats =
    carrier === "process (NATS)"
      ? await serveRanksOverNats({ url: open.url, logger })
      : carrier === "process (NATS, TLS + auth)"
        ? await serveRanksOverNats({ url: auth.server.url, logger, auth: { ...tls, user: `${runId}-controller`, password: PASSWORD } })
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
  });
  const rows: Row[] = [];
  const natsPid = carrier === "process (NATS)" ? open.pid : carrier === "process (NATS, TLS + auth)" ? auth.server.pid : undefined;
  const ranksCpu = (): number => (carrier.startsWith("thread") ? 0 : group.rankNames.reduce((sum, name) => sum + processCpuMs(group.pid(name)), 0));
  let step = 0;
  for (const keys of KEY_COUNTS) {
    const times: number[] = [];
    let bytes = 0;
    const cpu = { controller: 0, nats: 0, ranks: 0 };
    for (let i = 0; i <= REPEATS; i++) {
      await group.fanout("recordMany", keys, 2, i);
      const before = nats !== undefined ? nats.stats.inBytes : transportStats().bytesIn;
      const [c0, n0, r0] = [process.cpuUsage(), processCpuMs(natsPid), ranksCpu()];
      const t0 = performance.now();
      const result = await logger.flush(step++);
      const elapsed = performance.now() - t0;
      const c1 = process.cpuUsage(c0);
      const [n1, r1] = [processCpuMs(natsPid), ranksCpu()];
      const after = nats !== undefined ? nats.stats.inBytes : transportStats().bytesIn;
      if (result.missingRanks.length > 0) throw new Error(`flush missed ${result.missingRanks.join(", ")}`);
      if (i === 0) continue; // warm-up
      times.push(elapsed);
      bytes += after - before;
      cpu.controller += (c1.user + c1.system) / 1000;
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
      bytesPerKeyPerRank: bytes / REPEATS / (ranks * keys),
      usPerRankKey: (medianMs * 1000) / (ranks * keys),
      controllerCpuMs: cpu.controller / REPEATS,
      natsCpuMs: cpu.nats / REPEATS,
      ranksCpuMs: cpu.ranks / REPEATS,
      totalCpuMs: (cpu.controller + cpu.nats + cpu.ranks) / REPEATS,
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
if (AUTH_ONLY || OPEN_ONLY) {
  const carriers: Carrier[] = OPEN_ONLY ? ["process (NATS)"] : ["process (NATS)", "process (NATS, TLS + auth)"];
  for (let round = 0; round < 3; round++) for (const carrier of carriers) plan.push([carrier, 16, `benchR${round}x16`]);
} else {
  for (const carrier of ["thread (MessagePort)", "process (IPC)", "process (NATS)", "process (NATS, TLS + auth)"] as Carrier[]) {
    for (const ranks of RANK_COUNTS) plan.push([carrier, ranks, `bench${ranks}`]);
  }
}
const tlsBlock = `tls: { cert_file: ${JSON.stringify(certs.serverCert)}, key_file: ${JSON.stringify(certs.serverKey)}, ca_file: ${JSON.stringify(certs.ca)}, verify: true }\n`;
const secure = await NatsServer.start({
  config: tlsBlock + accountsFor([...new Set(plan.map(([, , runId]) => runId))]),
  env: { [ROLE_PASSWORD_ENV.controller]: PASSWORD, [ROLE_PASSWORD_ENV.host]: PASSWORD, [ROLE_PASSWORD_ENV.rank]: PASSWORD },
});
const rows: Row[] = [];
try {
  for (const [carrier, ranks, runId] of plan) {
    const t0 = performance.now();
    rows.push(...(await measure(carrier, ranks, nats, runId, { server: secure, certs })));
    process.stderr.write(`  ${carrier}, ${ranks} ranks: done in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  }
} finally {
  await nats.stop();
  await secure.stop();
}

const fmt = (n: number, d = 1): string => n.toFixed(d);
process.stdout.write("| carrier | ranks | keys | ranks×keys | flush median (ms) | flush p90 (ms) | µs per rank·key | bytes in per key per rank |\n");
process.stdout.write("|---|---:|---:|---:|---:|---:|---:|---:|\n");
for (const r of rows) {
  process.stdout.write(
    `| ${r.carrier} | ${r.ranks} | ${r.keys} | ${r.ranks * r.keys} | ${fmt(r.medianMs)} | ${fmt(r.p90Ms)} | ${fmt(r.usPerRankKey, 2)} | ${fmt(r.bytesPerKeyPerRank, 0)} |\n`,
  );
}
// What authentication costs: the flush median with TLS + auth over the open server's, per rank and key count (medians of the rounds).
const medianOf = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
process.stdout.write("\nCPU per flush (mean of the timed flushes; ranks and nats-server from /proc):\n\n| carrier | ranks | keys | controller ms | nats-server ms | ranks ms | all ms |\n|---|---:|---:|---:|---:|---:|---:|\n");
for (const r of rows) process.stdout.write(`| ${r.carrier} | ${r.ranks} | ${r.keys} | ${fmt(r.controllerCpuMs)} | ${fmt(r.natsCpuMs, 0)} | ${fmt(r.ranksCpuMs, 0)} | ${fmt(r.totalCpuMs, 0)} |\n`);
process.stdout.write("\nNATS with TLS (client certificates) + per-run users ÷ open NATS (medians of the rounds):\n\n| ranks × keys | open: flush median ms | TLS + auth | ratio | open: all CPU ms | TLS + auth | ratio |\n|---|---:|---:|---:|---:|---:|---:|\n");
for (const ranks of [...new Set(rows.map((r) => r.ranks))]) {
  for (const keys of KEY_COUNTS) {
    const of = (carrier: Carrier, f: (r: Row) => number): number => medianOf(rows.filter((r) => r.carrier === carrier && r.ranks === ranks && r.keys === keys).map(f));
    const [open, secured] = [of("process (NATS)", (r) => r.medianMs), of("process (NATS, TLS + auth)", (r) => r.medianMs)];
    const [openCpu, securedCpu] = [of("process (NATS)", (r) => r.totalCpuMs), of("process (NATS, TLS + auth)", (r) => r.totalCpuMs)];
    if (Number.isFinite(open) && Number.isFinite(secured)) {
      process.stdout.write(`| ${ranks} × ${keys} | ${fmt(open)} | ${fmt(secured)} | ${fmt(secured / open, 2)}× | ${fmt(openCpu, 0)} | ${fmt(securedCpu, 0)} | ${fmt(securedCpu / openCpu, 2)}× |\n`);
    }
  }
}
process.stdout.write(`\n${REPEATS} flushes per row after one warm-up; every key gets 2 values per rank per step. Whole run: ${fmt((performance.now() - started) / 1000)} s.\n`);
