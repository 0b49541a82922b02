/**
 * One process of the scale harness (`bench/scale.bench.ts`): several simulated hosts, each a real
 * host agent (`startHostAgent`) and many lightweight ranks. Every rank is a real `RankRuntime` with
 * its own `Collector` and identity, joined to its host's agent over NATS with the real protocol
 * (`joinOverNats` + `RankAgent`), exactly as a rank process would be — only many of them share
 * this process and its event loop.
 *
 * Driven by the bench over NATS: `bench.{runId}.record` (payload: the step) makes every rank record
 * one value per key; the process answers once all its ranks have recorded.
 * Env: SCALE_NATS_URL, SCALE_RUN_ID, SCALE_RUN_SECRET (the controller's run secret), SCALE_HOSTS (comma-separated host ids), SCALE_RANKS_PER_HOST,
 * SCALE_FIRST_RANK, SCALE_WORLD, SCALE_KEYS; SCALE_HOSTS_PER_RACK: host `h{n}` answers rack agent
 * `k{⌊n / SCALE_HOSTS_PER_RACK⌋}`, which the process holding the rack's first host starts (a rack's
 * hosts are all in one process), so rack agents run in the host processes, not the controller's.
 */
import { connect } from "@nats-io/transport-node";
import { authConnectionOptions, resolveNatsAuth, type NatsAuthOptions } from "../src/transport/protocol/nats-auth.js";
import { Collector, type MetricEntry } from "../src/core/collector.js";
import { RankRuntime } from "../src/pipeline/runtime.js";
import { startHostAgent, type HostAgent } from "../src/transport/host/agent.js";
import { startRackAgent, type RackAgent } from "../src/transport/rack/agent.js";
import { joinOverNats } from "../src/transport/rank/nats.js";
import { RankAgent } from "../src/transport/rank/rank-agent.js";
import { scaleKeys } from "./scale-keys.js";

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set (this file is started by bench/scale.bench.ts)`);
  return value;
};
const url = env("SCALE_NATS_URL");
const runId = env("SCALE_RUN_ID");
const runSecret = env("SCALE_RUN_SECRET");
const hostIds = env("SCALE_HOSTS").split(",");
const ranksPerHost = Number(env("SCALE_RANKS_PER_HOST"));
let nextRank = Number(env("SCALE_FIRST_RANK"));
const keys = scaleKeys(Number(env("SCALE_KEYS")));
// SCALE_AUTH (JSON: the test certificates, the users' password, whether TLS): each role as its user, with TLS and a client certificate when `tls`.
const secure =
  process.env["SCALE_AUTH"] === undefined
    ? undefined
    : (JSON.parse(process.env["SCALE_AUTH"]) as {
        ca: string;
        clientCert: string;
        clientKey: string;
        password: string;
        tls: boolean;
      });
const authAs = (user: string): NatsAuthOptions =>
  secure === undefined
    ? {}
    : secure.tls
      ? {
          tlsCaFile: secure.ca,
          tlsCertFile: secure.clientCert,
          tlsKeyFile: secure.clientKey,
          user,
          password: secure.password,
        }
      : { user, password: secure.password };
const rankAuth = resolveNatsAuth("bench rank", url, authAs(`${runId}-rank`), {});

const ranks: Array<{ entries: MetricEntry[]; leave: (reason: string) => Promise<void> }> = [];
const agents: HostAgent[] = [];
const racks: RackAgent[] = [];
// SCALE_DIRECT=1: no agents, every rank joins the controller itself (today's path, for comparison).
const direct = process.env["SCALE_DIRECT"] === "1";
const hostsPerRack =
  process.env["SCALE_HOSTS_PER_RACK"] === undefined ? undefined : Number(process.env["SCALE_HOSTS_PER_RACK"]);
for (const hostId of hostIds) {
  const n = Number(hostId.slice(1));
  const rackId = hostsPerRack === undefined ? undefined : `k${Math.floor(n / hostsPerRack)}`;
  if (rackId !== undefined && n % (hostsPerRack ?? 1) === 0)
    racks.push(
      await startRackAgent({ url, runId, runSecret, rackId, joinDeadlineMs: 60_000, auth: authAs(`${runId}-rack`) }),
    );
  if (!direct)
    agents.push(
      await startHostAgent({
        url,
        runId,
        runSecret,
        hostId,
        joinDeadlineMs: 60_000,
        auth: authAs(`${runId}-host`),
        ...(rackId === undefined ? {} : { rackId }),
      }),
    );
  for (let local = 0; local < ranksPerHost; local++) {
    const rank = nextRank++;
    const identity = {
      rank,
      rankName: `Sim_${hostId}_r${local}`,
      processName: "Sim",
      localRank: local,
      localWorldSize: ranksPerHost,
    };
    const collector = new Collector();
    const runtime = new RankRuntime(identity, collector);
    const leave = await joinOverNats(new RankAgent({ runId, runtime }), {
      url,
      auth: rankAuth,
      runId,
      runSecret,
      joinDeadlineMs: 60_000,
      ...(direct ? {} : { scope: hostId }),
    });
    // Bound once, like `metric(key, reduce)`: recording is one append per value.
    const entries = keys.map(({ key, reduce }) => collector.entryFor(key, reduce) as MetricEntry);
    ranks.push({ entries, leave });
  }
}

const nc = await connect({
  ...authConnectionOptions(resolveNatsAuth("bench", url, secure === undefined ? {} : authAs("bench"), {})),
  name: `scale-host-${hostIds[0] ?? ""}`,
});
nc.subscribe(`bench.${runId}.record.${env("SCALE_PROCESS")}`, {
  callback: (_err, msg) => {
    const step = Number(new TextDecoder().decode(msg.data));
    ranks.forEach((rank, r) => {
      for (let k = 0; k < rank.entries.length; k++)
        (rank.entries[k] as MetricEntry).accumulator.append((((r * 7 + k * 13 + step) % 101) / 10) as never);
    });
    msg.respond("recorded");
  },
});
// CPU time of this process so far (the bench sums every process's CPU per flush: a figure the machine's other load does not inflate).
nc.subscribe(`bench.${runId}.cpu.${env("SCALE_PROCESS")}`, {
  callback: (_err, msg) => {
    const { user, system } = process.cpuUsage();
    msg.respond(String((user + system) / 1000));
  },
});
// Memory in use by this process after a full collection: the JS heap and the ArrayBuffers (frames kept by
// ranks live there), which the bench divides by the ranks: memory per rank.
nc.subscribe(`bench.${runId}.mem.${env("SCALE_PROCESS")}`, {
  callback: (_err, msg) => {
    (globalThis as { gc?: () => void }).gc?.();
    const { heapUsed, arrayBuffers } = process.memoryUsage();
    msg.respond(String(heapUsed + arrayBuffers));
  },
});
nc.subscribe(`bench.${runId}.exit`, {
  callback: () => {
    void (async () => {
      await Promise.all(ranks.map((r) => r.leave("bench done")));
      await Promise.all(agents.map((a) => a.close("bench done")));
      await Promise.all(racks.map((a) => a.close("bench done")));
      await nc.close();
      process.exit(0);
    })();
  },
});
process.stdout.write(`ready ${ranks.length}\n`);
