/**
 * Every way NATS authenticates, end to end: for each — user and password (docs/security.md's
 * template, three roles), a token, nkeys, a creds file (operator mode, JWTs), TLS with a CA and
 * client certificates the server verifies — a real nats-server configured for it alone, and a run
 * whose controller (in this process), host agent (the `host/main` process, configured by
 * environment), a rank started by `spawnRanks({ nats })` and a rank joining through the agent all
 * connect with it. The flushes are complete and exact; a client without credentials is refused;
 * the spawned rank got its credentials in its environment, never on its command line; no process
 * printed a secret, and a controller given wrong credentials fails at once saying so, without
 * showing them.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, test } from "node:test";
import { connect, type ConnectionOptions } from "@nats-io/transport-node";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { spawnRanks } from "../../src/transport/controller/launcher.js";
import { serveRanksOverNats } from "../../src/transport/controller/nats.js";
import { serveHostsOverNats } from "../../src/transport/host/server.js";
import type { NatsAuthOptions } from "../../src/transport/protocol/nats-auth.js";
import { tempDir, waitFor, within } from "../helpers.js";
import { accountsFor, makeCertificates, makeNkey, makeOperatorAccount, ROLE_PASSWORD_ENV } from "./auth-support.js";
import {
  AGENT_MAIN,
  HOST_RANK,
  killChildren,
  NatsServer,
  startChild,
  SUM_RANK,
  type NatsServerOptions,
  type TestChild,
} from "./support.js";

/** How one method is set up: the server, and what each of the run's processes is given. */
interface Method {
  readonly server: NatsServerOptions;
  /** The controller's URL (credentials may be in it) and settings. */
  controllerUrl(server: NatsServer): string;
  readonly controllerAuth?: NatsAuthOptions;
  /** `RANKSCOPE_NATS_*` variables of the host agent and of the rank that joins through it. */
  readonly agentEnv: Record<string, string>;
  readonly rankEnv: Record<string, string>;
  /** The spawned rank's settings (`spawnRanks({ natsAuth })`); none: the controller's own. */
  readonly natsAuth?: NatsAuthOptions;
  /** Values no process may print, nor pass on a command line. */
  readonly secrets: readonly string[];
  /** What a client without credentials still has (with TLS: the CA, but no client certificate). */
  readonly outsider?: ConnectionOptions;
}

const children: TestChild[] = [];
const servers: NatsServer[] = [];
after(async () => {
  killChildren(children);
  await Promise.all(servers.map((s) => s.stop()));
});

/** A client without credentials (with TLS: without a client certificate) is refused. */
async function assertOutsiderRefused(server: NatsServer, outsider: ConnectionOptions = {}): Promise<void> {
  await assert.rejects(
    connect({ servers: server.url, timeout: 5000, maxReconnectAttempts: 0, ...outsider }),
    "a client without credentials is refused",
  );
}

