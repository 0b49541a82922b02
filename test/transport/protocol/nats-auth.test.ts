/**
 * The NATS settings (`resolveNatsAuth`): credentials from the URL or from settings (option →
 * environment), one way to authenticate, files checked, secrets never in a message; what a spawned
 * rank is handed (`natsAuthEnv`) gives back the same settings; the client's options carry them
 * with the run's inbox prefix. Connecting with each method is tested end to end in
 * test/transport/nats-auth.test.ts.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import {
  describeNatsAuth,
  NATS_AUTH_ENV,
  natsAuthEnv,
  natsConnectionOptions,
  resolveNatsAuth,
  type NatsAuth,
} from "../../../src/transport/protocol/nats-auth.js";
import { collectDiagnostics, tempDir } from "../../helpers.js";
import { makeNkey, makeOperatorAccount } from "../auth-support.js";

const resolve = (url: string, options = {}, env: NodeJS.ProcessEnv = {}): NatsAuth =>
  resolveNatsAuth("joinRun", url, options, env);

/** The TypeError's message for `fn`, asserting that none of `secrets` is in it. */
function refusal(fn: () => unknown, secrets: readonly string[] = []): string {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof TypeError, String(error));
    for (const secret of secrets)
      assert.ok(!error.message.includes(secret), `the message shows a secret: ${error.message}`);
    return error.message;
  }
  return assert.fail("no TypeError");
}

test("user and password, or a token, in the URL: taken out of the servers, percent-decoded, the same for every server of a cluster", () => {
  const auth = resolve("nats://run-7-rank:p%40ss%3Aw0rd@n1:4222, nats://run-7-rank:p%40ss%3Aw0rd@n2:4222");
  assert.deepEqual(auth.servers, ["nats://n1:4222", "nats://n2:4222"]);
  assert.equal(auth.url, "nats://n1:4222,nats://n2:4222");
  assert.equal(auth.method, "user/password");
  assert.equal(auth.values.user, "run-7-rank");
  assert.equal(auth.values.password, "p@ss:w0rd");
  assert.equal(describeNatsAuth(auth), 'user/password (user "run-7-rank")');

  const token = resolve("nats://s3cr3t-t0k@127.0.0.1:4222");
  assert.equal(token.method, "token");
  assert.equal(token.values.token, "s3cr3t-t0k");
  assert.equal(token.url, "nats://127.0.0.1:4222");
  assert.equal(resolve("127.0.0.1:4222").url, "127.0.0.1:4222", "a server without a scheme is kept as given");
  assert.equal(resolve("nats://127.0.0.1:4222").method, "none");

  const message = refusal(() => resolve("nats://a:Pw-one@n1:4222,nats://a:Pw-two@n2:4222"), ["Pw-one", "Pw-two"]);
  assert.match(message, /different credentials/);
});

test("tls:// requires TLS; TLS files imply it; tls=false with either is an error", () => {
  assert.equal(resolve("tls://n1:4222").values.tls, true);
  assert.equal(resolve("nats://n1:4222").values.tls, false);
  const dir = tempDir();
  const ca = join(dir, "ca.pem");
  writeFileSync(ca, "-----BEGIN CERTIFICATE-----\n");
  assert.equal(resolve("nats://n1:4222", {}, { RANKSCOPE_NATS_TLS_CA_FILE: ca }).values.tls, true);
  assert.equal(resolve("nats://n1:4222", {}, { RANKSCOPE_NATS_TLS: "yes" }).values.tls, true);
  assert.match(
    refusal(() => resolve("tls://n1:4222", { tls: false })),
    /tls is false, but the URL is tls:\/\//,
  );
  assert.match(
    refusal(() => resolve("nats://n1:4222", { tls: false, tlsCaFile: ca })),
    /TLS files are given/,
  );
});

test("settings: the option, else the environment; a setting wins over the URL's credentials, with a warning that shows none", async () => {
  const env = { RANKSCOPE_NATS_USER: "env-user", RANKSCOPE_NATS_PASSWORD: "env-Pw" };
  const fromEnv = resolve("nats://n1:4222", {}, env);
  assert.deepEqual([fromEnv.values.user, fromEnv.values.password], ["env-user", "env-Pw"]);
  const diagnostics = await collectDiagnostics(() => {
    const fromOption = resolve("nats://url-user:url-Pw@n1:4222", { user: "opt-user", password: "opt-Pw" }, env);
    assert.deepEqual([fromOption.values.user, fromOption.values.password], ["opt-user", "opt-Pw"]);
  });
  const text = diagnostics.map((d) => d.message).join("\n");
  assert.match(text, /option user="opt-user" overrides RANKSCOPE_NATS_USER=env-user/);
  assert.match(text, /the credentials in the NATS URL are ignored/);
  for (const secret of ["env-Pw", "opt-Pw", "url-Pw"]) assert.ok(!text.includes(secret), text);
});

