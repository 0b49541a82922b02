/** The `wandb` backend's small pieces: Retry-After parsing, backoff bounds, line encoding, histograms, option resolution. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { authHeader, backoffDelay, parseRetryAfter } from "../../../src/backends/wandb/http.js";
import { histogramJson, historyLine, historyNumber } from "../../../src/backends/wandb/history.js";
import { resolveWandbOptions, sanitiseRunId } from "../../../src/backends/wandb/options.js";
import { configJson, lastStepOf } from "../../../src/backends/wandb/api.js";
import { closeSync, fstatSync, openSync, readdirSync, readFileSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import {
  ATTEMPT_FILE,
  attemptOf,
  frameTransactionLog,
  makeAttemptDir,
  offlineRunDirs,
} from "../../../src/backends/wandb/offline-run.js";
import { tempDir } from "../../helpers.js";
import { decodeTransactionLog } from "./wandb-helpers.js";
import { parseWandbJson } from "./wandb-server.js";

describe("wandb http helpers", () => {
  it("reads Retry-After as seconds or as an HTTP date", () => {
    assert.equal(parseRetryAfter("3"), 3000);
    assert.equal(parseRetryAfter("0"), 0);
    const now = Date.parse("2026-01-01T00:00:00Z");
    assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:00:05 GMT", now), 5000);
    assert.equal(parseRetryAfter(null), undefined);
    assert.equal(parseRetryAfter("soon"), undefined);
  });

  it("backs off exponentially up to the cap, with jitter in the upper half", () => {
    const limits = { retryInitialMs: 100, retryMaxMs: 1000 };
    assert.equal(
      backoffDelay(0, limits, () => 0),
      50,
    );
    assert.equal(
      backoffDelay(0, limits, () => 1),
      100,
    );
    assert.equal(
      backoffDelay(3, limits, () => 1),
      800,
    );
    assert.equal(
      backoffDelay(10, limits, () => 1),
      1000,
    );
    assert.equal(
      backoffDelay(10, limits, () => 0),
      500,
    );
  });

  it("authenticates as user api with the key as password", () => {
    assert.equal(Buffer.from(authHeader("k3y").slice("Basic ".length), "base64").toString(), "api:k3y");
  });
});

describe("wandb history encoding", () => {
  it("finds the last _step of a history tail whose rows hold NaN, Infinity and -Infinity (and strings that look like them)", () => {
    const rows = [
      '{"_step":2,"a":NaN}',
      '{"_step":3,"a":Infinity,"b":"-Infinity NaN"}',
      '{"_step":4,"a":-Infinity,"c":[NaN,-Infinity]}',
    ];
    assert.equal(lastStepOf(JSON.stringify(rows)), 4);
    const row = parseWandbJson(rows[2] as string) as Record<string, unknown>;
    assert.equal(row["a"], -Infinity);
    assert.deepEqual(row["c"], [NaN, -Infinity]);
    assert.equal((parseWandbJson(rows[1] as string) as Record<string, unknown>)["b"], "-Infinity NaN");
    assert.equal(lastStepOf("not json"), -1);
    assert.equal(lastStepOf(JSON.stringify([])), -1);
  });

  it("writes _step, _runtime and _timestamp in seconds, global_step, and non-finite values as W&B's bare tokens", () => {
    const line = historyLine(
      7,
      1_700_000_000_250,
      1500,
      3,
      `"a":${historyNumber(NaN)},"b":${historyNumber(-Infinity)},"c":${historyNumber(0.1)}`,
    );
    assert.equal(
      line,
      '{"_step":7,"_runtime":1.5,"_timestamp":1700000000.25,"global_step":3,"a":NaN,"b":-Infinity,"c":0.1}',
    );
    const row = parseWandbJson(line) as Record<string, number>;
    assert.ok(Number.isNaN(row["a"]));
    assert.equal(row["b"], -Infinity);
  });

  it("turns bucket limits into n + 1 finite, ascending bin edges", () => {
    const json = histogramJson({
      count: 6,
      min: -2,
      max: 9,
      sum: 10,
      sumSquares: 90,
      bucketLimits: [0, 5, Infinity],
      bucketCounts: [2, 3, 1],
    });
    assert.ok(json !== null);
    const h = JSON.parse(json) as { values: number[]; bins: number[] };
    assert.deepEqual(h.values, [2, 3, 1]);
    assert.deepEqual(h.bins, [-2, 0, 5, 9]);
  });

  it("wraps config values as W&B does and keeps non-finite numbers readable", () => {
    assert.equal(configJson({ lr: 0.1, clip: Infinity }), '{"lr":{"value":0.1},"clip":{"value":"Infinity"}}');
  });
});

describe("wandb options", () => {
  it("resolves the environment W&B's clients read, options first", () => {
    const env = {
      WANDB_API_KEY: "envkey",
      WANDB_BASE_URL: "http://127.0.0.1:9/",
      WANDB_MODE: "dryrun",
      WANDB_PROJECT: "p",
      WANDB_ENTITY: "e",
    };
    const fromEnv = resolveWandbOptions({ loggingMode: "global_reduce" }, env);
    assert.equal(fromEnv.apiKey, "envkey");
    assert.equal(fromEnv.baseUrl, "http://127.0.0.1:9");
    assert.equal(fromEnv.mode, "offline");
    assert.equal(fromEnv.project, "p");
    assert.equal(fromEnv.entity, "e");
    assert.equal(fromEnv.resume, "allow");
    const fromOptions = resolveWandbOptions(
      { loggingMode: "global_reduce", apiKey: "optkey", mode: "online", project: "q" },
      env,
    );
    assert.equal(fromOptions.apiKey, "optkey");
    assert.equal(fromOptions.mode, "online");
    assert.equal(fromOptions.project, "q");
  });

  it("derives run ids W&B accepts", () => {
    assert.equal(sanitiseRunId("my exp/trial 1"), "my-exp-trial-1");
    assert.equal(sanitiseRunId("a_b.c-d"), "a_b.c-d");
  });
});

describe("wandb transaction log framing", () => {
  it("frames records of every size around block ends: full, first/middle/last chunks, zero padding when under 7 bytes are left", () => {
    // For each gap of 0..8 bytes: a record ending exactly `gap` bytes before its block's end (sized
    // from where the framed prefix ends), then an empty and a small record; then records spanning blocks.
    const records: Buffer[] = [];
    const add = (n: number): void => void records.push(Buffer.alloc(n, records.length % 251));
    for (let gap = 0; gap <= 8; gap++) {
      const at = frameTransactionLog(records).length % 32768;
      add((32768 - at - 7 - gap + 32768) % 32768);
      add(0);
      add(5);
    }
    add(70_000);
    add(32768 - 7);
    add(1);
    const sizes = records.map((r) => r.length);
    const framed = frameTransactionLog(records);
    const decoded = decodeTransactionLog(framed);
    assert.equal(decoded.records.length, records.length);
    decoded.records.forEach((r, i) =>
      assert.ok(r.equals(records[i] as Buffer), `record ${i} (${sizes[i]} bytes) comes back`),
    );
    assert.ok(decoded.spanned >= 2, "records span blocks");
    assert.ok(decoded.padded >= 1, "a block end with under 7 bytes left is padded");
  });
});

describe("wandb offline run directories", () => {
  it("replaces an attempt's note whole (src/io's atomic write): a reader that opened the old note reads it in full, and no temporary file is left", () => {
    const wandbDir = tempDir("offline-note-");
    const dir = makeAttemptDir(wandbDir, "run1", Date.UTC(2026, 0, 1), 0);
    const note = join(dir, ATTEMPT_FILE);
    const before = readFileSync(note, "utf8");
    const fd = openSync(note, "r");
    try {
      // The same attempt again (a restarted writer): the same directory, its note written anew —
      // into a new file renamed over the old, never by truncating the file a reader has open.
      assert.equal(makeAttemptDir(wandbDir, "run1", Date.UTC(2026, 0, 1), 0), dir);
      assert.notEqual(statSync(note).ino, fstatSync(fd).ino, "the note was rewritten in place, not replaced");
      const size = fstatSync(fd).size;
      const buffer = Buffer.alloc(size);
      readSync(fd, buffer, 0, size, 0);
      assert.equal(
        buffer.toString("utf8"),
        before,
        "the old note, read through a descriptor opened before the rewrite, is whole",
      );
    } finally {
      closeSync(fd);
    }
    assert.equal(attemptOf(dir), 0);
    assert.deepEqual(readdirSync(dir), [ATTEMPT_FILE]);
    // Another attempt in the same second takes the next second's directory; the first keeps its note.
    const second = makeAttemptDir(wandbDir, "run1", Date.UTC(2026, 0, 1), 40);
    assert.notEqual(second, dir);
    assert.equal(attemptOf(second), 40);
    assert.equal(attemptOf(dir), 0);
    assert.deepEqual(offlineRunDirs(wandbDir, "run1"), [dir, second]);
  });
});