/** The run: controller here, an agent and a host rank as processes, one spawned rank; complete, exact flushes. */
async function runWith(runId: string, method: Method): Promise<void> {
  const server = await NatsServer.start(method.server);
  servers.push(server);
  await assertOutsiderRefused(server, method.outsider);
  const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), runId, flushDeadlineMs: 5000 });
  await logger.initBackends({});
  const url = method.controllerUrl(server);
  const ranks = await serveRanksOverNats({
    url,
    logger,
    ...(method.controllerAuth === undefined ? {} : { auth: method.controllerAuth }),
  });
  const hosts = await serveHostsOverNats({
    url,
    logger,
    ...(method.controllerAuth === undefined ? {} : { auth: method.controllerAuth }),
  });
  const base = {
    RANKSCOPE_NATS_URL: server.url,
    RANKSCOPE_RUN_ID: runId,
    RANKSCOPE_RUN_SECRET: logger.runSecret,
    RANKSCOPE_HOST_ID: "h0",
  };
  const agent = startChild(AGENT_MAIN, { ...base, ...method.agentEnv }, children);
  await waitFor(() => hosts.hostIds.length === 1 || agent.process.exitCode !== null, {
    timeoutMs: 30_000,
    what: "the host agent to register",
  });
  assert.deepEqual(hosts.hostIds, ["h0"], agent.stderr);
  const hostRank = startChild(
    HOST_RANK,
    { ...base, ...method.rankEnv, RANK: "1", LOCAL_RANK: "0", LOCAL_WORLD_SIZE: "1", RANKSCOPE_REPLICA_ID: "h0" },
    children,
  );
  const group = await spawnRanks({
    module: SUM_RANK,
    nats: ranks,
    logger,
    processName: "Direct",
    startDeadlineMs: 60_000,
    ...(method.natsAuth === undefined ? {} : { natsAuth: method.natsAuth }),
  });
  await waitFor(() => hostRank.stdout.includes("joined as") || hostRank.process.exitCode !== null, {
    timeoutMs: 30_000,
    what: "the host rank to join its agent",
  });
  assert.match(hostRank.stdout, /joined as/, hostRank.stderr);

  const [spawned] = group.rankNames;
  assert.ok(spawned !== undefined);
  // The spawned rank was handed its settings in its environment: its command line holds none.
  const pid = group.pid(spawned);
  assert.ok(pid !== undefined);
  const commandLine = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  for (const secret of method.secrets)
    assert.ok(!commandLine.includes(secret), "no secret on the spawned rank's command line");
  if (method.natsAuth?.user !== undefined)
    assert.equal(
      await group.call(spawned, "envValue", "RANKSCOPE_NATS_USER"),
      method.natsAuth.user,
      "the spawned rank connects as natsAuth's user",
    );

  await group.call(spawned, "record", "auth/value", 7, "sum");
  let step = 0;
  let value = 0;
  let maxRank = -1;
  await waitFor(
    async () => {
      const result = await logger.flush(step++);
      value += result.metrics.find((m) => m.key === "auth/value")?.value ?? 0;
      maxRank = Math.max(maxRank, result.metrics.find((m) => m.key === "scale/max_rank")?.value ?? -1);
      return result.ranksReporting === 2 && result.missingRanks.length === 0 && maxRank === 1;
    },
    { timeoutMs: 30_000, what: "a complete flush with the spawned rank and the host's rank" },
  );
  assert.equal(value, 7, "the spawned rank's value, logged once");
  await logger.shutdown();
  await within(agent.exited, { timeoutMs: 15_000, what: "the host agent to leave at shutdown" });
  await within(hostRank.exited, { timeoutMs: 15_000, what: "the host rank to leave at shutdown" });
  for (const child of [agent, hostRank]) {
    assert.doesNotMatch(child.stderr, /refused|Permissions Violation/i, child.stderr);
    for (const secret of method.secrets)
      assert.ok(!child.stdout.includes(secret) && !child.stderr.includes(secret), "no process printed a secret");
  }
  await server.stop();
}

const nkeyEnv = (name: "SEED" | "SEED_FILE", value: string): Record<string, string> => ({
  [`RANKSCOPE_NATS_NKEY_${name}`]: value,
});

test(
  "user and password (docs/security.md's template): controller from the URL, agent and ranks as their own roles",
  { timeout: 180_000 },
  async () => {
    const runId = "authUser";
    const passwords = { controller: "ctl-Pw-1", host: "host-Pw-2", rank: "rank-Pw-3" };
    const server = {
      config: accountsFor([runId]),
      env: {
        [ROLE_PASSWORD_ENV.controller]: passwords.controller,
        [ROLE_PASSWORD_ENV.rack]: "rack-Pw-4",
        [ROLE_PASSWORD_ENV.host]: passwords.host,
        [ROLE_PASSWORD_ENV.rank]: passwords.rank,
      },
    };
    const asUser = (role: "host" | "rank"): Record<string, string> => ({
      RANKSCOPE_NATS_USER: `${runId}-${role}`,
      RANKSCOPE_NATS_PASSWORD: passwords[role],
    });
    await runWith(runId, {
      server,
      controllerUrl: (s) => `nats://${runId}-controller:${passwords.controller}@127.0.0.1:${s.port}`,
      agentEnv: asUser("host"),
      rankEnv: asUser("rank"),
      natsAuth: { user: `${runId}-rank`, password: passwords.rank },
      secrets: Object.values(passwords),
    });

    // A controller given a wrong password fails at once, naming the method and user, not the password.
    const again = await NatsServer.start(server);
    servers.push(again);
    const logger = new MetricLogger({ processName: "Controller", runDir: tempDir(), runId });
    const refused = await serveRanksOverNats({
      url: `nats://${runId}-controller:Wrong-Pw-9@127.0.0.1:${again.port}`,
      logger,
    }).then(
      () => assert.fail("a wrong password was accepted"),
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    );
    assert.match(refused, /refused its credentials \(user\/password \(user "authUser-controller"\)\)/);
    assert.ok(!refused.includes("Wrong-Pw-9"), refused);
    await logger.shutdown();
  },
);