test("one way to authenticate, and each one whole: a TypeError that names the settings, never their values", () => {
  const { seed, seedFile } = makeNkey();
  assert.match(
    refusal(
      () => resolve("nats://tok-9@n1:4222", { user: "u", password: "Pw-1" }, { RANKSCOPE_NATS_TOKEN: "tok-8" }),
      ["tok-8", "tok-9", "Pw-1"],
    ),
    /one way to authenticate to NATS, got user\/password and token/,
  );
  assert.match(
    refusal(() => resolve("nats://n1:4222", { nkeySeed: seed }, { RANKSCOPE_NATS_USER: "u" }), [seed]),
    /got user\/password and nkey/,
  );
  assert.match(
    refusal(() => resolve("nats://n1:4222", { password: "Pw-2" }), ["Pw-2"]),
    /a NATS password needs a user/,
  );
  assert.match(
    refusal(() => resolve("nats://n1:4222", { nkeySeed: seed, nkeySeedFile: seedFile }), [seed]),
    /the nkey seed or its file, not both/,
  );
  assert.match(
    refusal(() => resolve("nats://n1:4222", { tlsCertFile: seedFile })),
    /needs its key/,
  );
  assert.match(
    refusal(() => resolve("nats://n1:4222", { usr: "x" })),
    /unknown NATS auth option "usr"; valid: user, password/,
  );
});

test("seeds, files and creds are checked before connecting, without showing their content", async () => {
  const dir = tempDir();
  const notASeed = "SUNOTAVALIDSEEDATALLNOTAVALIDSEEDATALLNOTAVALIDSEEDATALLAB";
  assert.match(
    refusal(() => resolve("nats://n1:4222", {}, { RANKSCOPE_NATS_NKEY_SEED: notASeed }), [notASeed]),
    /RANKSCOPE_NATS_NKEY_SEED is not valid \(its value is not shown: it is a secret\); valid: a user nkey seed/,
  );
  assert.match(
    refusal(() => resolve("nats://n1:4222", { nkeySeed: "hunter2" }), ["hunter2"]),
    /nkeySeed must be a user nkey seed/,
  );
  const missing = join(dir, "missing.creds");
  assert.match(
    refusal(() => resolve("nats://n1:4222", { credsFile: missing })),
    /credsFile \(RANKSCOPE_NATS_CREDS_FILE\) names ".*missing\.creds", which cannot be read: ENOENT/,
  );
  const garbage = join(dir, "garbage");
  writeFileSync(garbage, "not-a-seed-Secret\n");
  assert.match(
    refusal(() => resolve("nats://n1:4222", { nkeySeedFile: garbage }), ["not-a-seed-Secret"]),
    /does not hold a user nkey seed/,
  );
  assert.match(
    refusal(() => resolve("nats://n1:4222", { credsFile: garbage }), ["not-a-seed-Secret"]),
    /is not a NATS creds file/,
  );
  const { credsFile } = await makeOperatorAccount();
  assert.equal(resolve("nats://n1:4222", { credsFile }).method, "creds file");
  assert.equal(resolve("nats://n1:4222", {}, { RANKSCOPE_NATS_NKEY_SEED_FILE: makeNkey().seedFile }).method, "nkey");
});

test("what a spawned rank is handed gives back the same settings, and nothing inherited adds a second method", () => {
  const { seedFile } = makeNkey();
  const auth = resolve("tls://n1:4222", { nkeySeedFile: seedFile });
  const env = natsAuthEnv(auth);
  assert.deepEqual(Object.keys(env).sort(), [...NATS_AUTH_ENV].sort(), "every variable, the unused ones empty");
  assert.equal(env["RANKSCOPE_NATS_TOKEN"], "");
  // The child's inherited environment had a token: the handed-on (empty) variable replaces it.
  const child = resolve(auth.url, {}, { RANKSCOPE_NATS_TOKEN: "inherited-tok", ...env });
  assert.deepEqual(child.values, auth.values);
  assert.equal(child.url, auth.url);

  const fromUrl = resolve("nats://u:Pw-3@n1:4222");
  assert.deepEqual(
    resolve(fromUrl.url, {}, natsAuthEnv(fromUrl)).values,
    fromUrl.values,
    "a URL's credentials travel as variables, the URL without them",
  );
});

test("the client's options: servers without credentials, the credentials as the client's own options, the role's inbox under the run", () => {
  const options = natsConnectionOptions(resolve("nats://run-7-rank:Pw-4@n1:4222,nats://run-7-rank:Pw-4@n2:4222"), {
    name: "rank",
    runId: "run-7",
    role: "rank",
    timeoutMs: 2000,
  });
  assert.deepEqual(options.servers, ["nats://n1:4222", "nats://n2:4222"]);
  assert.equal(options.user, "run-7-rank");
  assert.equal(options.pass, "Pw-4");
  assert.equal(options.inboxPrefix, "rankscope.run-7.inbox.rank");
  assert.equal(
    options.tls,
    undefined,
    "no TLS unless asked for (the client still upgrades when the server requires it)",
  );
  assert.equal(options.maxReconnectAttempts, -1);
  const tls = natsConnectionOptions(resolve("tls://10.0.0.1:4222"), {
    name: "c",
    runId: "r",
    role: "controller",
    timeoutMs: 2000,
  });
  assert.equal(typeof tls.tls, "object", "TLS required");
});
