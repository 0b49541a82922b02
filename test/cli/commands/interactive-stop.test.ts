/**
 * `rankscope ui` and `rankscope tail` stop on Ctrl-C through the one process lifecycle
 * (docs/lifecycle.md, "An interactive stop"): a real SIGINT / SIGTERM to the built CLI, and the
 * command exits promptly with code 0 — `tail` even in the middle of a long wait between polls.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { GLOBAL_RANK } from "../../../src/store/schema.js";
import { StoreWriter } from "../../../src/store/writer.js";
import { tempDir } from "../../helpers.js";
import { seedFinishedRun } from "../../ui/seed.js";

const REPO = fileURLToPath(new URL("../../..", import.meta.url));
const CLI = join(REPO, "dist", "cli", "main.js");
/** Longest the command may take to end after the signal: far below tail's 10-minute poll interval. */
const STOP_DEADLINE_MS = 30_000;

before(() => {
  // scripts/test.sh builds first; a direct run of this file builds when dist is missing.
  if (!existsSync(CLI)) spawnSync("npm", ["run", "build", "--silent"], { cwd: REPO, stdio: "inherit" });
});

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface Started {
  child: ChildProcess;
  output: () => string;
  /** Resolves with the exit code and signal, or rejects if the process is still alive `STOP_DEADLINE_MS` after `stop`. */
  stop: (signal: NodeJS.Signals) => Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Start the built CLI; resolves once its output matches `ready`. */
async function startCli(args: string[], ready: RegExp): Promise<Started> {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("close", (code, signal) => resolve({ code, signal })),
  );
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`rankscope ${args.join(" ")} never printed ${ready}: ${out}`)),
      30_000,
    );
    const check = (): void => {
      if (!ready.test(out)) return;
      clearTimeout(timer);
      resolve();
    };
    child.stdout?.on("data", check);
    void closed.then(() => reject(new Error(`rankscope ${args.join(" ")} exited early: ${out}`)));
  });
  return {
    child,
    output: () => out,
    stop: async (signal) => {
      child.kill(signal);
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          child.kill("SIGKILL");
          reject(
            new Error(`rankscope ${args.join(" ")} was still running ${STOP_DEADLINE_MS} ms after ${signal}: ${out}`),
          );
        }, STOP_DEADLINE_MS);
      });
      try {
        return await Promise.race([closed, late]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

describe("rankscope ui", () => {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    test(`${signal} with a client connected: the server closes and the command exits with code 0`, async () => {
      const root = tempDir("rankscope-stop-ui-");
      dirs.push(root);
      seedFinishedRun(root);
      const ui = await startCli(
        ["ui", "--root", root, "--port", "0"],
        /rankscope dashboard: http:\/\/127\.0\.0\.1:\d+\//,
      );
      const url = /rankscope dashboard: (\S+)/.exec(ui.output())?.[1] as string;
      // A client with a keep-alive connection open (what a browser tab holds).
      const answer = await fetch(`${url}api/runs`);
      assert.equal(answer.status, 200);
      await answer.arrayBuffer();
      const ended = await ui.stop(signal);
      assert.deepEqual(ended, { code: 0, signal: null }, ui.output());
      await assert.rejects(fetch(`${url}api/runs`), "the dashboard still answers after it stopped");
    });
  }
});

describe("rankscope tail", () => {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    test(`${signal} while it waits between polls (--interval 10 minutes): it exits at once with code 0`, async () => {
      const root = tempDir("rankscope-stop-tail-");
      dirs.push(root);
      const runDir = join(root, "exp", "live");
      const writer = StoreWriter.open({
        runDir,
        role: "controller",
        rank: GLOBAL_RANK,
        rankName: "Controller",
        experiment: "exp",
        trial: "live",
      });
      try {
        writer.write({ scalars: [{ key: "loss", step: 0, wall: 1, value: 5 }] });
        const tail = await startCli(["tail", runDir, "--interval", "600000"], /step 0 {2}loss {2}5\n/);
        const ended = await tail.stop(signal);
        assert.deepEqual(ended, { code: 0, signal: null }, tail.output());
      } finally {
        writer.finish();
      }
    });
  }
});
