/**
 * `rankscope demo` fills every face the dashboard shows: run into a temporary root as a user would
 * (child-process ranks), then read the run through the dashboard's own API.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { startDashboard } from "../../../src/ui/server.js";
import { tempDir } from "../../helpers.js";

const MAIN = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));

async function json<T>(base: string, path: string): Promise<T> {
  const answer = await fetch(new URL(path, base));
  const text = await answer.text();
  assert.equal(answer.status, 200, `${path}: ${text}`);
  return JSON.parse(text) as T;
}

test("the demo leaves no dashboard tab empty: per-rank lines, a stream, system metrics, samples, histograms, config, version, tags, traces", async () => {
  const root = tempDir("rankscope-demo-");
  try {
    const child = spawn(process.execPath, ["--import", "tsx", MAIN, "demo", "--steps", "2"], {
      env: { ...process.env, RANKSCOPE_ROOT: root },
      // A deadline on the exit awaited below: a hung demo is killed (exit code null).
      timeout: 120_000,
      killSignal: "SIGKILL",
      stdio: ["ignore", "pipe", "pipe"],
    });
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    child.stdout.resume();
    const code = await new Promise((resolve) => child.once("exit", resolve));
    assert.equal(code, 0, err);

    const dashboard = await startDashboard({ root, port: 0 });
    try {
      const { runs } = await json<{ runs: { id: string; status: string; tags: string[]; group: string | null; params: Record<string, unknown> }[] }>(dashboard.url, "/api/runs");
      assert.equal(runs.length, 1);
      const run = runs[0]!;
      assert.equal(run.status, "finished");
      assert.deepEqual(run.tags, ["demo", "toy-rl"]);
      assert.equal(run.group, "demo");
      assert.equal(run.params["optimizer.lr"], 3e-4);
      const id = encodeURIComponent(run.id);

      const keys = await json<{
        metrics: { key: string; ranks: number[]; internal: boolean }[];
        streams: string[];
        system: string[];
        histograms: string[];
        rankNames: Record<string, string>;
      }>(
        dashboard.url,
        `/api/keys?run=${id}`,
      );
      const reward = keys.metrics.find((k) => k.key === "rollout/reward");
      assert.deepEqual({ ranks: reward?.ranks, internal: reward?.internal }, { ranks: [-1, 0, 1, 2, 3], internal: false }, "a global line (rank -1) and one per rank");
      assert.ok(keys.metrics.some((k) => k.internal), "the internal keys are there, flagged");
      // Rank 0 is the spawned rank; the controller's own collector is a line of its own (−2).
      assert.deepEqual(Object.keys(keys.rankNames), ["0", "1", "2", "3", "-2"]);
      for (const r of ["0", "1", "2", "3"]) assert.match(keys.rankNames[r] ?? "", /^MyActor_\w{4}_r[01]$/);
      assert.equal(keys.rankNames["-2"], "Controller");
      assert.ok(keys.streams.includes("rollout/reward"), `streams: ${keys.streams.join(", ")}`);
      assert.ok(keys.system.some((k) => k.startsWith("system/demo/cpu/")), `system: ${keys.system.join(", ")}`);
      assert.deepEqual(keys.histograms, ["rollout/response_len"]);

      const stream = await json<{ ranks: number[]; values: number[] }>(dashboard.url, `/api/stream?run=${id}&key=rollout/reward`);
      assert.equal(stream.values.length, 2 * 4 * 8, "every raw value: 2 steps × 4 ranks × 8 episodes");
      assert.deepEqual([...new Set(stream.ranks)].sort(), [0, 1, 2, 3]);
      const system = await json<{ values: number[] }>(dashboard.url, `/api/system?run=${id}&key=${encodeURIComponent(keys.system[0]!)}`);
      assert.equal(system.values.length, 2, "one system sample per step");
      const { samples } = await json<{ samples: unknown[] }>(dashboard.url, `/api/samples?run=${id}`);
      assert.ok(samples.length > 0);
      const { histograms } = await json<{ histograms: { histogram: { count: number } }[] }>(dashboard.url, `/api/histograms?run=${id}&key=rollout/response_len`);
      assert.ok(histograms.some((h) => h.histogram.count === 32), "4 ranks × 8 episodes in the global histogram");
      const config = await json<{ configYaml: string | null; version: { rankscope: { version: string } } | null }>(dashboard.url, `/api/config?run=${id}`);
      assert.match(config.configYaml ?? "", /algorithm: toy-rl/);
      assert.ok(config.version?.rankscope.version);
      const { files } = await json<{ files: { name: string; size: number }[] }>(dashboard.url, `/api/traces?run=${id}`);
      // The controller traces its steps in a file of its own, apart from rank 0's.
      assert.deepEqual(files.map((f) => f.name), ["controller.jsonl", "rank-0.jsonl", "rank-1.jsonl", "rank-2.jsonl", "rank-3.jsonl"]);
      assert.match(readFileSync(join(root, ...run.id.split("/"), "traces", "controller.jsonl"), "utf8"), /"name":"train.step"/);
      const trace = readFileSync(join(root, ...run.id.split("/"), "traces", "rank-2.jsonl"), "utf8");
      assert.match(trace, /"name":"rollout"/);
    } finally {
      await dashboard.close();
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
