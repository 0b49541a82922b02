/** The one settings resolver: option → environment → default, one policy for invalid and unknown values. */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import { envFlag, envInteger } from "../../src/core/env.js";
import {
  enumKind,
  flagKind,
  integerKind,
  rejectUnknownOptions,
  resolveSetting,
  textKind,
  type Setting,
} from "../../src/core/settings.js";
import { collectDiagnostics, runSnippet } from "../helpers.js";
import { ROOT } from "../stream/helpers.js";

const deadline: Setting<number> = {
  owner: "demo",
  option: "deadlineMs",
  env: "DEMO_DEADLINE_MS",
  kind: integerKind(1, 1000),
  fallback: 50,
};

test("the option wins, else the environment, else the default", async () => {
  assert.equal(resolveSetting(deadline, undefined, {}), 50);
  assert.equal(resolveSetting(deadline, undefined, { DEMO_DEADLINE_MS: " 70 " }), 70);
  assert.equal(resolveSetting(deadline, undefined, { DEMO_DEADLINE_MS: "" }), 50, "empty is unset");
  const seen = await collectDiagnostics(() =>
    assert.equal(resolveSetting(deadline, 20, { DEMO_DEADLINE_MS: "70" }), 20),
  );
  assert.deepEqual(
    seen.map((d) => d.message),
    ["demo: option deadlineMs=20 overrides DEMO_DEADLINE_MS=70; the option given in code wins"],
  );
});

test("an invalid value is a TypeError naming the setting, its source and what is valid", () => {
  assert.throws(() => resolveSetting(deadline, -5, {}), {
    name: "TypeError",
    message: "demo: deadlineMs must be an integer from 1 to 1000, got -5",
  });
  assert.throws(() => resolveSetting(deadline, "abc", {}), {
    message: 'demo: deadlineMs must be an integer from 1 to 1000, got "abc"',
  });
  assert.throws(() => resolveSetting(deadline, undefined, { DEMO_DEADLINE_MS: "1e3" }), {
    name: "TypeError",
    message: `DEMO_DEADLINE_MS="1e3" is not valid (it sets demo's deadlineMs); valid: an integer from 1 to 1000`,
  });
  // The same policy for the environment-only switches (it was a warning and the default before).
  assert.throws(() => envFlag("DEMO_SWITCH", { DEMO_SWITCH: "maybe" }), {
    message: 'DEMO_SWITCH="maybe" is not valid; valid: true/1/yes/on or false/0/no/off',
  });
  assert.equal(envFlag("DEMO_SWITCH", { DEMO_SWITCH: "Yes" }), true);
  assert.throws(() => envInteger("DEMO_COUNT", 3, 1, { DEMO_COUNT: "0" }), {
    message: 'DEMO_COUNT="0" is not valid; valid: an integer ≥ 1',
  });
  assert.throws(
    () =>
      resolveSetting(
        { owner: "x", option: "mode", env: "X_MODE", kind: enumKind(["a", "b"]), fallback: "a" },
        undefined,
        { X_MODE: "c" },
      ),
    /valid: one of a, b/,
  );
  assert.equal(resolveSetting({ owner: "x", option: "on", kind: flagKind, fallback: false }, true, {}), true);
});

test("a secret is never shown in a message", async () => {
  const key: Setting<string | undefined> = {
    owner: "w",
    option: "apiKey",
    env: "W_KEY",
    kind: textKind(/^k-/, "a key starting with k-"),
    fallback: undefined,
    secret: true,
  };
  assert.throws(
    () => resolveSetting(key, undefined, { W_KEY: "hunter2" }),
    (error: Error) => !error.message.includes("hunter2") && /W_KEY is not valid/.test(error.message),
  );
  assert.throws(
    () => resolveSetting(key, "hunter2", {}),
    (error: Error) => !error.message.includes("hunter2"),
  );
  const seen = await collectDiagnostics(() => resolveSetting(key, "k-option", { W_KEY: "k-env" }));
  assert.deepEqual(seen, [], "no override warning that would print both keys");
});

test("unknown option keys are a TypeError listing the valid ones", () => {
  assert.throws(() => rejectUnknownOptions("startThing", { batchSise: 3 }, ["batchSize", "file"]), {
    name: "TypeError",
    message: 'startThing: unknown option "batchSise"; valid: batchSize, file',
  });
  rejectUnknownOptions("startThing", { file: "a" }, ["batchSize", "file"]);
});

