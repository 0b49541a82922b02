/**
 * Golden bytes: a small fixed run (fixed clock) must produce exactly the tfevents file in
 * `fixtures/tensorboard-golden.txt` (one framed record per line, in hex), so any change to the
 * format is a visible diff. Regenerate with `UPDATE_GOLDEN=1` after checking the change is meant —
 * the other tensorboard tests decode what the writer produces independently.
 */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, it } from "node:test";
import { getCollector, recordMetric } from "../../../src/core/collector.js";
import { Reduce } from "../../../src/core/registry.js";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { tempDir } from "../../helpers.js";
import { eventFiles, readRecords } from "./tfevents-reader.js";

const GOLDEN = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "tensorboard-golden.txt");
const HEADER = "# tfevents golden file: one TFRecord (length, masked CRC, event, masked CRC) per line, hex";

const realNow = Date.now;
let clock = 1_700_000_000_000;
before(() => {
  Date.now = () => clock;
});
after(() => {
  Date.now = realNow;
  getCollector().clear();
});

it("a fixed run writes the golden tfevents bytes", async () => {
  const runDir = tempDir();
  const logger = new MetricLogger({ runDir });
  await logger.initBackends({ tensorboard: { loggingMode: "global_reduce" } }, { resumeStep: 3 });
  clock += 250;
  await logger.logHyperparams({ lr: 0.001, optimizer: { name: "adam" }, amp: false });
  for (const step of [3, 4]) {
    clock += 1000;
    recordMetric("loss", 0.5 / step, Reduce.MEAN);
    recordMetric("tokens", 128 * step, Reduce.SUM);
    recordMetric("diverged", step === 4 ? NaN : -Infinity, Reduce.MAX);
    for (const v of [0.25, 1, 1, 40]) recordMetric("acts", v * step, Reduce.HISTOGRAM);
    recordMetric("rollout", { prompt: `2+${step}`, answer: `${2 + step}`, reward: step / 4 }, Reduce.SAMPLE);
    await logger.flush(step);
  }
  await logger.shutdown();

  const [file] = eventFiles(join(runDir, "tensorboard"));
  assert.ok(file !== undefined);
  const bytes = readFileSync(file);
  // Records in hex, each with its framing: split where the (CRC-checked) reader found them.
  const lines: string[] = [];
  let at = 0;
  for (const record of readRecords(bytes)) {
    const end = at + record.length + 16;
    lines.push(bytes.subarray(at, end).toString("hex"));
    at = end;
  }
  const actual = `${HEADER}\n${lines.join("\n")}\n`;
  if (process.env["UPDATE_GOLDEN"] === "1") writeFileSync(GOLDEN, actual);
  const expected = readFileSync(GOLDEN, "utf8").split("\n");
  const got = actual.split("\n");
  for (let i = 0; i < Math.max(expected.length, got.length); i++) {
    assert.equal(got[i], expected[i], `record line ${i} differs from ${GOLDEN}`);
  }
  // The file is created at its first record (the hyperparameters, written before the first flush's data).
  assert.match(file, /events\.out\.tfevents\.1700000001\./, "the file is named by the clock's seconds, 10 digits");
});
