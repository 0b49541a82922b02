// The system monitor on ranks (other processes, other machines): samples reach the controller's
// backends with the next flush, on the monitor's own axis, labelled per rank.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { spawnRanks } from "../../src/transport/controller/launcher.js";
import { tempDir } from "../helpers.js";

const standIn = fileURLToPath(new URL("../fixtures/nvidia-smi/multi", import.meta.url));

test("each rank's monitor reaches the controller's backends on system/step, never at the training step", async () => {
  const runDir = tempDir();
  const logger = new MetricLogger({ runDir, processName: "Controller" });
  await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
  const ranks = await spawnRanks({
    module: new URL("../fixtures/monitor-rank.ts", import.meta.url),
    replicas: 1,
    ranksPerReplica: 2,
    processName: "Worker",
    logger,
    env: { PATH: `${standIn}${delimiter}${process.env["PATH"] ?? ""}` },
  });
  try {
    const logged = await ranks.fanout<number>("sampleAndLog");
    assert.ok(
      logged.every((n) => n > 0),
      `each rank logged system metrics locally: ${logged.join(", ")}`,
    );
    await logger.flush(5);
    await ranks.fanout("sampleAndLog");
    await logger.flush(6);
  } finally {
    await logger.shutdown();
  }
  const lines = readFileSync(join(runDir, "metrics.jsonl"), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as { key: string; step: number; value: number });
  for (const name of ranks.rankNames) {
    const gpu = lines.filter((l) => l.key === `system/${name}/gpu/0/utilization_percent`);
    assert.deepEqual(
      gpu.map((l) => [l.step, l.value]),
      [
        [0, 87],
        [1, 87],
      ],
      `${name}: one point per monitor flush, on the monitor's own steps`,
    );
  }
  const loss = lines.filter((l) => l.key === "loss");
  assert.deepEqual(
    loss.map((l) => l.step),
    [5, 6],
    "the training values stay at the training steps",
  );
});