/** Every `process.env` read in src, outside the resolver itself and the construction of a child's environment. */
function environmentReadsOutsideTheResolver(): string[] {
  const src = join(ROOT, "src");
  const found: string[] = [];
  for (const file of readdirSync(src, { recursive: true, encoding: "utf8" })) {
    if (!file.endsWith(".ts") || file === join("core", "settings.ts")) continue;
    readFileSync(join(src, file), "utf8")
      .split("\n")
      .forEach((line, i) => {
        // Allowed: `env: NodeJS.ProcessEnv = process.env` (a parameter handed to the resolver) and `...process.env` (a child's environment).
        const rest = line.replace(/NodeJS\.ProcessEnv = process\.env\b/g, "").replace(/\.\.\.process\.env\b/g, "");
        if (/process\.env\b/.test(rest)) found.push(`src/${file}:${i + 1}: ${line.trim()}`);
      });
  }
  return found;
}

test("no part of src reads the environment except through the one settings resolver", () => {
  assert.deepEqual(environmentReadsOutsideTheResolver(), []);
});

test("joinRun's variables follow the resolver's policy: an option that differs from its variable wins with a warning; blank is unset", async () => {
  const joinModule = pathToFileURL(join(ROOT, "src", "transport", "rank", "join.ts")).href;
  const result = await runSnippet(
    `import { joinRun } from ${JSON.stringify(joinModule)};
     try { await joinRun({ natsUrl: "nats://127.0.0.1:1", runId: "fromOption", joinDeadlineMs: 300 }); } catch (e) { console.log("rejected: " + e.message); }`,
    {
      RANKSCOPE_NATS_URL: "nats://127.0.0.1:2",
      RANKSCOPE_RUN_ID: "fromEnv",
      RANKSCOPE_PROCESS_NAME: "   ",
      RANKSCOPE_RUN_SECRET: "s".repeat(32),
    },
  );
  assert.match(
    result.stderr,
    /option natsUrl="nats:\/\/127\.0\.0\.1:1" overrides RANKSCOPE_NATS_URL=nats:\/\/127\.0\.0\.1:2/,
    result.stderr,
  );
  assert.match(result.stderr, /option runId="fromOption" overrides RANKSCOPE_RUN_ID=fromEnv/, result.stderr);
  assert.match(result.stdout, /rejected: .*nats:\/\/127\.0\.0\.1:1/, result.stdout + result.stderr);
});

test("the run secret is a secret: a value too short is an error that never shows it, from code or the environment", async () => {
  const joinModule = pathToFileURL(join(ROOT, "src", "transport", "rank", "join.ts")).href;
  const result = await runSnippet(
    `import { joinRun } from ${JSON.stringify(joinModule)};
     try { await joinRun({ natsUrl: "nats://127.0.0.1:1", runId: "r", joinDeadlineMs: 300 }); } catch (e) { console.log("env: " + e.message); }
     try { await joinRun({ natsUrl: "nats://127.0.0.1:1", runId: "r", joinDeadlineMs: 300, runSecret: "hunter2-option" }); } catch (e) { console.log("option: " + e.message); }`,
    { RANKSCOPE_RUN_SECRET: "hunter2-env" },
  );
  assert.match(
    result.stdout,
    /env: RANKSCOPE_RUN_SECRET is not valid \(its value is not shown: it is a secret\); valid: 32 to 1024 printable characters/,
    result.stdout + result.stderr,
  );
  assert.doesNotMatch(result.stdout + result.stderr, /hunter2/);
});

test("NO_COLOR (any non-empty value) turns text-log colours off; color in code wins, with a warning", async () => {
  const logs = pathToFileURL(join(ROOT, "src", "textlog", "logger.ts")).href;
  const code = (option: string): string => `import { configureTextLogs, getLogger } from ${JSON.stringify(logs)};
     configureTextLogs({ ${option} }); getLogger("demo").warn("hello");`;
  const plain = await runSnippet(code(""), { NO_COLOR: "yes please" });
  assert.ok(plain.stderr.includes("hello") || plain.stdout.includes("hello"), plain.stderr + plain.stdout);
  assert.ok(!(plain.stderr + plain.stdout).includes("\u001b["), "colours although NO_COLOR is set");
  const forced = await runSnippet(code("color: true"), { NO_COLOR: "1" });
  assert.match(forced.stderr + forced.stdout, /option color=true overrides NO_COLOR=1/);
});
