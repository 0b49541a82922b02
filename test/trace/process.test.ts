/** Trace files written by real rank processes: at exit, after the run becomes known, and the env switches. */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";
import { parseTraceText } from "../../src/trace/trace-file.js";
import { tempDir, TS_LOADER } from "../helpers.js";

const child = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "trace-child.ts");

function runChild(mode: "natural" | "exit", env: Record<string, string> = {}): { runDir: string; keys: string[] } {
  const runDir = tempDir();
  const result = spawnSync(process.execPath, ["--import", TS_LOADER, child, mode, runDir], {
    encoding: "utf8",
    // A long save interval: what is in the files was written at exit.
    env: {
      ...process.env,
      RANKSCOPE_TRACE_SAVE_INTERVAL_MS: "600000",
      RANKSCOPE_DISABLE_TRACING: "",
      RANKSCOPE_DISABLE_METRICS: "",
      RANKSCOPE_TRACE_RANKS: "",
      ...env,
    },
  });
  assert.equal(result.status, 0, result.stderr);
  return { runDir, keys: (JSON.parse(result.stdout) as { keys: string[] }).keys };
}

function spanNames(runDir: string, rank: number): string[] {
  const parsed = parseTraceText(readFileSync(join(runDir, "traces", `rank-${rank}.jsonl`), "utf8"));
  assert.equal(parsed.truncated, false);
  return parsed.events.filter((e) => e.ph !== "M").map((e) => e.name);
}

describe("trace files from a rank process", () => {
  for (const mode of ["natural", "exit"] as const) {
    it(`writes everything buffered when the process ends (${mode === "exit" ? "process.exit" : "loop drains"})`, () => {
      const { runDir, keys } = runChild(mode, { RANK: "2" });
      assert.deepEqual(spanNames(runDir, 2).sort(), ["after.run", "before.run", "mark", "tokens"]);
      const header = parseTraceText(readFileSync(join(runDir, "traces", "rank-2.jsonl"), "utf8")).events[0]!;
      assert.deepEqual(header.args, { name: "[Trainer] Rank 2" });
      const lines = readFileSync(join(runDir, "sessions", "rank-2.jsonl"), "utf8")
        .trimEnd()
        .split("\n");
      assert.equal(lines.length, 1);
      assert.equal(JSON.parse(lines[0]!).role, "Trainer");
      assert.ok(
        keys.includes("child/s/duration_avg_s") &&
          keys.includes("child/memory_peak_max_gb") &&
          keys.includes("wrapped/total_duration_max_s"),
      );
    });
  }

  it("writes what is buffered on SIGTERM, and the process still terminates by the signal", async () => {
    const runDir = tempDir();
    const proc = spawn(process.execPath, ["--import", TS_LOADER, child, "signal", runDir], {
      env: {
        ...process.env,
        RANK: "1",
        RANKSCOPE_TRACE_SAVE_INTERVAL_MS: "600000",
        RANKSCOPE_DISABLE_TRACING: "",
        RANKSCOPE_DISABLE_METRICS: "",
        RANKSCOPE_TRACE_RANKS: "",
      },
      stdio: ["ignore", "pipe", "inherit"],
      // The deadline on the exit awaited below: a hung child is killed by SIGKILL, which fails the signal check.
      timeout: 60_000,
      killSignal: "SIGKILL",
    });
    let out = "";
    proc.stdout.setEncoding("utf8");
    proc.stdout.on("data", (chunk: string) => {
      out += chunk;
      if (out.includes("\n")) proc.kill("SIGTERM");
    });
    const [code, signal] = (await once(proc, "exit")) as [number | null, NodeJS.Signals | null];
    assert.equal(code, null);
    assert.equal(signal, "SIGTERM");
    assert.deepEqual(spanNames(runDir, 1).sort(), ["after.run", "before.run", "mark", "tokens"]);
    assert.equal(
      readFileSync(join(runDir, "sessions", "rank-1.jsonl"), "utf8")
        .trimEnd()
        .split("\n").length,
      1,
    );
  });

  it("RANKSCOPE_DISABLE_TRACING makes Tracer, traces and sessions no-ops", () => {
    const { runDir, keys } = runChild("natural", { RANKSCOPE_DISABLE_TRACING: "1" });
    assert.deepEqual(keys, []);
    assert.equal(existsSync(join(runDir, "traces")), false);
    assert.equal(existsSync(join(runDir, "sessions")), false);
  });

  it("RANKSCOPE_DISABLE_METRICS makes the Tracer a no-op but keeps perf traces", () => {
    const { runDir, keys } = runChild("natural", { RANKSCOPE_DISABLE_METRICS: "true" });
    assert.deepEqual(keys, []);
    assert.ok(spanNames(runDir, 0).includes("after.run"));
  });

  it("RANKSCOPE_TRACE_RANKS selects the ranks that write traces", () => {
    const skipped = runChild("natural", { RANK: "0", RANKSCOPE_TRACE_RANKS: "1-3" });
    assert.equal(existsSync(join(skipped.runDir, "traces", "rank-0.jsonl")), false);
    const traced = runChild("natural", { RANK: "3", RANKSCOPE_TRACE_RANKS: "1-3" });
    assert.ok(spanNames(traced.runDir, 3).includes("before.run"));
  });
});