test(
  "a token: the controller's from its URL, passed on to the spawned rank in its environment",
  { timeout: 180_000 },
  async () => {
    const token = "tok-3b1f9c2e";
    await runWith("authToken", {
      server: { config: `authorization: { token: "${token}" }\n` },
      controllerUrl: (s) => `nats://${token}@127.0.0.1:${s.port}`,
      agentEnv: { RANKSCOPE_NATS_TOKEN: token },
      rankEnv: { RANKSCOPE_NATS_TOKEN: token },
      secrets: [token],
    });
  },
);

test("nkeys: a seed in code, a seed file, a seed in the environment", { timeout: 180_000 }, async () => {
  const [controller, host, rank] = [makeNkey(), makeNkey(), makeNkey()];
  assert.ok(controller !== undefined && host !== undefined && rank !== undefined);
  await runWith("authNkey", {
    server: {
      config: `authorization: { users: [ ${[controller, host, rank].map((k) => `{ nkey: ${k.publicKey} }`).join(", ")} ] }\n`,
    },
    controllerUrl: (s) => s.url,
    controllerAuth: { nkeySeed: controller.seed },
    agentEnv: nkeyEnv("SEED_FILE", host.seedFile),
    rankEnv: nkeyEnv("SEED", rank.seed),
    natsAuth: { nkeySeedFile: rank.seedFile },
    secrets: [controller.seed, host.seed, rank.seed],
  });
});

test("a creds file (operator mode: the user's JWT and seed)", { timeout: 180_000 }, async () => {
  const { config, credsFile } = await makeOperatorAccount();
  const seed = /(SU[A-Z2-7]{56})/.exec(readFileSync(credsFile, "utf8"))?.[1] ?? "";
  await runWith("authCreds", {
    server: { config },
    controllerUrl: (s) => s.url,
    controllerAuth: { credsFile },
    agentEnv: { RANKSCOPE_NATS_CREDS_FILE: credsFile },
    rankEnv: { RANKSCOPE_NATS_CREDS_FILE: credsFile },
    secrets: [seed],
  });
});

test(
  "TLS: the server's CA, client certificates the server verifies, and the template's users",
  { timeout: 180_000 },
  async () => {
    const runId = "authTls";
    const certs = makeCertificates();
    const password = "tls-Pw-4";
    const tlsBlock = `tls: { cert_file: ${JSON.stringify(certs.serverCert)}, key_file: ${JSON.stringify(certs.serverKey)}, ca_file: ${JSON.stringify(certs.ca)}, verify: true }\n`;
    const tlsEnv = {
      RANKSCOPE_NATS_TLS_CA_FILE: certs.ca,
      RANKSCOPE_NATS_TLS_CERT_FILE: certs.clientCert,
      RANKSCOPE_NATS_TLS_KEY_FILE: certs.clientKey,
    };
    const asUser = (role: "host" | "rank"): Record<string, string> => ({
      ...tlsEnv,
      RANKSCOPE_NATS_USER: `${runId}-${role}`,
      RANKSCOPE_NATS_PASSWORD: password,
    });
    await runWith(runId, {
      server: {
        config: tlsBlock + accountsFor([runId]),
        env: {
          [ROLE_PASSWORD_ENV.controller]: password,
          [ROLE_PASSWORD_ENV.rack]: password,
          [ROLE_PASSWORD_ENV.host]: password,
          [ROLE_PASSWORD_ENV.rank]: password,
        },
      },
      controllerUrl: (s) => s.url,
      controllerAuth: {
        tlsCaFile: certs.ca,
        tlsCertFile: certs.clientCert,
        tlsKeyFile: certs.clientKey,
        user: `${runId}-controller`,
        password,
      },
      agentEnv: asUser("host"),
      rankEnv: asUser("rank"),
      // The rank's own user; the controller's TLS files are inherited.
      natsAuth: { user: `${runId}-rank`, password },
      secrets: [password],
      outsider: { tls: { caFile: certs.ca }, user: `${runId}-rank`, pass: password },
    });
  },
);
