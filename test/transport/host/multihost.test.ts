/**
 * Real multi-host runs: a 3-node NATS cluster, one node per network namespace; three hosts, each a
 * namespace with a host agent and two ranks; the controller in the root namespace, on the bridge.
 * Every client is given all three cluster URLs. Faults: one NATS node killed (clients fail over, flushes
 * stay complete), one host cut off and healed (flushes return by their deadline naming its ranks,
 * then it reports again), a host agent killed with -9 and replaced. At the end, every value the
 * six ranks recorded is logged exactly once (late answers are carried into the next flush).
 *
 * With authentication on, as docs/security.md says to deploy: clients reach the nodes over TLS
 * (the nodes' certificate signed by a test CA), each role with its own user and the template's
 * permissions for this run, and the cluster's routes with a route user and password.
 *
 * Skips, saying why, where network namespaces cannot be made (not root, not Linux).
 */
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { diagnosticCounts } from "../../../src/core/diagnostics.js";
import { MetricLogger, type FlushResult } from "../../../src/controller/metric-logger.js";
import { serveHostsOverNats, type HostServer } from "../../../src/transport/host/server.js";
import { ignoredMessageCounts } from "../../../src/transport/protocol/messages.js";
import { tempDir, waitFor, within } from "../../helpers.js";
import { accountsFor, makeCertificates, ROLE_PASSWORD_ENV } from "../auth-support.js";
import { AGENT_MAIN, HOST_RANK } from "../support.js";
import {
  createHosts,
  namespace,
  namespacesUnavailable,
  natsAddress,
  natsNamespace,
  removeHosts,
  runIn,
  setLink,
  type HostProcess,
} from "./netns.js";

const NATS_SERVER =
  ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].find((p) => existsSync(p)) ??
  "nats-server";
const HOSTS = 3;
const RANKS_PER_HOST = 2;
const FLUSH_DEADLINE_MS = 1500;

const unavailable = namespacesUnavailable();
const NODES = 3;
const urls = Array.from({ length: NODES }, (_v, i) => `nats://${natsAddress(i + 1)}:4222`).join(",");
const processes: HostProcess[] = [];
const RUN_ID = `multihost${process.pid}`;
const PASSWORDS = {
  controller: "mh-controller-Pw",
  rack: "mh-rack-Pw",
  host: "mh-host-Pw",
  rank: "mh-rank-Pw",
  route: "mh-route-Pw",
};
const certs =
  unavailable === undefined
    ? makeCertificates(Array.from({ length: NODES }, (_v, i) => natsAddress(i + 1)))
    : undefined;
/** TLS (the nodes' CA) and the role's user, for a process started with these variables. */
const roleEnv = (role: "host" | "rank"): Record<string, string> => ({
  RANKSCOPE_NATS_TLS_CA_FILE: certs?.ca ?? "",
  RANKSCOPE_NATS_USER: `${RUN_ID}-${role}`,
  RANKSCOPE_NATS_PASSWORD: PASSWORDS[role],
});

/** Node `n`'s configuration: TLS for clients, the run's account (docs/security.md's template), routes with a user and password. */
function natsConfig(n: number): string {
  const tls = `tls: { cert_file: ${JSON.stringify(certs?.serverCert)}, key_file: ${JSON.stringify(certs?.serverKey)}, ca_file: ${JSON.stringify(certs?.ca)} }\n`;
  const routes = Array.from({ length: NODES }, (_v, i) =>
    JSON.stringify(`nats-route://route:${PASSWORDS.route}@${natsAddress(i + 1)}:6222`),
  ).join(", ");
  const cluster = `cluster: { name: rs-scale, listen: "${natsAddress(n)}:6222", authorization: { user: route, password: $RS_ROUTE_PASSWORD }, routes: [ ${routes} ] }\n`;
  const file = join(tempDir(), `nats-${n}.conf`);
  writeFileSync(file, tls + cluster + accountsFor([RUN_ID]), { mode: 0o600 });
  return file;
}

