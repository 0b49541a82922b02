/**
 * Scale: controller CPU and wall time per flush for 64 / 256 / 1,024 ranks on 4 / 16 / 64 hosts ×
 * 1,000 keys (mixed reductions), with one host agent per host, over a real nats-server; and the
 * same ranks joined straight to the controller (no agents, today's path) for comparison. Ranks
 * are simulated by `bench/scale-host.ts`: many real `RankRuntime`s with their own collectors per
 * process, speaking the real protocol over NATS. Also bytes per key per rank on the wire: the
 * binary frame vs the JSON protocol reply, for the same states, measured here.
 *
 * Controller CPU is `process.cpuUsage()` of this process around `logger.flush(step)` (decode,
 * merge, reduce; no backend attached). Run: `npm run bench -- scale` (`SCALE_BENCH_QUICK=1` for
 * 64 / 256 ranks only; `SCALE_BENCH_ONLY=1024x16` for one row; `SCALE_BENCH_CPU_PROF=<dir>` writes the host processes'
 * CPU profiles there, for `node --cpu-prof`-style analysis).
 *
 * `SCALE_BENCH_RACKS=1`: ten thousand ranks (issue 34): 4,096 ranks on 256 hosts and 16,384 ranks on
 * 1,024 hosts × 1,000 keys, each with rack agents (16 and 32 racks: the controller serves the rack
 * agents, each rack agent its hosts' agents) and with host agents only, in the same run
 * (`SCALE_BENCH_RACKS_GRID=4096x256x16` for the first two rows only: ranks x hosts x racks, comma-separated;
 * `SCALE_BENCH_RACKS_ONLY=1` leaves out the host-agents-only rows). `SCALE_BENCH_CONTROLLER_PROF=<file>`
 * writes a V8 CPU profile and a sampled allocation profile (`.heapprofile`, collected objects included)
 * of this process over the measured flushes only (the controller's side). Each row's line also gives
 * the controller's CPU per flush by thread (`node` is its main thread), from /proc.
 *
 * `SCALE_BENCH_AUTH=1`: what authentication costs at scale. The row of `SCALE_BENCH_ONLY` (default
 * 1024x16) twice over, alternately on an open nats-server, on one that requires docs/security.md's
 * per-run users (controller, host agents and ranks each with their role's user and permissions),
 * and on one that requires TLS with client certificates too; the ratios to open (median and best of
 * `SCALE_BENCH_ROUNDS` rounds, default 2, each starting with another variant).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { authConnectionOptions, resolveNatsAuth } from "../src/transport/protocol/nats-auth.js";
import {
  accountsFor,
  makeCertificates,
  ROLE_PASSWORD_ENV,
  type TestCertificates,
} from "../test/transport/auth-support.js";
import { Collector } from "../src/core/collector.js";
import { MetricLogger } from "../src/controller/metric-logger.js";
import { serveHostsOverNats } from "../src/transport/host/server.js";
import { serveRanksOverNats } from "../src/transport/controller/nats.js";
import { encodeProtocolMessage } from "../src/transport/protocol/messages.js";
import { StateEncoder } from "../src/transport/wire/codec.js";
import { waitFor } from "../test/helpers.js";
import { NatsServer } from "../test/transport/support.js";
import { scaleKeys } from "./scale-keys.js";
import { measureControllerFloor, measureFloor } from "./scale-floor.js";
import { availableParallelism } from "node:os";
import { Session } from "node:inspector/promises";
import { PerformanceObserver } from "node:perf_hooks";
import { writeFileSync } from "node:fs";

const QUICK = process.env["SCALE_BENCH_QUICK"] === "1";
const ONLY = process.env["SCALE_BENCH_ONLY"];
const CPU_PROF = process.env["SCALE_BENCH_CPU_PROF"];
const CONTROLLER_PROF = process.env["SCALE_BENCH_CONTROLLER_PROF"];
const KEYS = 1000;
const FLUSHES = 5;
const HOST_FILE = new URL("./scale-host.ts", import.meta.url);
const scratch = mkdtempSync(join(tmpdir(), "rankscope-scale-"));

interface Row {
  readonly ranks: number;
  readonly hosts: number | "direct";
  /** Rack agents between the hosts and the controller (undefined: host agents only). */
  readonly racks?: number | undefined;
  readonly cpuMs: number;
  readonly wallMs: number;
  readonly bytesPerKeyPerRank: number;
  readonly reporting: string;
  /** CPU ms per flush of the host processes (ranks and agents), the nats-server, and all processes with the controller. */
  readonly hostsCpuMs: number;
  readonly natsCpuMs: number;
  readonly totalCpuMs: number;
  /** Heap and ArrayBuffers in use by the host processes (ranks and agents) after a full collection, divided by the ranks, in KiB. */
  readonly heapKiBPerRank: number;
  /** The controller process's garbage-collection pauses during the flush (wall ms, median). */
  readonly gcMs: number;
  /** The controller's CPU per flush by thread name (mean over the flushes; `node` is the main thread). */
  readonly threadsMs: ReadonlyMap<string, number>;
}

