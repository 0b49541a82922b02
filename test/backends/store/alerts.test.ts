/**
 * The store's alerts: the events the controller's store backend is handed (`logAlert`) are written
 * with the flush's batch and read back in order by `alerts(runDir)` — NaN and ±Infinity values
 * included, `after` and `limit` honoured — and a store written before alerts existed reads as
 * having none until a writer opens it again (the table is created then).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import type { AlertEvent } from "../../../src/core/alert.js";
import { alerts, closeStores } from "../../../src/store/reader.js";
import { StoreBackend } from "../../../src/backends/store/index.js";
import { sqliteDriver } from "../../../src/store/sqlite.js";
import { storePath } from "../../../src/store/schema.js";
import { openRun } from "../../ui/seed.js";
import { tempDir } from "../../helpers.js";

/** better-sqlite3's `Database` class, of the build this Node.js runs. */
const Database = sqliteDriver();

function event(n: number, extra: Partial<AlertEvent> = {}): AlertEvent {
  return {
    id: `nonfinite:loss#${n}`,
    rule: "nonfinite",
    level: "error",
    run: "exp/t",
    step: n,
    key: "loss",
    value: NaN,
    message: `m${n}`,
    state: "firing",
    at: 1_700_000_000_000 + n,
    ...extra,
  };
}

test("alerts logged to the store backend are read back in order, values and fields as they were", async () => {
  const runDir = tempDir();
  const backend = new StoreBackend({ loggingMode: "global_reduce", waitForWrites: true });
  await backend.init({
    backendName: "store",
    displayName: "GlobalReduce",
    loggingMode: "global_reduce",
    role: "controller",
    identity: { rank: 0, rankName: "Controller", processName: "Controller", localRank: 0, localWorldSize: 1 },
    runDir,
    experiment: "exp",
    trial: "t",
    resumeStep: 0,
    primaryMetadata: {},
  });
  const written: AlertEvent[] = [
    event(1),
    event(1, { state: "resolved", value: 0.25, message: "back" }),
    {
      id: "rank_lost:Trainer_a_r3#2",
      rule: "rank_lost",
      level: "error",
      run: "exp/t",
      step: 9,
      rank: 3,
      rankName: "Trainer_a_r3",
      host: "node-b",
      message: "gone",
      state: "firing",
      at: 5,
    },
    event(3, { value: -Infinity }),
    {
      id: "user#4",
      rule: "user",
      level: "info",
      run: "exp/t",
      step: null,
      title: "<b>hi</b>",
      message: "<b>hi</b>: there",
      state: "firing",
      at: 6,
    },
  ];
  for (const e of written) backend.logAlert(e);
  await backend.flushed();
  const read = alerts(runDir);
  assert.deepEqual(
    read.map(({ seq: _seq, ...e }) => e),
    written,
  );
  assert.deepEqual(
    read.map((e) => e.seq),
    [1, 2, 3, 4, 5],
  );
  assert.deepEqual(
    alerts(runDir, { after: 3 }).map((e) => e.id),
    ["nonfinite:loss#3", "user#4"],
  );
  assert.deepEqual(
    alerts(runDir, { limit: 2 }).map((e) => e.seq),
    [4, 5],
    "the newest, in order",
  );
  await backend.finish();
  closeStores();
});

test("a store written before alerts existed has none; a writer opening it again adds the table", () => {
  const root = tempDir();
  const writer = openRun(root, "exp", "old");
  writer.finish();
  const runDir = join(root, "exp", "old");
  const db = new Database(storePath(runDir));
  db.exec("DROP TABLE alerts");
  db.close();
  assert.deepEqual(alerts(runDir), []);
  const again = openRun(root, "exp", "old");
  again.write({ alerts: [event(1)] });
  again.finish();
  assert.deepEqual(
    alerts(runDir).map((e) => e.id),
    ["nonfinite:loss#1"],
    "the reader finds the table once it exists",
  );
  closeStores();
});

test("a stored event that is not one (not JSON, a field of the wrong type) is left out, the others read", () => {
  const root = tempDir();
  const writer = openRun(root, "exp", "bad");
  writer.write({ alerts: [event(1), event(2)] });
  writer.finish();
  const runDir = join(root, "exp", "bad");
  const db = new Database(storePath(runDir));
  db.prepare(
    "INSERT INTO alerts (alert_id, rule, state, level, step, wall, event) VALUES ('x', 'x', 'firing', 'info', 1, 1, '{not json')",
  ).run();
  db.prepare(
    "INSERT INTO alerts (alert_id, rule, state, level, step, wall, event) VALUES ('y', 'y', 'firing', 'info', 1, 1, ?)",
  ).run(JSON.stringify({ ...event(3), level: "fatal" }));
  db.close();
  assert.deepEqual(
    alerts(runDir).map((e) => e.id),
    ["nonfinite:loss#1", "nonfinite:loss#2"],
  );
  closeStores();
});