function startNats(n: number): HostProcess {
  const env = {
    [ROLE_PASSWORD_ENV.controller]: PASSWORDS.controller,
    [ROLE_PASSWORD_ENV.rack]: PASSWORDS.rack,
    [ROLE_PASSWORD_ENV.host]: PASSWORDS.host,
    [ROLE_PASSWORD_ENV.rank]: PASSWORDS.rank,
    RS_ROUTE_PASSWORD: PASSWORDS.route,
  };
  const node = runIn(natsNamespace(n), NATS_SERVER, ["-c", natsConfig(n), "-a", natsAddress(n), "-p", "4222"], env);
  processes.push(node);
  return node;
}

/** The built package's host agent or rank (support.ts) in host `n`'s namespace, with plain node. */
function startNode(n: number, file: URL, env: Record<string, string>): HostProcess {
  const p = runIn(namespace(n), process.execPath, [file.pathname], env);
  processes.push(p);
  return p;
}

before(() => {
  if (unavailable === undefined) createHosts(HOSTS, NODES);
});
after(async () => {
  for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGKILL");
  await within(Promise.all(processes.map((p) => p.exited)), {
    timeoutMs: 15_000,
    what: "every SIGKILLed test process to exit",
  });
  if (unavailable === undefined) removeHosts();
});

