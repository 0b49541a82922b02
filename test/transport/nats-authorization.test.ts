/**
 * The authorization template of docs/security.md, run as written: a real nats-server with one
 * account per run (runs A and B, each the page's block with `<run>` replaced) and an account of
 * another application. A live run A — its controller serving ranks and hosts, a host agent, a
 * rank joined directly and one through the agent, each with its role's user — flushes complete,
 * with no permission refused. Then real NATS clients try what they should not: without
 * credentials they are not let in; as run B's users, or as another application, they can neither
 * read nor publish on run A's subjects; as run A's rank or host agent they cannot act as its
 * controller. Each attempt is a permission violation the server reports, nothing reaches the run,
 * and the run's numbers stay exactly what its ranks recorded.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { connect, errors, type Msg } from "@nats-io/transport-node";
import { Collector } from "../../src/core/collector.js";
import { diagnosticCounts } from "../../src/core/diagnostics.js";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { serveRanksOverNats } from "../../src/transport/controller/nats.js";
import { startHostAgent } from "../../src/transport/host/agent.js";
import { startRackAgent } from "../../src/transport/rack/agent.js";
import { serveHostsOverNats } from "../../src/transport/host/server.js";
import { resolveNatsAuth } from "../../src/transport/protocol/nats-auth.js";
import { joinOverNats } from "../../src/transport/rank/nats.js";
import { RankAgent } from "../../src/transport/rank/rank-agent.js";
import { RankRuntime } from "../../src/pipeline/runtime.js";
import { tempDir, waitFor } from "../helpers.js";
import { accountsFor, plainClient, ROLE_PASSWORD_ENV, type PlainClient } from "./auth-support.js";
import { NatsServer } from "./support.js";

const RUN_A = "authzA";
const RUN_B = "authzB";
const PASSWORDS = { controller: "c-secret-1", host: "h-secret-2", rank: "r-secret-3", rack: "k-secret-4" } as const;
const OTHER_APP = `OTHER_APP: { users: [ { user: "other", password: "other-secret" } ] }\n`;

let server: NatsServer;
const clients: PlainClient[] = [];
before(async () => {
  const config = accountsFor([RUN_A, RUN_B]).replace(/}\n$/, `${OTHER_APP}}\n`);
  const env = {
    [ROLE_PASSWORD_ENV.controller]: PASSWORDS.controller,
    [ROLE_PASSWORD_ENV.host]: PASSWORDS.host,
    [ROLE_PASSWORD_ENV.rack]: PASSWORDS.rack,
    [ROLE_PASSWORD_ENV.rank]: PASSWORDS.rank,
  };
  server = await NatsServer.start({ config, env });
});
after(async () => {
  await Promise.all(clients.map((c) => c.nc.close()));
  await server.stop();
});

const role = (run: string, r: keyof typeof PASSWORDS) => ({ user: `${run}-${r}`, password: PASSWORDS[r] });

/** A rank in this process (its own collector), joined over NATS as `r`'s user — directly, or through host `scope`'s agent. */
async function joinRank(
  runSecret: string,
  rankName: string,
  rank: number,
  scope?: string,
): Promise<{ collector: Collector; leave: (reason: string) => Promise<void> }> {
  const collector = new Collector();
  const runtime = new RankRuntime({ rank, rankName, processName: "Authz", localRank: 0, localWorldSize: 1 }, collector);
  const auth = resolveNatsAuth("test rank", server.url, role(RUN_A, "rank"), {});
  const leave = await joinOverNats(new RankAgent({ runId: RUN_A, runtime }), {
    url: server.url,
    auth,
    runId: RUN_A,
    runSecret,
    joinDeadlineMs: 20_000,
    ...(scope === undefined ? {} : { scope }),
  });
  return { collector, leave };
}

async function attacker(user?: { user: string; pass: string }): Promise<PlainClient> {
  const client = await plainClient(server.url, user ?? {});
  clients.push(client);
  return client;
}

