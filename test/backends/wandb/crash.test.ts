/**
 * W&B after a crash (issue 24, item 6), with real processes and real signals, read by the
 * official `wandb sync` (wandb 0.30 from the local wheel cache, test/helpers/python.ts) against
 * the strict local W&B server (test/backends/wandb/wandb-server.ts; the W&B cloud cannot be
 * reached from here):
 * - SIGKILL after step 2 in offline mode: the offline run is on disk at every flush boundary, and
 *   `wandb sync` uploads every flushed step (the run marked failed, not successful);
 * - then a resumed second attempt: its message offers `wandb sync` of both attempts' directories,
 *   in order, and that command uploads every step of both;
 * - SIGTERM (the process ends with 143): W&B is told exit code 143, online and offline;
 * - `rankscope wandb sync` of the SIGKILLed run's spool sends what `wandb sync` of its offline run
 *   sends: the rows, the summary (the last values), `config.yaml` and the completion with exit
 *   code 1 (wandb-core's for a log without an exit record); a resumed attempt then completes it.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, describe, it } from "node:test";
import { builtCli, runNode, tempDir } from "../../helpers.js";
import { pythonKit } from "../../helpers/python.js";
import { parseWandbJson, StrictWandbServer, type ServerRun } from "./wandb-server.js";
import { wandbSdkEnv } from "./wandb-helpers.js";

const JOB = fileURLToPath(new URL("./fixtures/crash-job.mjs", import.meta.url));
const KEY = "0123456789abcdef0123456789abcdef01234567"; // 40 characters, as W&B keys are
const RUN_ID = "crash_t";
const kit = pythonKit("wandb");
const scratch: string[] = [];
after(() => {
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** Run the job; with `killWith`, send that signal once it printed `flushed {after}`. */
async function job(
  runDir: string,
  env: Record<string, string>,
  kill?: { signal: NodeJS.Signals; after: number },
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  let sent = false;
  return runNode(
    [JOB],
    { JOB_RUN_DIR: runDir, WANDB_API_KEY: KEY, ...env },
    {
      raw: true,
      onStdout: (out, child) => {
        if (kill === undefined || sent || !out.includes(`flushed ${kill.after}\n`)) return;
        sent = true;
        child.kill(kill.signal);
      },
    },
  );
}

/** The offline run directories of the run, in name order. */
function offlineRuns(runDir: string): string[] {
  const root = join(runDir, "wandb");
  return existsSync(root)
    ? readdirSync(root)
        .filter((d) => d.startsWith("offline-run-") && d.endsWith(`-${RUN_ID}`))
        .sort()
        .map((d) => join(root, d))
    : [];
}

/** The official `wandb sync` of `dirs` to `server`; the SDK's own files go to a scratch home. */
async function officialSync(server: StrictWandbServer, dirs: readonly string[]): Promise<string> {
  const home = tempDir("rankscope-wandb-home-");
  scratch.push(home);
  const env = wandbSdkEnv(home, server.baseUrl, KEY);
  const result = await promisify(execFile)(join(dirname(kit.python as string), "wandb"), ["sync", ...dirs], {
    env,
    timeout: 120_000,
  }).catch((error: Error & { stdout?: string; stderr?: string }) =>
    assert.fail(`wandb sync failed: ${error.message}\n${error.stdout ?? ""}\n${error.stderr ?? ""}`),
  );
  assert.deepEqual(server.violations, [], `the strict server refused part of what wandb sync sent (${result.stderr})`);
  return result.stderr;
}

async function withServer<T>(fn: (server: StrictWandbServer) => Promise<T>): Promise<T> {
  const server = new StrictWandbServer(KEY, "team");
  await server.start();
  try {
    return await fn(server);
  } finally {
    await server.stop();
  }
}

/** An offline run killed with SIGKILL right after its step 2 was flushed; returns its run directory. */
async function killedAfterStep2(): Promise<string> {
  const runDir = tempDir("rankscope-wandb-crash-");
  scratch.push(runDir);
  const killed = await job(
    runDir,
    { JOB_MODE: "offline", JOB_STEPS: "3", JOB_WAIT: "1" },
    { signal: "SIGKILL", after: 2 },
  );
  assert.equal(killed.signal, "SIGKILL", killed.stderr);
  return runDir;
}

