/**
 * Hyperparameters are named one way (src/core/hyperparams.ts): the same nested value given as
 * the run config and again through the facade's `logHyperparams` reaches every sink under one
 * name — the store's config (and so the dashboard's runs table), TensorBoard's HParams (read back
 * with TensorBoard's own event reader) and the W&B run's config (a strict local W&B server: the
 * cloud cannot be reached from here). Before, the facade flattened with `/` and the run config
 * with `.`: `model/layers` beside `model.layers`.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { config as storeConfig } from "../../src/store/reader.js";
import { VERSION_INFO_KEY } from "../../src/run/run-files.js";
import { Logger } from "../../src/facade/index.js";
import { startDashboard } from "../../src/ui/server.js";
import { tempDir } from "../helpers.js";
import { pythonKit } from "../helpers/python.js";
import { API_KEY, FAST, startServer } from "../backends/wandb/wandb-helpers.js";
import type { StrictWandbServer } from "../backends/wandb/wandb-server.js";

const kit = pythonKit("tensorboard");

/** Every hyperparameter name of each `session_start_info` in the event files under `dir`, by TensorBoard's own reader. */
function tensorBoardHparamNames(python: string, dir: string): string[][] {
  const files = readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => f.includes("tfevents"))
    .map((f) => join(dir, f));
  const script = `
import json, sys
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.plugins.hparams import plugin_data_pb2
out = []
for path in sys.argv[1:]:
    for event in EventFileLoader(path).Load():
        for value in event.summary.value:
            if value.metadata.plugin_data.plugin_name != "hparams":
                continue
            data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
            if data.HasField("session_start_info"):
                out.append(sorted(data.session_start_info.hparams.keys()))
print(json.dumps(out))
`;
  const result = spawnSync(python, ["-c", script, ...files], { encoding: "utf8", timeout: 120_000 });
  assert.equal(result.status, 0, result.stderr);
  return JSON.parse(result.stdout) as string[][];
}

let server: StrictWandbServer;
let root: string;
let runDir: string;

before(async () => {
  server = await startServer();
  root = tempDir();
  runDir = join(root, "hp", "run");
  const logger = await Logger.create({
    logDir: runDir,
    console: false,
    store: { waitForWrites: true },
    tensorboard: true,
    wandb: { baseUrl: server.baseUrl, apiKey: API_KEY, entity: "team", project: "proj", ...FAST },
    runConfig: { model: { layers: 4 }, lr: 0.1 },
  });
  await logger.logHyperparams({ model: { layers: 4, width: 8 }, seed: 1 });
  await logger.logMetrics({ loss: 1 }, 0);
  await logger.finish();
});
after(async () => {
  await server.stop();
});

const NAMES = ["lr", "model.layers", "model.width", "seed"];

test("the store keeps them nested and merged at every depth; the dashboard's runs table has one column per name", async () => {
  const { [VERSION_INFO_KEY]: _version, ...stored } = storeConfig(runDir);
  assert.deepEqual(stored, { model: { layers: 4, width: 8 }, lr: 0.1, seed: 1 });
  const dashboard = await startDashboard({ root, port: 0 });
  try {
    const answer = (await (await fetch(`${dashboard.url}api/runs`)).json()) as {
      runs: { id: string; params: Record<string, unknown> }[];
    };
    const params = answer.runs.find((r) => r.id === "hp/run")?.params ?? {};
    assert.deepEqual(
      Object.keys(params)
        .filter((k) => !k.startsWith(VERSION_INFO_KEY))
        .sort(),
      NAMES,
    );
  } finally {
    await dashboard.close();
  }
});

test("W&B's run config is nested, as W&B keeps one (shown there as model.layers)", () => {
  const [run, ...others] = [...server.runs.values()];
  assert.equal(others.length, 0);
  const { [VERSION_INFO_KEY]: _version, ...config } = run?.config ?? {};
  assert.deepEqual(config, { model: { value: { layers: 4, width: 8 } }, lr: { value: 0.1 }, seed: { value: 1 } });
});

test(
  `TensorBoard ${kit.version ?? ""}'s event reader finds each name once in the HParams session`,
  { skip: kit.skip, timeout: 120_000 },
  () => {
    const sessions = tensorBoardHparamNames(kit.python ?? "python3", runDir);
    assert.ok(sessions.length > 0, "TensorBoard read a session_start_info");
    for (const names of sessions)
      assert.deepEqual(
        names.filter((n) => !n.startsWith(VERSION_INFO_KEY)),
        NAMES,
      );
  },
);