/** Subscribe to each subject and publish to each (a forged register, flush…); resolve with what the subscriptions received. */
async function tryEverything(
  client: PlainClient,
  subscribeTo: readonly string[],
  publishTo: readonly string[],
): Promise<string[]> {
  const received: string[] = [];
  // The server's own "no responders" answer to a forged request is not something the run sent.
  const fromTheRun = (msg: Msg): boolean => msg.headers?.code !== 503;
  for (const subject of subscribeTo)
    client.nc.subscribe(subject, {
      callback: (err, msg) => {
        if (err === null && fromTheRun(msg)) received.push(msg.subject);
      },
    });
  const forged = JSON.stringify({
    proto: "rankscope",
    v: 1,
    run: RUN_A,
    t: "register",
    rankName: "Intruder_r0",
    pid: 1,
    host: "x",
  });
  for (const subject of publishTo)
    client.nc.publish(subject, forged, { reply: `rankscope.${RUN_A}.inbox.rank.intruder` });
  await client.nc.flush();
  return received;
}

test(
  "docs/security.md's template: a live run works with its four roles; no credentials, another run, another app and a rank acting as controller are all refused",
  { timeout: 120_000 },
  async () => {
    const logger = new MetricLogger({
      processName: "Controller",
      runDir: tempDir(),
      runId: RUN_A,
      flushDeadlineMs: 3000,
    });
    await logger.initBackends({});
    const controllerUrl = `nats://${RUN_A}-controller:${PASSWORDS.controller}@127.0.0.1:${server.port}`;
    const ranks = await serveRanksOverNats({ url: controllerUrl, logger });
    assert.equal(ranks.url, server.url, "the server keeps the URL without its credentials");
    const hosts = await serveHostsOverNats({ url: server.url, logger, auth: role(RUN_A, "controller") });
    const agent = await startHostAgent({
      url: server.url,
      runId: RUN_A,
      runSecret: logger.runSecret,
      hostId: "h0",
      auth: role(RUN_A, "host"),
      joinDeadlineMs: 20_000,
    });
    // A rack agent with the rack role, and a host agent below it.
    const rack = await startRackAgent({
      url: server.url,
      runId: RUN_A,
      runSecret: logger.runSecret,
      rackId: "k0",
      auth: role(RUN_A, "rack"),
      joinDeadlineMs: 20_000,
    });
    const rackHost = await startHostAgent({
      url: server.url,
      runId: RUN_A,
      runSecret: logger.runSecret,
      hostId: "h1",
      rackId: "k0",
      auth: role(RUN_A, "host"),
      joinDeadlineMs: 20_000,
    });
    const direct = await joinRank(logger.runSecret, "Authz_d_r0", 0);
    const viaAgent = await joinRank(logger.runSecret, "Authz_h_r0", 1, "h0");
    const viaRack = await joinRank(logger.runSecret, "Authz_k_r0", 2, "h1");
    await waitFor(() => hosts.hostIds.length === 2 && ranks.rankNames.length === 1, {
      timeoutMs: 20_000,
      what: "the agent and the direct rank to register",
    });

    let step = 0;
    let logged = 0;
    let recorded = 0;
    const record = (): void => {
      for (const r of [direct, viaAgent, viaRack]) r.collector.recordSlow("authz/values", 1, "sum");
      recorded += 3;
    };
    const flush = async () => {
      const result = await logger.flush(step++);
      logged += result.metrics.find((m) => m.key === "authz/values")?.value ?? 0;
      return result;
    };
    record();
    await waitFor(async () => (await flush()).ranksReporting === 3, {
      timeoutMs: 20_000,
      what: "a flush with the three ranks",
    });

    // 1. No credentials: not let in.
    await assert.rejects(
      connect({ servers: server.url, timeout: 5000, maxReconnectAttempts: 0 }),
      (error: unknown) => error instanceof errors.AuthorizationError,
    );

    // 2. Run B's users and another application's user read and publish on run A's subjects.
    const runASubjects = [
      `rankscope.${RUN_A}.>`,
      `rankscope.${RUN_A}.flush`,
      `rankscope.${RUN_A}.ctl.*`,
      `rankscope.${RUN_A}.hosts.flush`,
      `rankscope.${RUN_A}.host.h0.ctl.*`,
    ];
    const forgeries = [
      `rankscope.${RUN_A}.register`,
      `rankscope.${RUN_A}.flush`,
      `rankscope.${RUN_A}.rank.Authz_d_r0`,
      `rankscope.${RUN_A}.hostctl.h0`,
      `rankscope.${RUN_A}.host.h0.register`,
    ];
    const outsiders: Array<[string, PlainClient]> = [];
    for (const r of ["controller", "host", "rank"] as const)
      outsiders.push([`run B's ${r}`, await attacker({ user: `${RUN_B}-${r}`, pass: PASSWORDS[r] })]);
    outsiders.push(["another application", await attacker({ user: "other", pass: "other-secret" })]);
    const outsideReads = await Promise.all(outsiders.map(([, c]) => tryEverything(c, runASubjects, forgeries)));

    // 3. Run A's own rank and host agent users try to act as its controller.
    const rankUser = await attacker({ user: `${RUN_A}-rank`, pass: PASSWORDS.rank });
    const rankReads = await tryEverything(
      rankUser,
      [
        `rankscope.${RUN_A}.ctl.*`,
        `rankscope.${RUN_A}.register`,
        `rankscope.${RUN_A}.>`,
        `rankscope.${RUN_A}.inbox.controller.>`,
      ],
      [
        `rankscope.${RUN_A}.flush`,
        `rankscope.${RUN_A}.rank.Authz_d_r0`,
        `rankscope.${RUN_A}.hostctl.h0`,
        `rankscope.${RUN_A}.hosts.flush`,
        `rankscope.${RUN_A}.host.h0.rank.Authz_h_r0`,
      ],
    );
    const hostUser = await attacker({ user: `${RUN_A}-host`, pass: PASSWORDS.host });
    const hostReads = await tryEverything(
      hostUser,
      [`rankscope.${RUN_A}.ctl.*`, `rankscope.${RUN_A}.register`],
      [`rankscope.${RUN_A}.flush`, `rankscope.${RUN_A}.rank.Authz_d_r0`, `rankscope.${RUN_A}.hostctl.h0`],
    );

    // The run goes on meanwhile: every value its ranks record is logged, once.
    for (let i = 0; i < 3; i++) {
      record();
      const result = await flush();
      assert.deepEqual(result.missingRanks, []);
    }
    assert.equal(logged, recorded, "every value the three ranks recorded was logged exactly once");
    assert.deepEqual(ranks.rankNames, ["Authz_d_r0"], "no forged rank registered");
    assert.deepEqual(hosts.hostIds.sort(), ["h0", "k0"]);

    // Every attempt was refused by the server, by name; nothing was read.
    for (const [who, client] of outsiders.slice(0, 3)) {
      await waitFor(() => client.violations.length >= runASubjects.length + forgeries.length, {
        timeoutMs: 10_000,
        what: `${who}'s every attempt to be refused`,
      });
      assert.deepEqual(
        new Set(client.violations.filter((v) => v.operation === "publish").map((v) => v.subject)),
        new Set(forgeries),
        who,
      );
    }
    // Another account sees nothing of run A (no violation: its subjects are simply another world).
    outsideReads.forEach((reads, i) =>
      assert.deepEqual(reads, [], `${outsiders[i]?.[0] ?? "?"} read nothing of run A`),
    );
    await waitFor(() => rankUser.violations.length >= 9, {
      timeoutMs: 10_000,
      what: "the rank user's every attempt to be refused",
    });
    assert.deepEqual(
      new Set(rankUser.violations.filter((v) => v.operation === "subscription").map((v) => v.subject)),
      new Set([
        `rankscope.${RUN_A}.ctl.*`,
        `rankscope.${RUN_A}.register`,
        `rankscope.${RUN_A}.>`,
        `rankscope.${RUN_A}.inbox.controller.>`,
      ]),
    );
    assert.deepEqual(rankReads, []);
    await waitFor(() => hostUser.violations.length >= 5, {
      timeoutMs: 10_000,
      what: "the host user's every attempt to be refused",
    });
    assert.deepEqual(hostReads, []);

    // The run's own four roles were never refused anything: the template grants what they need.
    const refused = Object.keys(diagnosticCounts()).filter(
      (code) => code.startsWith("transport.nats.permission") || code.startsWith("transport.nats.auth"),
    );
    assert.deepEqual(refused, []);

    await Promise.all([direct.leave("test done"), viaAgent.leave("test done"), viaRack.leave("test done")]);
    await agent.close("test done");
    await rackHost.close("test done");
    await rack.close("test done");
    await logger.shutdown();
  },
);
