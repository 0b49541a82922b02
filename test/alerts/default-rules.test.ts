/**
 * A diverged loss is not silent (issue 37 item 3): a job with the default configuration — no
 * `alerts` option, no webhook, `initBackends()` with no config — whose loss turns NaN prints one
 * line on stderr for the episode (not one per flush), and the store's Alerts hold it; the run
 * ends with the loss still NaN, so the episode reads `ended`, not `firing`. `alerts: false` and
 * `RANKSCOPE_ALERTS=0` silence it. Each job is a child process, as a user runs one.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { alerts as storedAlerts, closeStores } from "../../src/store/reader.js";
import { runSnippet, tempDir } from "../helpers.js";

const INDEX = JSON.stringify(fileURLToPath(new URL("../../src/index.ts", import.meta.url)));

/** A job whose loss is finite for two steps, then NaN for three; `options` are the logger's. */
async function nanJob(options: string, env: Record<string, string> = {}): Promise<{ stderr: string; runDir: string }> {
  const root = tempDir("rankscope-nan-");
  const code = `
    const { getOrCreateMetricLogger, recordMetric } = await import(${INDEX});
    const logger = await getOrCreateMetricLogger({ experiment: "diverged", trial: "t", ${options} });
    await logger.initBackends();
    for (const [step, loss] of [[0, 1], [1, 0.5], [2, NaN], [3, NaN], [4, NaN]]) {
      recordMetric("loss", loss, "mean");
      await logger.flush(step);
    }
    await logger.shutdown();
  `;
  const { code: exit, stderr } = await runSnippet(code, { RANKSCOPE_ROOT: root, RANKSCOPE_QUIET: "1", ...env });
  assert.equal(exit, 0, stderr);
  return { stderr, runDir: join(root, "diverged", "t") };
}

test("with the default configuration a loss that turns NaN prints one line on stderr and is in the store's Alerts, ended with the run", async () => {
  const { stderr, runDir } = await nanJob("");
  const lines = stderr.split("\n").filter((line) => line.includes("alert"));
  assert.equal(lines.length, 1, `one line for the episode, not one per flush:\n${stderr}`);
  assert.match(
    lines[0] ?? "",
    /rankscope\.alerts ERROR: alert FIRING nonfinite:loss#1: loss became NaN at step 2 \(it was finite before\)/,
  );
  assert.deepEqual(
    storedAlerts(runDir).map((a) => [a.rule, a.key, a.state, a.step]),
    [
      ["nonfinite", "loss", "firing", 2],
      ["nonfinite", "loss", "ended", 4],
    ],
    "the store (the dashboard's Alerts) has the episode; the run ended with it, so it is not firing",
  );
  assert.match(storedAlerts(runDir)[1]?.message ?? "", /the run ended while this was firing \(last step 4\)/);
  closeStores();
});

for (const [how, options, env] of [
  ["alerts: false", "alerts: false", {}],
  ["RANKSCOPE_ALERTS=0", "", { RANKSCOPE_ALERTS: "0" }],
] as const) {
  test(`${how} turns the default rules off: nothing on stderr, nothing in the store's Alerts`, async () => {
    const { stderr, runDir } = await nanJob(options, env);
    assert.doesNotMatch(stderr, /alert/);
    assert.deepEqual(storedAlerts(runDir), []);
    closeStores();
  });
}