/** `rankscope wandb sync RUN_DIR` (the built CLI) to `server`. */
async function rankscopeSync(server: StrictWandbServer, runDir: string): Promise<string> {
  const result = await runNode(
    [builtCli(), "wandb", "sync", runDir, "--base-url", server.baseUrl],
    { WANDB_API_KEY: KEY },
    { raw: true },
  );
  assert.equal(result.code, 0, result.stderr);
  assert.deepEqual(server.violations, [], `the strict server refused part of what rankscope wandb sync sent`);
  return result.stdout;
}

/** What a W&B user sees of a run in the runs table and its files: its end, summary and run files. */
function endOf(run: ServerRun | undefined): { complete: boolean; exitcode: number | null; files: string[] } {
  assert.ok(run !== undefined, "the run reached the server");
  return { complete: run.complete, exitcode: run.exitcode, files: [...run.files.keys()].sort() };
}

// The cases share nothing (each its own run directory, W&B server and wandb home): they run at once.
describe("W&B after a crash, read by the official wandb sync", { skip: kit.skip, concurrency: true }, () => {
  it(
    "SIGKILL after step 2 (offline): wandb sync uploads steps 0-2, and the run is not reported as a success",
    { timeout: 180_000 },
    async () => {
      const runDir = await killedAfterStep2();
      const dirs = offlineRuns(runDir);
      assert.equal(dirs.length, 1, "the killed attempt's offline run is on disk");
      await withServer(async (server) => {
        await officialSync(server, dirs);
        const rows = server.history(RUN_ID);
        assert.deepEqual(
          rows.map((r) => r["global_step"]),
          [0, 1, 2],
          "every flushed step",
        );
        assert.deepEqual(
          rows.map((r) => r["loss"]),
          [1, 1 / 2, 1 / 3],
        );
        assert.notEqual(server.run(RUN_ID)?.exitcode, 0, "a killed run is not a successful one");
      });
    },
  );

  it(
    "SIGKILL after step 2 (offline): rankscope wandb sync sends what wandb sync sends — rows, summary, config.yaml, exit code 1 — and a resumed attempt then completes the run",
    { timeout: 240_000 },
    async () => {
      const runDir = await killedAfterStep2();
      const official = await withServer(async (server) => {
        await officialSync(server, offlineRuns(runDir));
        return { run: server.run(RUN_ID), rows: server.history(RUN_ID) };
      });
      await withServer(async (server) => {
        const out = await rankscopeSync(server, runDir);
        assert.match(out, /crash_t: 3 history line\(s\) sent, 0 already on the server, run marked complete/);
        const run = server.run(RUN_ID);
        assert.deepEqual(server.history(RUN_ID), official.rows, "the same rows");
        assert.deepEqual(run?.summary, official.run?.summary, "the same summary");
        assert.equal(run?.summary["loss"], 1 / 3, "the summary holds the last values");
        assert.equal(run?.summary["global_step"], 2);
        const ours = endOf(run);
        const theirs = endOf(official.run);
        assert.deepEqual(
          { complete: ours.complete, exitcode: ours.exitcode },
          { complete: true, exitcode: 1 },
          "marked failed, as wandb sync marks a run without an exit record",
        );
        assert.deepEqual({ complete: theirs.complete, exitcode: theirs.exitcode }, { complete: true, exitcode: 1 });
        for (const name of ["config.yaml", "wandb-summary.json"]) {
          assert.ok(theirs.files.includes(name), `wandb sync uploads ${name}`);
          assert.ok(ours.files.includes(name), `rankscope wandb sync uploads ${name}`);
          assert.ok(run?.uploaded.has(name), `and lists ${name} as uploaded`);
        }
        assert.equal(
          run?.files.get("config.yaml")?.toString("utf8"),
          readFileSync(join(runDir, "config.yaml"), "utf8"),
        );
        assert.deepEqual(parseWandbJson(run?.files.get("wandb-summary.json")?.toString("utf8") ?? ""), run?.summary);
        const requests = server.requests.length;
        assert.match(await rankscopeSync(server, runDir), /crash_t: 0 history line\(s\) sent, 3 already on the server/);
        assert.ok(
          server.requests.slice(requests).every((r) => r.kind === "graphql"),
          "a second sync sends nothing",
        );
        // The job is resumed from its checkpoint and ends normally: the next sync completes the run with 0.
        const second = await job(runDir, { JOB_MODE: "offline", JOB_FIRST: "3", JOB_STEPS: "4", JOB_RESUME: "3" });
        assert.equal(second.code, 0, second.stderr);
        await rankscopeSync(server, runDir);
        assert.deepEqual(
          server.history(RUN_ID).map((r) => r["global_step"]),
          [0, 1, 2, 3, 4, 5, 6],
        );
        assert.deepEqual(
          { complete: server.run(RUN_ID)?.complete, exitcode: server.run(RUN_ID)?.exitcode },
          { complete: true, exitcode: 0 },
        );
        assert.equal(server.run(RUN_ID)?.summary["loss"], 1 / 7);
      });
    },
  );

  it(
    "then a resumed second attempt: its message offers wandb sync of both attempts, in order, which uploads every step",
    { timeout: 180_000 },
    async () => {
      const runDir = await killedAfterStep2();
      const second = await job(runDir, { JOB_MODE: "offline", JOB_FIRST: "3", JOB_STEPS: "4", JOB_RESUME: "3" });
      assert.equal(second.code, 0, second.stderr);
      const offered = /W&B's own "wandb sync ([^"]+)"/.exec(second.stderr);
      assert.ok(offered !== null, `the message offers wandb sync: ${second.stderr}`);
      const dirs = (offered[1] as string).split(" ");
      assert.deepEqual(dirs, offlineRuns(runDir), "both attempts' offline runs, the killed one first");
      assert.equal(dirs.length, 2);
      await withServer(async (server) => {
        await officialSync(server, dirs);
        const rows = server.history(RUN_ID);
        assert.deepEqual(
          rows.map((r) => r["global_step"]),
          [0, 1, 2, 3, 4, 5, 6],
          "the killed attempt's steps, then the resumed one's",
        );
        assert.deepEqual(
          rows.map((r) => r["_step"]),
          [0, 1, 2, 3, 4, 5, 6],
        );
        const run = server.run(RUN_ID);
        assert.equal(run?.complete, true);
        assert.equal(run?.exitcode, 0, "the resumed attempt ended normally");
        for (const row of rows)
          assert.ok(
            run?.files.has((row["episode"] as { path: string }).path),
            `step ${String(row["global_step"])}'s table is uploaded`,
          );
      });
    },
  );

  it(
    "SIGTERM online: the process exits by SIGTERM (143) and W&B is told exit code 143",
    { timeout: 120_000 },
    async () => {
      const dir = tempDir("rankscope-wandb-term-");
      scratch.push(dir);
      await withServer(async (server) => {
        const ended = await job(
          dir,
          { JOB_MODE: "online", JOB_STEPS: "3", JOB_WAIT: "1", WANDB_BASE_URL: server.baseUrl },
          { signal: "SIGTERM", after: 2 },
        );
        assert.equal(ended.signal, "SIGTERM", ended.stderr);
        const run = server.run(RUN_ID);
        assert.deepEqual(
          server.history(RUN_ID).map((r) => r["global_step"]),
          [0, 1, 2],
        );
        assert.equal(run?.complete, true, ended.stderr);
        assert.equal(run?.exitcode, 143, "not a successful run");
        assert.deepEqual(server.violations, []);
      });
    },
  );

  it(
    "SIGTERM offline: the offline run's exit record says 143, and wandb sync reports it",
    { timeout: 180_000 },
    async () => {
      const dir = tempDir("rankscope-wandb-term-");
      scratch.push(dir);
      const ended = await job(
        dir,
        { JOB_MODE: "offline", JOB_STEPS: "3", JOB_WAIT: "1" },
        { signal: "SIGTERM", after: 2 },
      );
      assert.equal(ended.signal, "SIGTERM", ended.stderr);
      await withServer(async (server) => {
        await officialSync(server, offlineRuns(dir));
        assert.deepEqual(
          server.history(RUN_ID).map((r) => r["global_step"]),
          [0, 1, 2],
        );
        assert.equal(server.run(RUN_ID)?.exitcode, 143);
      });
    },
  );
});
