/** The one settings resolver: option → environment → default, one policy for invalid and unknown values. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { envFlag, envInteger } from "../../src/core/env.js";
import { enumKind, flagKind, integerKind, rejectUnknownOptions, resolveSetting, textKind, type Setting } from "../../src/core/settings.js";
import { collectDiagnostics } from "../helpers.js";

const deadline: Setting<number> = { owner: "demo", option: "deadlineMs", env: "DEMO_DEADLINE_MS", kind: integerKind(1, 1000), fallback: 50 };

test("the option wins, else the environment, else the default", async () => {
  assert.equal(resolveSetting(deadline, undefined, {}), 50);
  assert.equal(resolveSetting(deadline, undefined, { DEMO_DEADLINE_MS: " 70 " }), 70);
  assert.equal(resolveSetting(deadline, undefined, { DEMO_DEADLINE_MS: "" }), 50, "empty is unset");
  const seen = await collectDiagnostics(() => assert.equal(resolveSetting(deadline, 20, { DEMO_DEADLINE_MS: "70" }), 20));
  assert.deepEqual(
    seen.map((d) => d.message),
    ["demo: option deadlineMs=20 overrides DEMO_DEADLINE_MS=70; the option given in code wins"],
  );
});

test("an invalid value is a TypeError naming the setting, its source and what is valid", () => {
  assert.throws(() => resolveSetting(deadline, -5, {}), { name: "TypeError", message: "demo: deadlineMs must be an integer from 1 to 1000, got -5" });
  assert.throws(() => resolveSetting(deadline, "abc", {}), { message: 'demo: deadlineMs must be an integer from 1 to 1000, got "abc"' });
  assert.throws(() => resolveSetting(deadline, undefined, { DEMO_DEADLINE_MS: "1e3" }), {
    name: "TypeError",
    message: `DEMO_DEADLINE_MS="1e3" is not valid (it sets demo's deadlineMs); valid: an integer from 1 to 1000`,
  });
  // The same policy for the environment-only switches (it was a warning and the default before).
  assert.throws(() => envFlag("DEMO_SWITCH", { DEMO_SWITCH: "maybe" }), { message: 'DEMO_SWITCH="maybe" is not valid; valid: true/1/yes/on or false/0/no/off' });
  assert.equal(envFlag("DEMO_SWITCH", { DEMO_SWITCH: "Yes" }), true);
  assert.throws(() => envInteger("DEMO_COUNT", 3, 1, { DEMO_COUNT: "0" }), { message: 'DEMO_COUNT="0" is not valid; valid: an integer ≥ 1' });
  assert.throws(() => resolveSetting({ owner: "x", option: "mode", env: "X_MODE", kind: enumKind(["a", "b"]), fallback: "a" }, undefined, { X_MODE: "c" }), /valid: one of a, b/);
  assert.equal(resolveSetting({ owner: "x", option: "on", kind: flagKind, fallback: false }, true, {}), true);
});

test("a secret is never shown in a message", async () => {
  const key: Setting<string | undefined> = { owner: "w", option: "apiKey", env: "W_KEY", kind: textKind(/^k-/, "a key starting with k-"), fallback: undefined, secret: true };
  assert.throws(() => resolveSetting(key, undefined, { W_KEY: "hunter2" }), (error: Error) => !error.message.includes("hunter2") && /W_KEY is not valid/.test(error.message));
  assert.throws(() => resolveSetting(key, "hunter2", {}), (error: Error) => !error.message.includes("hunter2"));
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
