/**
 * W&B run files at `process.exit()`: a job in offline mode (everything goes to the spool) that
 * ends with `process.exit()` right after its last flush (without `shutdown()`, or after a
 * `shutdown()` cut short by its backend deadline). The run files the spool holds (each step's
 * table; `config.yaml` and the summary queued by finish) must be on disk, written by the exit drain's
 * synchronous part (the one atomic write), as the history and run.json are.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { pathToFileURL } from "node:url";
import { runSnippet, tempDir } from "../../helpers.js";
import { ROOT } from "../../stream/helpers.js";

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Every file under `dir`, relative to it. */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

/** The job: offline W&B, three steps with a table each, then `end` (code run before process.exit(0)). */
function job(end: string): string {
  const index = pathToFileURL(join(ROOT, "src", "index.ts")).href;
  return `import { getOrCreateMetricLogger, recordMetric, Reduce } from ${JSON.stringify(index)};
     const logger = await getOrCreateMetricLogger({ runDir: process.env.JOB_RUN_DIR, experiment: "wx", trial: "t", backendDeadlineMs: Number(process.env.JOB_BACKEND_DEADLINE_MS ?? "10000") });
     await logger.initBackends({ wandb: { loggingMode: "global_reduce", mode: "offline", project: "proj", entity: "team" } }, { runConfig: { lr: 0.5 } });
     for (let step = 0; step < 3; step++) {
       recordMetric("loss", step + 0.5, Reduce.MEAN);
       recordMetric("rollout", { prompt: "p" + step, reward: step }, Reduce.SAMPLE);
       await logger.flush(step);
     }
     ${end}
     process.exit(0);`;
}

/** The spool's run files after the job, checked: one table per step; returns the file names. */
async function spoolAfter(end: string, env: Record<string, string> = {}): Promise<{ spool: string; files: string[] }> {
  const runDir = tempDir("rankscope-wandb-exit-");
  dirs.push(runDir);
  const result = await runSnippet(job(end), { JOB_RUN_DIR: runDir, WANDB_API_KEY: "", ...env });
  assert.equal(result.code, 0, result.stderr);
  const spool = join(runDir, "wandb", "wx_t");
  const files = filesUnder(join(spool, "files"));
  const tables = files.filter((f) => f.endsWith(".table.json"));
  assert.equal(
    tables.length,
    3,
    `one table per step in the spool's files/: ${JSON.stringify(files)}\n${result.stderr}`,
  );
  for (const table of tables) {
    const { columns, data } = JSON.parse(readFileSync(join(spool, "files", table), "utf8")) as {
      columns: string[];
      data: unknown[][];
    };
    assert.deepEqual(columns, ["prompt", "reward"]);
    assert.equal(data.length, 1);
  }
  assert.ok(existsSync(join(spool, "run.json")), "run.json");
  assert.match(
    readFileSync(join(spool, "file_stream.jsonl"), "utf8"),
    /wandb-history\.jsonl/,
    "the history is spooled",
  );
  return { spool, files };
}

test("process.exit() right after the last flush, without shutdown(), in offline mode: the spool has every step's table, the history and run.json", async () => {
  await spoolAfter("");
});

test("process.exit() right after a shutdown() whose W&B finish was cut by its deadline: the run files it queued are on disk", async () => {
  // A 1 ms shutdown deadline: shutdown() returns before the spool's writes of finish() are done.
  // (Not a 1 ms backend deadline: in offline mode each flush waits for its row to be on disk, so
  // that would cut the flushes too.)
  const { spool, files } = await spoolAfter("await logger.shutdown({ deadlineMs: 1 });");
  assert.ok(files.includes("config.yaml"), `config.yaml is not in the spool's files/: ${JSON.stringify(files)}`);
  assert.equal(
    readFileSync(join(spool, "files", "config.yaml"), "utf8"),
    readFileSync(join(spool, "..", "..", "config.yaml"), "utf8"),
  );
  assert.ok(
    files.includes("wandb-summary.json"),
    `wandb-summary.json is not in the spool's files/: ${JSON.stringify(files)}`,
  );
});