test(
  "3 hosts in network namespaces, a 3-node NATS cluster: node killed, host cut off and healed, agent killed -9",
  { skip: unavailable },
  async () => {
    const nodes = Array.from({ length: NODES }, (_v, i) => startNats(i + 1));
    const logger = new MetricLogger({
      processName: "Controller",
      runDir: tempDir(),
      runId: RUN_ID,
      flushDeadlineMs: FLUSH_DEADLINE_MS,
    });
    let hosts: HostServer | undefined;
    const auth = { tlsCaFile: certs?.ca ?? "", user: `${RUN_ID}-controller`, password: PASSWORDS.controller };
    await waitFor(
      async () => {
        try {
          hosts = await serveHostsOverNats({ url: urls, logger, auth, connectTimeoutMs: 1000 });
          return true;
        } catch {
          return false;
        }
      },
      { timeoutMs: 20_000, what: "the NATS cluster to accept the controller" },
    );
    const server = hosts as HostServer;
    await logger.initBackends({});
    const env = (n: number): Record<string, string> => ({
      RANKSCOPE_NATS_URL: urls,
      RANKSCOPE_RUN_ID: logger.runId,
      RANKSCOPE_RUN_SECRET: logger.runSecret,
      RANKSCOPE_HOST_ID: `h${n}`,
    });
    const agentEnv = (n: number): Record<string, string> => ({ ...env(n), ...roleEnv("host") });
    const agents = Array.from({ length: HOSTS }, (_v, i) => startNode(i + 1, AGENT_MAIN, agentEnv(i + 1)));
    const ranks: HostProcess[] = [];
    for (let n = 1; n <= HOSTS; n++) {
      for (let local = 0; local < RANKS_PER_HOST; local++) {
        const rank = (n - 1) * RANKS_PER_HOST + local;
        ranks.push(
          startNode(n, HOST_RANK, {
            ...env(n),
            ...roleEnv("rank"),
            RANK: String(rank),
            LOCAL_RANK: String(local),
            LOCAL_WORLD_SIZE: String(RANKS_PER_HOST),
            RANKSCOPE_REPLICA_ID: `h${n}`,
          }),
        );
      }
    }
    await waitFor(() => server.hostIds.length === HOSTS && ranks.every((r) => r.stdout.includes("joined as")), {
      timeoutMs: 40_000,
      what: "3 agents and 6 ranks to join",
    });

    let step = 0;
    let logged = 0;
    const flush = async (): Promise<FlushResult> => {
      const result = await logger.flush(step++);
      logged += result.metrics.find((m) => m.key === "scale/values")?.value ?? 0;
      if (process.env["MULTIHOST_TRACE"] === "1")
        process.stderr.write(
          `flush ${result.step}: ${result.ranksReporting}/${result.ranksExpected} values ${result.metrics.find((m) => m.key === "scale/values")?.value ?? 0}\n`,
        );
      return result;
    };
    const everyone = HOSTS * RANKS_PER_HOST;
    await waitFor(async () => (await flush()).ranksReporting === everyone, {
      timeoutMs: 20_000,
      what: "a complete flush",
    });
    const rankOf = (n: number): string[] => [...(server.host(`h${n}`)?.memberRanks() ?? [])].sort();

    // 1. Kill NATS node 1: clients connected to it fail over to nodes 2 and 3.
    nodes[0]?.child.kill("SIGKILL");
    if (nodes[0] !== undefined)
      await within(nodes[0].exited, { timeoutMs: 10_000, what: "the SIGKILLed NATS node 1 to exit" });
    let incomplete = 0;
    for (let i = 0; i < 8; i++) {
      const result = await flush();
      if (result.ranksReporting !== everyone) incomplete++;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.ok(incomplete <= 2, `${incomplete} of 8 flushes after a NATS node died were incomplete`);
    const afterFailover = await flush();
    assert.deepEqual(afterFailover.missingRanks, [], "flushes are complete again after the failover");

    // 2. Cut host 2 off: flushes return by their deadline naming exactly its ranks.
    const host2 = rankOf(2);
    assert.equal(host2.length, RANKS_PER_HOST);
    setLink(2, false);
    let named = false;
    for (let i = 0; i < 4; i++) {
      const started = Date.now();
      const result = await flush();
      assert.ok(
        Date.now() - started < FLUSH_DEADLINE_MS + 1000,
        "a flush returns by its deadline while a host is cut off",
      );
      if (JSON.stringify([...result.missingRanks].sort()) === JSON.stringify(host2)) named = true;
      else
        assert.ok(
          result.missingRanks.every((r) => host2.includes(r)),
          `only host 2's ranks may be missing, got ${result.missingRanks.join(", ")}`,
        );
    }
    assert.ok(named, "the cut-off host's two ranks were named missing");
    setLink(2, true);
    await waitFor(async () => (await flush()).ranksReporting === everyone, {
      timeoutMs: 40_000,
      what: "host 2 to report again after the link healed",
    });

    // 3. Kill host 3's agent with -9: its ranks are named missing, then served by a replacement.
    const host3 = rankOf(3);
    agents[2]?.child.kill("SIGKILL");
    if (agents[2] !== undefined)
      await within(agents[2].exited, { timeoutMs: 10_000, what: "the SIGKILLed agent of host 3 to exit" });
    const dead = await flush();
    assert.deepEqual([...dead.missingRanks].sort(), host3);
    startNode(3, AGENT_MAIN, agentEnv(3));
    await waitFor(async () => (await flush()).ranksReporting === everyone, {
      timeoutMs: 40_000,
      what: "host 3's ranks to be served by the replacement agent",
    });

    // Stop recording, flush what is left: every recorded value is logged or counted as lost.
    for (const r of ranks) r.child.kill("SIGUSR2");
    await waitFor(() => ranks.every((r) => r.stdout.includes("stopped ")), {
      timeoutMs: 10_000,
      what: "the ranks to stop recording",
    });
    await waitFor(async () => (await flush()).ranksReporting === everyone, {
      timeoutMs: 20_000,
      what: "a complete flush after the ranks stopped",
    });
    await flush();
    const recorded = ranks.reduce((sum, r) => sum + Number(/stopped (\d+)/.exec(r.stdout)?.[1] ?? NaN), 0);
    // Late frames were carried into later flushes: every value recorded is logged, once.
    assert.equal(
      logged,
      recorded,
      `logged ${logged} of ${recorded} recorded (${JSON.stringify(server.stats)}, ignored ${JSON.stringify(ignoredMessageCounts())}, per rank ${ranks.map((r) => /stopped (\d+)/.exec(r.stdout)?.[1]).join(",")})`,
    );
    assert.equal(server.stats.lostStates, 0);
    // The template gave every role what it needed: nothing was refused.
    assert.deepEqual(
      Object.keys(diagnosticCounts()).filter(
        (code) => code.startsWith("transport.nats.permission") || code.startsWith("transport.nats.auth"),
      ),
      [],
    );
    for (const p of [...agents, ...ranks]) assert.doesNotMatch(p.stderr, /refused/, p.stderr);
    await logger.shutdown();
  },
);

const RACK_MAIN = new URL("../../../dist/transport/rack/main.js", import.meta.url);
/**
 * The rack test's flush deadline: each level answers by its parent's deadline less a quarter (at
 * most 1 s; docs/scale.md), so 1.5 s left a host agent 0.84 s and 3 s left it 1.7 s, which a
 * rank of a healthy rack missed at the first flush after joining, four test files at a time
 * (load 10–20).
 */
const RACK_FLUSH_DEADLINE_MS = 5000;

test(
  "rack agents in network namespaces: a rack agent killed -9 mid-flush and replaced, a whole rack cut off for seconds and healed",
  { skip: unavailable },
  async () => {
    // Node 1 died in the test above: start it again, so every client has three nodes to choose from.
    startNats(1);
    const logger = new MetricLogger({
      processName: "Controller",
      runDir: tempDir(),
      runId: RUN_ID,
      flushDeadlineMs: RACK_FLUSH_DEADLINE_MS,
    });
    const auth = { tlsCaFile: certs?.ca ?? "", user: `${RUN_ID}-controller`, password: PASSWORDS.controller };
    let served: HostServer | undefined;
    await waitFor(
      async () => {
        try {
          served = await serveHostsOverNats({ url: urls, logger, auth, connectTimeoutMs: 1000 });
          return true;
        } catch {
          return false;
        }
      },
      { timeoutMs: 20_000, what: "the NATS cluster to accept the controller" },
    );
    const server = served as HostServer;
    // The logger's NATS connection ends with it, also when an assertion fails (else it keeps the
    // file's process alive, and the suite waits for it).
    try {
      await logger.initBackends({});
      // Rack k1: hosts 1 and 2 (its agent in host 1's namespace); rack k2: host 3 (its agent there).
      const rackOf = (n: number): string => (n <= 2 ? "k1" : "k2");
      const base = {
        RANKSCOPE_NATS_URL: urls,
        RANKSCOPE_RUN_ID: logger.runId,
        RANKSCOPE_RUN_SECRET: logger.runSecret,
      };
      const rackEnv = (rack: string): Record<string, string> => ({
        ...base,
        RANKSCOPE_RACK_ID: rack,
        RANKSCOPE_NATS_TLS_CA_FILE: certs?.ca ?? "",
        RANKSCOPE_NATS_USER: `${RUN_ID}-rack`,
        RANKSCOPE_NATS_PASSWORD: PASSWORDS.rack,
      });
      const env = (n: number): Record<string, string> => ({ ...base, RANKSCOPE_HOST_ID: `h${n}` });
      const racks = { k1: startNode(1, RACK_MAIN, rackEnv("k1")), k2: startNode(3, RACK_MAIN, rackEnv("k2")) };
      for (let n = 1; n <= HOSTS; n++)
        startNode(n, AGENT_MAIN, { ...env(n), ...roleEnv("host"), RANKSCOPE_RACK_ID: rackOf(n) });
      const ranks: HostProcess[] = [];
      for (let n = 1; n <= HOSTS; n++)
        for (let local = 0; local < RANKS_PER_HOST; local++)
          ranks.push(
            startNode(n, HOST_RANK, {
              ...env(n),
              ...roleEnv("rank"),
              RANK: String((n - 1) * RANKS_PER_HOST + local),
              LOCAL_RANK: String(local),
              LOCAL_WORLD_SIZE: String(RANKS_PER_HOST),
              RANKSCOPE_REPLICA_ID: `h${n}`,
              RANK_PROCESS_NAME: "RackRank",
            }),
          );
      await waitFor(() => server.hostIds.length === 2 && ranks.every((r) => r.stdout.includes("joined as")), {
        timeoutMs: 40_000,
        what: "2 rack agents and 6 ranks to join",
      });
      let step = 0;
      let logged = 0;
      const flush = async (): Promise<FlushResult> => {
        const result = await logger.flush(step++);
        logged += result.metrics.find((m) => m.key === "scale/values")?.value ?? 0;
        return result;
      };
      const everyone = HOSTS * RANKS_PER_HOST;
      const complete = (what: string): Promise<boolean> =>
        waitFor(
          async () => {
            const result = await flush();
            return result.ranksReporting === everyone && result.ranksExpected === everyone;
          },
          { timeoutMs: 40_000, what },
        );
      // Two complete flushes in a row before the faults: the ranks' first flushes after joining
      // (their first frames, a process just started on a loaded machine) are not what this tests.
      await complete("a complete flush through both racks");
      await complete("a second complete flush through both racks");
      assert.deepEqual(server.hostIds.sort(), ["k1", "k2"], "the controller serves the racks");
      const k1Ranks = [...(server.host("k1")?.memberRanks() ?? [])].sort();
      const k2Ranks = [...(server.host("k2")?.memberRanks() ?? [])].sort();
      assert.equal(k1Ranks.length, 4);
      assert.deepEqual([...(server.host("k1")?.memberHostList() ?? [])].sort(), ["h1", "h1", "h2", "h2"]);

      // 1. Kill rack k2's agent with -9 while a flush is in progress: the flush returns by its
      //    deadline (naming k2's ranks, unless the rack answered first); a replacement takes over.
      const during = flush();
      await new Promise((resolve) => setTimeout(resolve, RACK_FLUSH_DEADLINE_MS / 3));
      racks.k2.child.kill("SIGKILL");
      await within(racks.k2.exited, { timeoutMs: 10_000, what: "the SIGKILLed rack agent k2 to exit" });
      const cut = await during;
      assert.ok(
        cut.missingRanks.every((r) => k2Ranks.includes(r)),
        `only k2's ranks may be missing: ${cut.missingRanks.join(", ")}`,
      );
      const started = Date.now();
      const without = await flush();
      assert.ok(
        Date.now() - started < RACK_FLUSH_DEADLINE_MS + 1000,
        "a flush returns by its deadline without rack k2",
      );
      assert.deepEqual([...without.missingRanks].sort(), k2Ranks, "k2's ranks named missing");
      racks.k2 = startNode(3, RACK_MAIN, rackEnv("k2"));
      await complete("rack k2's ranks to be served by the replacement rack agent");

      // 2. Cut rack k1 off (its agent's host and its other host) for a few seconds.
      setLink(1, false);
      setLink(2, false);
      const cutAt = Date.now();
      let named = false;
      while (Date.now() - cutAt < 3000) {
        const t0 = Date.now();
        const result = await flush();
        assert.ok(
          Date.now() - t0 < RACK_FLUSH_DEADLINE_MS + 1000,
          "a flush returns by its deadline while a rack is cut off",
        );
        if (JSON.stringify([...result.missingRanks].sort()) === JSON.stringify(k1Ranks)) named = true;
        else
          assert.ok(
            result.missingRanks.every((r) => k1Ranks.includes(r)),
            `only k1's ranks may be missing`,
          );
      }
      assert.ok(named, "the cut-off rack's four ranks were named missing");
      setLink(1, true);
      setLink(2, true);
      await complete("rack k1 to report again after its links healed");

      // Stop recording, flush what is left: every recorded value is logged, once.
      for (const r of ranks) r.child.kill("SIGUSR2");
      await waitFor(() => ranks.every((r) => r.stdout.includes("stopped ")), {
        timeoutMs: 10_000,
        what: "the ranks to stop recording",
      });
      await complete("a complete flush after the ranks stopped");
      await flush();
      const recorded = ranks.reduce((sum, r) => sum + Number(/stopped (\d+)/.exec(r.stdout)?.[1] ?? NaN), 0);
      assert.equal(logged, recorded, `logged ${logged} of ${recorded} recorded (${JSON.stringify(server.stats)})`);
      assert.deepEqual(
        Object.keys(diagnosticCounts()).filter(
          (code) => code.startsWith("transport.nats.permission") || code.startsWith("transport.nats.auth"),
        ),
        [],
      );
    } finally {
      await logger.shutdown();
    }
  },
);
