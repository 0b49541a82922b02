/** Helpers of the W&B tests: a strict server per test, expected values, and a leak check for the key. */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { getCollector } from "../../src/core/collector.js";
import { resetDiagnostics } from "../../src/core/diagnostics.js";
import { StrictWandbServer, type HistoryRow } from "./wandb-server.js";

/** A key that would be easy to spot anywhere it leaked. */
export const API_KEY = "local-test-key-6f1c0de0b1e2a3c4d5e6f708192a3b4c";

/** Fast retry settings so fault tests take seconds, not minutes. */
export const FAST = { requestTimeoutMs: 400, retryInitialMs: 20, retryMaxMs: 200, retryBudgetMs: 3000, finishTimeoutMs: 3000, sendIntervalMs: 50 } as const;

export async function startServer(): Promise<StrictWandbServer> {
  const server = new StrictWandbServer(API_KEY);
  await server.start();
  return server;
}

/** A clean slate for the process-wide collector and diagnostics. */
export function resetProcess(): void {
  getCollector().clear();
  getCollector().stream = null;
  resetDiagnostics();
}

/** Every value of `key` in history rows, in row order. */
export function valuesOf(rows: readonly HistoryRow[], key: string): unknown[] {
  return rows.filter((r) => key in r).map((r) => r[key]);
}

/** Every file under a directory (recursively). */
export function allFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...allFiles(path));
    else out.push(path);
  }
  return out;
}

/** Files under `dir` whose content contains the API key (should be none). */
export function filesContainingKey(dir: string): string[] {
  return allFiles(dir).filter((f) => readFileSync(f, "utf8").includes(API_KEY));
}
