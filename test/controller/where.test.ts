// Every job says where its data went, once, from the controller: the run directory and how to open
// the dashboard (src/controller/where.ts), printed on stderr at shutdown; `quiet` / RANKSCOPE_QUIET silence it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../helpers.js";

// Each job runs the built package with plain node (`npm test` builds first): the job and its two
// thread ranks start without tsx loading the sources.
const INDEX = new URL("../../dist/index.js", import.meta.url).href;
const SEED_RANK = new URL("../fixtures/built/seed-rank.mjs", import.meta.url).href;

/** Run a job with 2 thread ranks in a fresh directory; its stderr. */
function job(
  backends: string,
  env: Record<string, string> = {},
  loggerOptions = "{}",
): { stderr: string; cwd: string } {
  const cwd = tempDir();
  const script = join(cwd, "job.mjs");
  writeFileSync(
    script,
    `import { getOrCreateMetricLogger, spawnRanks } from ${JSON.stringify(INDEX)};
const logger = await getOrCreateMetricLogger({ root: "out", experiment: "exp", trial: "t1", ...${loggerOptions} });
await logger.initBackends(${backends});
const ranks = await spawnRanks({ module: new URL(${JSON.stringify(SEED_RANK)}), replicas: 1, ranksPerReplica: 2, kind: "thread", logger });
await ranks.fanout("myFn");
await logger.flush(0);
await logger.shutdown();
`,
  );
  const run = spawnSync(process.execPath, [script], {
    cwd,
    encoding: "utf8",
    timeout: 90_000,
    env: { ...process.env, RANKSCOPE_QUIET: "", ...env },
  });
  assert.equal(run.status, 0, run.stderr);
  return { stderr: run.stderr, cwd };
}

test("a job with the store prints its run directory and the dashboard command once, from the controller", () => {
  const { stderr, cwd } = job(`{ store: { loggingMode: "global_reduce" }, jsonl: { loggingMode: "per_rank_reduce" } }`);
  try {
    assert.equal(
      stderr,
      `rankscope: this run's data is in ${join("out", "exp", "t1")}\nrankscope: open the dashboard with: npx rankscope ui --root out\n`,
    );
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
});

test("without a store it names the run directory only; quiet and RANKSCOPE_QUIET=1 print nothing", () => {
  const plain = job(`{ jsonl: { loggingMode: "global_reduce" } }`);
  const byEnv = job(`{ store: { loggingMode: "global_reduce" } }`, { RANKSCOPE_QUIET: "1" });
  const byOption = job(`{ store: { loggingMode: "global_reduce" } }`, {}, "{ quiet: true }");
  try {
    assert.equal(plain.stderr, `rankscope: this run's data is in ${join("out", "exp", "t1")}\n`);
    assert.equal(byEnv.stderr, "");
    assert.equal(byOption.stderr, "");
  } finally {
    for (const j of [plain, byEnv, byOption]) rmSync(j.cwd, { recursive: true, force: true });
  }
});
