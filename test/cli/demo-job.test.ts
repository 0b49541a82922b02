/** `rankscope demo`: the distributed job prints seed 001 §2 in all three modes, then every reduction. */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";
import { builtCli, tempDir } from "../helpers.js";

const MAIN = builtCli();

test("rankscope demo: 2 replicas × 2 child processes, the three logging modes, then every reduction", async () => {
  const child = spawn(process.execPath, [MAIN, "demo", "--steps", "1"], {
    env: { ...process.env, RANKSCOPE_ROOT: tempDir() },
    // A deadline on the exit awaited below: a hung demo is killed (exit code null) instead of
    // running into the suite's global timeout.
    timeout: 120_000,
    killSignal: "SIGKILL",
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr.on("data", (d: Buffer) => (err += d.toString()));
  const code = await new Promise((resolve) => child.once("exit", resolve));
  assert.equal(code, 0, err);
  assert.match(out, /rankscope demo: 4 ranks as child processes: (MyActor_\w{4}_r[01](, )?){4}/);
  assert.ok(out.includes("=== [GlobalReduce] - METRICS STEP 0 ===\nmy_sum_rank_metric: 4.0\n===============\n"), out);
  assert.equal(out.match(/=== \[MyActor_\w{4}_r0\] - METRICS STEP 1 ===\nmy_sum_rank_metric: 0\.0\n/g)?.length, 2, out);
  assert.equal(out.match(/=== \[MyActor_\w{4}_r1\] - METRICS STEP 1 ===\nmy_sum_rank_metric: 2\.0\n/g)?.length, 2, out);
  assert.equal(out.match(/^\[0\] \[MyActor-0\/2\] .* INFO my_sum_rank_metric: 0$/gm)?.length, 4, out);
  assert.equal(out.match(/^\[1\] \[MyActor-1\/2\] .* INFO my_sum_rank_metric: 1$/gm)?.length, 4, out);
  assert.ok(
    out.lastIndexOf(" INFO my_sum_rank_metric") < out.indexOf("# a toy RL job"),
    "the stream lines print with their step, before the next part starts",
  );
  for (const key of [
    "rollout/reward",
    "rollout/reward_std",
    "rollout/reward_max",
    "rollout/reward_min",
    "rollout/latency_ms/p99",
    "rollout/response_len/mean",
    "rollout/tokens",
    "train/loss",
  ]) {
    assert.match(out, new RegExp(`^${key}: +\\S+$`, "m"), `${key} in the RL part`);
  }
  assert.match(out, /rollout\/tokens: +4096\.0/, "SUM over 4 ranks × 8 episodes × 128 tokens");
  assert.match(out, /SAMPLE LOGS STEP 3/);
});
