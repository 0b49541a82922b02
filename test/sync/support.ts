/**
 * What the live sync tests share: the job fixtures, a \`rankscope server\` child process that can
 * be killed and restarted on its port, and the database's point count.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import type pg from "pg";
import { REPO_ROOT, runNode, waitFor, within } from "../helpers.js";

export const CLI = join(REPO_ROOT, "dist/cli/main.js");
export const JOB = join(REPO_ROOT, "test/fixtures/sync-job.mjs");
export const TEAM_JOB = join(REPO_ROOT, "test/fixtures/team-job.mjs");

/** A `rankscope server` child process on a fixed port (so it can be restarted there). */
export class ServerProcess {
  child: ChildProcess | null = null;
  output = "";
  constructor(
    readonly db: string,
    readonly port: number,
  ) {}
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }
  async start(): Promise<void> {
    const child = spawn(process.execPath, [CLI, "server", "--db", this.db, "--port", String(this.port)], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child = child;
    child.stdout?.on("data", (d: Buffer) => (this.output = (this.output + d.toString()).slice(-20_000)));
    child.stderr?.on("data", (d: Buffer) => (this.output = (this.output + d.toString()).slice(-20_000)));
    await waitFor(async () => (await fetch(`${this.url}/readyz`).catch(() => null))?.ok === true, {
      timeoutMs: 60_000,
      what: `rankscope server on ${this.port} to be ready (${this.output.slice(-300)})`,
      intervalMs: 100,
    });
  }
  async kill(): Promise<void> {
    const child = this.child;
    if (child === null || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await within(exited, { timeoutMs: 10_000, what: "the server to die" });
    this.child = null;
  }
}

/** Start the sync job fixture; resolves with its result line once it exits. */
export function job(
  root: string,
  trial: string,
  env: Record<string, string>,
  steps: number,
  pauseMs: number,
  deadlineMs = 300_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runNode(
    [JOB],
    {
      RANKSCOPE_ROOT: root,
      RANKSCOPE_EXPERIMENT: "faults",
      RANKSCOPE_TRIAL: trial,
      JOB_STEPS: String(steps),
      JOB_PAUSE_MS: String(pauseMs),
      NO_COLOR: "1",
      ...env,
    },
    { raw: true, deadlineMs },
  );
}

export async function points(pool: pg.Pool): Promise<number> {
  const r = await pool.query<{ n: number | null }>("SELECT sum(n)::bigint AS n FROM series");
  return r.rows[0]?.n ?? 0;
}
