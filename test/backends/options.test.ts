/**
 * Every registered backend declares its options (a shape in its folder) and refuses, at
 * `initBackends` and before anything starts, an option it does not know and an option of the wrong
 * type, with a TypeError naming the backend, the option and what is valid. Enumerated from the
 * registry, so a backend added without a declaration fails here.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, test } from "node:test";
import { getOrCreateMetricLogger, type UncheckedBackendsConfig } from "../../src/index.js";
import { knownBackendNames, resolveBackendRegistration } from "../../src/backends/backend.js";
import { tempDir } from "../helpers.js";

const dir = tempDir("rankscope-options-");
after(() => rmSync(dir, { recursive: true, force: true }));

const BUILT_IN = ["console", "jsonl", "otlp", "prometheus", "prometheus_remote_write", "store", "tensorboard", "wandb"];

/** Valid values of the options a backend requires, so only the option under test is wrong. */
const REQUIRED: Readonly<Record<string, Readonly<Record<string, unknown>>>> = {
  prometheus_remote_write: { url: "http://127.0.0.1:9/api/v1/write" },
};

/** `initBackends` with one backend's config, from JavaScript (no compile-time check): its error message. */
async function refusal(name: string, options: Readonly<Record<string, unknown>>): Promise<string> {
  const logger = await getOrCreateMetricLogger({ runDir: dir, quiet: true });
  const config: UncheckedBackendsConfig = { [name]: { loggingMode: "global_reduce", ...REQUIRED[name], ...options } };
  try {
    // From JavaScript: the compiler's checks (BackendOptionsMap) do not apply.
    await logger.initBackends(config as never);
  } catch (error) {
    assert.ok(error instanceof TypeError, `${name}: ${String(error)}`);
    return error.message;
  }
  assert.fail(`backend "${name}" accepted ${JSON.stringify(Object.keys(options))}`);
}

test("every registered backend declares its options and refuses an unknown one and a wrongly-typed one", async () => {
  const names = knownBackendNames();
  for (const name of BUILT_IN) assert.ok(names.includes(name), `built-in backend ${name} is registered`);
  for (const name of names) {
    const registration = await resolveBackendRegistration(name);
    assert.ok(
      registration?.optionShape !== undefined,
      `backend "${name}" declares its options (registerBackend's options)`,
    );
    const own = Object.keys(registration.optionShape);
    assert.deepEqual([...registration.knownOptions], own, `${name}: its known names are the declaration's`);

    const unknown = await refusal(name, { notAnOption: 1 });
    assert.match(
      unknown,
      new RegExp(
        `^backend "${name}": unknown option "notAnOption"; valid: loggingMode, perRankShareRun, every, type, deadlineMs`,
      ),
    );
    for (const option of own)
      assert.ok(unknown.includes(option), `${name}: the unknown-option error lists ${option}: ${unknown}`);

    // A value no option takes (not a string, number, boolean, list or object): every option refuses it by name.
    for (const option of own) {
      const wrong = await refusal(name, { [option]: Symbol("wrong") });
      assert.match(
        wrong,
        new RegExp(`^backend "${name}": (label )?${option}\\b`),
        `${name}.${option}: the error starts with the option: ${wrong}`,
      );
      assert.match(wrong, /must|valid/, `${name}.${option}: the error says what is valid: ${wrong}`);
      for (const other of own)
        if (other !== option)
          assert.ok(!wrong.includes(`; ${other} `), `${name}.${option}: only the wrong option is refused: ${wrong}`);
    }
  }
  await (await getOrCreateMetricLogger()).shutdown();
});

test("a wrong common option is refused for every backend with what is valid", async () => {
  for (const name of knownBackendNames()) {
    assert.equal(
      await refusal(name, { every: 0 }),
      `backend "${name}": every must be a positive integer (log every N-th flush)`,
    );
    assert.equal(
      await refusal(name, { deadlineMs: "soon" }),
      `backend "${name}": deadlineMs must be a positive integer (milliseconds one call of this backend may take)`,
    );
  }
  await (await getOrCreateMetricLogger()).shutdown();
});