/** CPU ms a process used so far, from /proc (0 where there is no /proc): utime + stime, in clock ticks of 10 ms. */
function processCpuMs(pid: number | undefined): number {
  if (pid === undefined) return 0;
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

/** The hosts column of a row: the agents, and the racks they answer when there are rack agents. */
const hostsCell = (r: Row): string =>
  r.hosts === "direct" ? "none (direct)" : r.racks === undefined ? String(r.hosts) : `${r.hosts} in ${r.racks} racks`;

/** The mean of each name's figure over `maps`. */
function meanByName(maps: ReadonlyArray<ReadonlyMap<string, number>>): Map<string, number> {
  const sums = new Map<string, number>();
  for (const map of maps) for (const [name, ms] of map) sums.set(name, (sums.get(name) ?? 0) + ms);
  return new Map([...sums].map(([name, ms]) => [name, ms / Math.max(1, maps.length)]));
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/**
 * CPU ms each thread of this process used so far, summed by the thread's name (`node` is the main
 * thread; `V8 DefaultWorke…` the collector's and compiler's helpers; `libuv-worker` the pool), from
 * /proc (empty where there is none). Clock ticks of 10 ms: read over several flushes.
 */
function threadsCpuMs(): Map<string, number> {
  const out = new Map<string, number>();
  try {
    for (const tid of readdirSync("/proc/self/task")) {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
      const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(name, (out.get(name) ?? 0) + (Number(fields[11]) + Number(fields[12])) * 10);
    }
  } catch {
    // no /proc: nothing to say
  }
  return out;
}

/** The authenticated server of `SCALE_BENCH_AUTH`: its certificates, its run id, the one password of its users. */
interface Secure {
  readonly certs: TestCertificates;
  readonly runId: string;
  readonly password: string;
  /** TLS with a client certificate on top of the users (false: the users alone, on plain TCP). */
  readonly tls: boolean;
}

/** The settings of `role`'s user on the authenticated server (with TLS and a client certificate when it requires them). */
function roleAuth(secure: Secure, role: "controller" | "bench") {
  const { certs, runId, password } = secure;
  const user = { user: role === "bench" ? "bench" : `${runId}-${role}`, password };
  return secure.tls
    ? { tlsCaFile: certs.ca, tlsCertFile: certs.clientCert, tlsKeyFile: certs.clientKey, ...user }
    : user;
}

async function measure(
  server: NatsServer,
  nc: NatsConnection,
  ranks: number,
  hosts: number | "direct",
  flushes: number,
  secure?: Secure,
  racks?: number,
): Promise<Row> {
  const logger = new MetricLogger({
    processName: "Controller",
    runDir: join(scratch, "run"),
    // A minute, or longer where the simulated ranks share this machine's few cores (16,384 ranks: 4 min).
    flushDeadlineMs: Math.max(60_000, ranks * 15),
    shutdownDeadlineMs: 20_000,
    ...(secure === undefined ? {} : { runId: secure.runId }),
  });
  await logger.initBackends({});
  const direct = hosts === "direct";
  const hostCount = direct ? 16 : hosts;
  const auth = secure === undefined ? {} : { auth: roleAuth(secure, "controller") };
  const hostServer = direct ? undefined : await serveHostsOverNats({ url: server.url, logger, ...auth });
  const rankServer = direct
    ? await serveRanksOverNats({ url: server.url, logger, maxMissedFlushes: 1000, ...auth })
    : undefined;
  const processes = Math.min(hostCount, 4);
  const children: ChildProcess[] = [];
  let ready = 0;
  const perHost = ranks / hostCount;
  for (let p = 0; p < processes; p++) {
    const ids = Array.from({ length: hostCount / processes }, (_v, i) => `h${p * (hostCount / processes) + i}`);
    const child = spawn(
      process.execPath,
      [
        "--expose-gc",
        "--max-old-space-size=8192",
        ...(CPU_PROF === undefined ? [] : ["--cpu-prof", `--cpu-prof-dir=${CPU_PROF}`]),
        "--import",
        "tsx",
        HOST_FILE.pathname,
      ],
      {
        env: {
          ...process.env,
          SCALE_NATS_URL: server.url,
          SCALE_RUN_ID: logger.runId,
          SCALE_RUN_SECRET: logger.runSecret,
          SCALE_HOSTS: ids.join(","),
          SCALE_RANKS_PER_HOST: String(perHost),
          SCALE_FIRST_RANK: String(p * (hostCount / processes) * perHost),
          SCALE_KEYS: String(KEYS),
          SCALE_PROCESS: String(p),
          ...(direct ? { SCALE_DIRECT: "1" } : {}),
          ...(racks === undefined ? {} : { SCALE_HOSTS_PER_RACK: String(hostCount / racks) }),
          ...(secure === undefined
            ? {}
            : { SCALE_AUTH: JSON.stringify({ ...secure.certs, password: secure.password, tls: secure.tls }) }),
        },
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    child.stdout?.on("data", (d: Buffer) => {
      if (d.toString().includes("ready")) ready++;
    });
    children.push(child);
  }
  await waitFor(() => ready === processes, {
    timeoutMs: 900_000,
    what: `${processes} host processes to start ${ranks} ranks`,
  });
  // A host process whose connection the nats-server dropped (a stall under the machine's load)
  // reconnects by itself: ask it again until it answers, within a minute.
  const ask = async (subject: string, data: string): Promise<Uint8Array> => {
    const deadline = Date.now() + Math.max(60_000, ranks * 15);
    for (;;) {
      try {
        return (await nc.request(subject, data, { timeout: Math.max(1, deadline - Date.now()) })).data;
      } catch (error) {
        if (Date.now() >= deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  };
  const record = async (step: number): Promise<void> => {
    await Promise.all(children.map((_c, p) => ask(`bench.${logger.runId}.record.${p}`, String(step))));
  };
  let step = 0;
  // Two warm-up flushes: the controller learns each host's ranks and key table, the JIT warms up
  // (with racks, until every rank is reported: the host agents register with their racks meanwhile).
  for (let i = 0; i < 2 || (racks !== undefined && i < 20); i++) {
    await record(step);
    const warm = await logger.flush(step++);
    if (i >= 1 && warm.ranksReporting === ranks) break;
  }
  const cpu: number[] = [];
  const wall: number[] = [];
  const hostsCpu: number[] = [];
  const natsCpu: number[] = [];
  const hostsCpuNow = async (): Promise<number> => {
    const answers = await Promise.all(children.map((_c, p) => ask(`bench.${logger.runId}.cpu.${p}`, "")));
    return answers.reduce((sum, a) => sum + Number(new TextDecoder().decode(a)), 0);
  };
  let bytes = 0;
  let reporting = "";
  const gc: number[] = [];
  let gcPauses = 0;
  const gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcPauses += entry.duration;
  });
  gcObserver.observe({ entryTypes: ["gc"] });
  const profiler = CONTROLLER_PROF === undefined || racks === undefined ? undefined : new Session();
  if (profiler !== undefined) {
    profiler.connect();
    await profiler.post("Profiler.enable");
    await profiler.post("Profiler.start");
    // Every allocation sampled, collected ones too: what the collector has to clear, not only what stays.
    await profiler.post("HeapProfiler.startSampling", {
      samplingInterval: 16_384,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  }
  const threads: Array<Map<string, number>> = [];
  for (let i = 0; i < flushes; i++) {
    await record(step);
    const bytesBefore = hostServer?.stats.frameBytes ?? rankServer?.stats.inBytes ?? 0;
    const h0 = await hostsCpuNow();
    const n0 = processCpuMs(server.pid);
    const th0 = threadsCpuMs();
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const g0 = gcPauses;
    const result = await logger.flush(step++);
    wall.push(performance.now() - t0);
    const c1 = process.cpuUsage(c0);
    cpu.push((c1.user + c1.system) / 1000);
    threads.push(new Map([...threadsCpuMs()].map(([name, ms]) => [name, ms - (th0.get(name) ?? 0)])));
    // Entries arrive after the pause: let them in before reading.
    await new Promise((resolve) => setImmediate(resolve));
    gc.push(gcPauses - g0);
    natsCpu.push(processCpuMs(server.pid) - n0);
    hostsCpu.push((await hostsCpuNow()) - h0);
    bytes += (hostServer?.stats.frameBytes ?? rankServer?.stats.inBytes ?? 0) - bytesBefore;
    reporting = `${result.ranksReporting}/${result.ranksExpected}`;
  }
  if (profiler !== undefined && CONTROLLER_PROF !== undefined) {
    const { profile } = await profiler.post("Profiler.stop");
    writeFileSync(`${CONTROLLER_PROF}.${ranks}x${racks}.cpuprofile`, JSON.stringify(profile));
    const heap = await profiler.post("HeapProfiler.stopSampling");
    writeFileSync(`${CONTROLLER_PROF}.${ranks}x${racks}.heapprofile`, JSON.stringify(heap.profile));
    profiler.disconnect();
  }
  gcObserver.disconnect();
  const heaps = await Promise.all(children.map((_c, p) => ask(`bench.${logger.runId}.mem.${p}`, "")));
  const heapBytes = heaps.reduce((sum, a) => sum + Number(new TextDecoder().decode(a)), 0);
  await logger.shutdown();
  for (let p = 0; p < processes; p++) nc.publish(`bench.${logger.runId}.exit`, "");
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null) return resolve();
          const timer = setTimeout(() => c.kill("SIGKILL"), 20_000);
          c.once("exit", () => {
            clearTimeout(timer);
            resolve();
          });
        }),
    ),
  );
  const total = cpu.map((c, i) => c + (hostsCpu[i] ?? 0) + (natsCpu[i] ?? 0));
  return {
    ranks,
    hosts,
    racks,
    cpuMs: median(cpu),
    wallMs: median(wall),
    bytesPerKeyPerRank: bytes / flushes / KEYS / ranks,
    reporting,
    hostsCpuMs: median(hostsCpu),
    natsCpuMs: median(natsCpu),
    totalCpuMs: median(total),
    heapKiBPerRank: heapBytes / ranks / 1024,
    gcMs: median(gc),
    threadsMs: meanByName(threads),
  };
}

/** Bytes per key of one rank's flush, binary (key table already sent) vs the JSON protocol reply, for the same states. */
function formatBytes(reductions: readonly string[]): { wire: number; json: number } {
  const keys = scaleKeys(KEYS).filter((k) => reductions.includes(k.reduce));
  const collector = new Collector();
  const encoder = new StateEncoder();
  let wire = 0;
  let json = 0;
  for (let flush = 0; flush < 2; flush++) {
    keys.forEach(({ key, reduce }, k) => collector.recordSlow(key, (k * 0.37 + flush) % 11, reduce));
    const states = collector.takeStates();
    wire = encoder.encode({ proto: "rankscope", v: 1, run: "r", t: "reply", step: flush }, states).length;
    json = encodeProtocolMessage("r", {
      t: "reply",
      id: flush + 1,
      rankName: "Trainer_ab12_r0",
      ok: true,
      snapshot: { rankName: "Trainer_ab12_r0", step: flush, states, droppedKeyRecords: 0 },
    }).length;
  }
  return { wire: wire / keys.length, json: json / keys.length };
}

/** A bench process's own connection (its requests to the host processes): on the authenticated server, as the bench user. */
const benchConnection = (server: NatsServer, secure?: Secure): Promise<NatsConnection> =>
  connect(
    secure === undefined
      ? { servers: server.url }
      : authConnectionOptions(resolveNatsAuth("bench", server.url, roleAuth(secure, "bench"), {})),
  );

if (process.env["SCALE_BENCH_AUTH"] === "1") {
  const [ranks, hosts] = (ONLY ?? "1024x16").split("x").map(Number) as [number, number];
  const certs = makeCertificates();
  const withTls: Secure = { certs, runId: "scaleauth", password: "bench-Pw", tls: true };
  const usersOnly: Secure = { ...withTls, tls: false };
  const tls = `tls: { cert_file: ${JSON.stringify(certs.serverCert)}, key_file: ${JSON.stringify(certs.serverKey)}, ca_file: ${JSON.stringify(certs.ca)}, verify: true }\n`;
  // The template's run account, plus the bench's own user (requests to the host processes) in it.
  const accounts = accountsFor([withTls.runId]).replace(
    "users: [",
    `users: [\n    { user: "bench", password: "${withTls.password}" },`,
  );
  const env = {
    [ROLE_PASSWORD_ENV.controller]: withTls.password,
    [ROLE_PASSWORD_ENV.rack]: withTls.password,
    [ROLE_PASSWORD_ENV.host]: withTls.password,
    [ROLE_PASSWORD_ENV.rank]: withTls.password,
  };
  const variants = [
    { name: "open", server: await NatsServer.start(), secure: undefined },
    { name: "auth (users, no TLS)", server: await NatsServer.start({ config: accounts, env }), secure: usersOnly },
    { name: "TLS + auth", server: await NatsServer.start({ config: tls + accounts, env }), secure: withTls },
  ] as const;
  const rounds: Row[][] = [];
  const roundCount = Number(process.env["SCALE_BENCH_ROUNDS"] ?? "2");
  try {
    for (let round = 0; round < roundCount; round++) {
      const rows: Row[] = [];
      // Each round starts with another variant, so none is always measured first.
      for (let k = 0; k < variants.length; k++) {
        const j = (round + k) % variants.length;
        const { server, secure } = variants[j] as (typeof variants)[number];
        const client = await benchConnection(server, secure);
        try {
          rows[j] = await measure(server, client, ranks, hosts, FLUSHES, secure);
        } finally {
          await client.close();
        }
      }
      rounds.push(rows);
      process.stdout.write(
        `  round ${round + 1}: ${variants.map((v, i) => `${v.name} ${rows[i]?.cpuMs.toFixed(1) ?? "?"} ms CPU, ${rows[i]?.wallMs.toFixed(1) ?? "?"} ms wall`).join("; ")}\n`,
      );
    }
  } finally {
    for (const { server } of variants) await server.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
  process.stdout.write(
    `\n${ranks} ranks × ${hosts} hosts × ${KEYS} keys, per flush (median of ${FLUSHES} per round): an open nats-server, one requiring docs/security.md's per-run users, and one requiring TLS (client certificates) too:\n\n`,
  );
  process.stdout.write(
    "| round | server | controller CPU ms | flush wall ms | all processes CPU ms | nats-server CPU ms | ranks reporting |\n|---:|---|---:|---:|---:|---:|---:|\n",
  );
  rounds.forEach((rows, i) => {
    variants.forEach((v, j) => {
      const r = rows[j];
      if (r !== undefined)
        process.stdout.write(
          `| ${i + 1} | ${v.name} | ${r.cpuMs.toFixed(1)} | ${r.wallMs.toFixed(1)} | ${r.totalCpuMs.toFixed(0)} | ${r.natsCpuMs.toFixed(0)} | ${r.reporting} |\n`,
        );
    });
  });
  // The median and the best of the rounds (the one least disturbed by the machine's other load), on each side.
  const of = (j: number, f: (r: Row) => number): number[] => rounds.map((rows) => f(rows[j] as Row));
  const ratios = (j: number, f: (r: Row) => number): string =>
    `${(median(of(j, f)) / median(of(0, f))).toFixed(2)}× (best ${(Math.min(...of(j, f)) / Math.min(...of(0, f))).toFixed(2)}×)`;
  for (const j of [1, 2]) {
    process.stdout.write(
      `\n${variants[j]?.name ?? ""} ÷ open, median of ${roundCount} rounds: controller CPU ${ratios(j, (r) => r.cpuMs)}, flush wall ${ratios(j, (r) => r.wallMs)}, all processes' CPU ${ratios(j, (r) => r.totalCpuMs)}`,
    );
  }
  process.stdout.write("\n");
  process.exit(0);
}

const RACKS = process.env["SCALE_BENCH_RACKS"] === "1";
const server = await NatsServer.start();
const nc = await connect({ servers: server.url });
const rows: Row[] = [];
try {
  const grid: Array<[number, number | "direct", number, number | undefined]> = [];
  if (RACKS) {
    const specs = process.env["SCALE_BENCH_RACKS_GRID"] ?? "4096x256x16,16384x1024x32";
    for (const [ranks, hosts, racks] of specs.split(",").map((spec) => spec.split("x").map(Number)))
      if (ranks !== undefined && hosts !== undefined && racks !== undefined) {
        grid.push([ranks, hosts, FLUSHES, racks]);
        if (process.env["SCALE_BENCH_RACKS_ONLY"] !== "1") grid.push([ranks, hosts, FLUSHES, undefined]);
      }
  } else
    for (const ranks of QUICK ? [64, 256] : [64, 256, 1024]) {
      for (const hosts of [4, 16, 64]) if (hosts <= ranks) grid.push([ranks, hosts, FLUSHES, undefined]);
      grid.push([ranks, "direct", 3, undefined]);
    }
  for (const [ranks, hosts, flushes, racks] of grid) {
    if (ONLY !== undefined && ONLY !== `${ranks}x${hosts}`) continue;
    const row = await measure(server, nc, ranks, hosts, flushes, undefined, racks);
    rows.push(row);
    process.stdout.write(
      `  measured ${ranks} ranks, ${hosts} hosts${racks === undefined ? "" : ` in ${racks} racks`}: ${row.cpuMs.toFixed(1)} ms CPU (GC pauses ${row.gcMs.toFixed(1)} ms), ${row.wallMs.toFixed(1)} ms wall; all processes ${row.totalCpuMs.toFixed(0)} ms CPU (hosts ${row.hostsCpuMs.toFixed(0)}, nats-server ${row.natsCpuMs.toFixed(0)}); host processes' heap + ArrayBuffers ${row.heapKiBPerRank.toFixed(1)} KiB per rank; controller CPU by thread (mean, 10 ms ticks): ${[
        ...row.threadsMs,
      ]
        .filter(([, ms]) => ms > 0)
        .map(([name, ms]) => `${name} ${ms.toFixed(0)}`)
        .join(", ")}\n`,
    );
  }
} finally {
  await nc.close();
  await server.stop();
  rmSync(scratch, { recursive: true, force: true });
}

process.stdout.write(
  `\nController per flush, ${KEYS} keys per rank (mixed: 40% mean, 20% sum, 15% max, 15% min, 5% std, 5% quantiles), median of ${FLUSHES} (3 for direct):\n\n`,
);
process.stdout.write(
  "| ranks | hosts (agents) | controller CPU ms | flush wall ms | controller bytes / key / rank | ranks reporting |\n|---:|---:|---:|---:|---:|---:|\n",
);
for (const r of rows) {
  process.stdout.write(
    `| ${r.ranks} | ${hostsCell(r)} | ${r.cpuMs.toFixed(1)} | ${r.wallMs.toFixed(1)} | ${r.bytesPerKeyPerRank.toFixed(2)} | ${r.reporting} |\n`,
  );
}
// The wall above is inflated by whatever else runs on the machine; CPU time is not. Every process's
// CPU per flush, divided by the cores, is what the flush needs of this machine when it is quiet.
process.stdout.write(
  `\nCPU per flush of every process (median of ${FLUSHES}; ${availableParallelism()} cores):\n\n| ranks | hosts | ranks + agents (host processes) ms | nats-server ms | controller ms | all ms | all ÷ cores ms |\n|---:|---:|---:|---:|---:|---:|---:|\n`,
);
for (const r of rows) {
  process.stdout.write(
    `| ${r.ranks} | ${hostsCell(r)} | ${r.hostsCpuMs.toFixed(0)} | ${r.natsCpuMs.toFixed(0)} | ${r.cpuMs.toFixed(1)} | ${r.totalCpuMs.toFixed(0)} | ${(r.totalCpuMs / availableParallelism()).toFixed(0)} |\n`,
  );
}
const arithmetic = formatBytes(["mean", "sum", "max", "min"]);
const mixed = formatBytes(["mean", "sum", "max", "min", "std", "quantiles"]);
process.stdout.write(
  "\nBytes per key per rank on the wire, one rank's flush (key table already sent):\n\n| keys | binary frame | JSON protocol reply | ratio |\n|---|---:|---:|---:|\n",
);
process.stdout.write(
  `| MEAN/SUM/MAX/MIN | ${arithmetic.wire.toFixed(1)} | ${arithmetic.json.toFixed(1)} | ${(arithmetic.json / arithmetic.wire).toFixed(1)}× |\n`,
);
process.stdout.write(
  `| mixed (with std, quantiles) | ${mixed.wire.toFixed(1)} | ${mixed.json.toFixed(1)} | ${(mixed.json / mixed.wire).toFixed(1)}× |\n`,
);
const rackRows = rows.filter((r) => r.racks !== undefined);
if (rackRows.length > 0) {
  process.stdout.write(
    `\nThe controller's own CPU per flush behind the rack agents, one thread, no NATS (decode one frame per rack, merge, reduce; median of 15), ms:\n\n| ranks | racks | decode + merge + reduce ms |\n|---:|---:|---:|\n`,
  );
  for (const r of rackRows)
    process.stdout.write(
      `| ${r.ranks} | ${r.racks ?? 0} | ${measureControllerFloor(r.ranks, r.racks ?? 1, KEYS).toFixed(1)} |\n`,
    );
}
const target = rows.find((r) => r.ranks === 1024 && r.hosts === 16);
if (target !== undefined) {
  process.stdout.write(
    `\nTarget 1,024 ranks × 16 hosts × ${KEYS} keys: controller CPU ${target.cpuMs.toFixed(1)} ms (≤ 100), flush wall ${target.wallMs.toFixed(1)} ms (≤ 500)\n`,
  );
  // What the simulated ranks and agents cost by themselves (one thread, no NATS): their CPU divided
  // by the cores is a floor for the flush wall on this machine.
  const floor = measureFloor(1024, 16, KEYS);
  const total = Object.values(floor).reduce((a, b) => a + b, 0);
  const cores = availableParallelism();
  process.stdout.write(
    `\nCPU per flush of the 1,024 simulated ranks and 16 agents themselves (one thread, no NATS, median of 5), ms:\n\n| ranks record | ranks take states into frames | agents decode | agents merge | agents encode | total | ÷ ${cores} cores |\n|---:|---:|---:|---:|---:|---:|---:|\n`,
  );
  process.stdout.write(
    `| ${[floor.record, floor.rankTakeEncode, floor.agentDecode, floor.agentMerge, floor.agentEncode, total, total / cores].map((x) => x.toFixed(1)).join(" | ")} |\n`,
  );
}
