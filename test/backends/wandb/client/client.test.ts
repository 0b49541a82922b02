/** W&B's HTTP client, in small pieces: Retry-After parsing, backoff bounds, the API key's header, history line encoding, histograms, config values. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { configJson, lastStepOf } from "../../../../src/backends/wandb/client/api.js";
import { histogramJson, historyLine, historyNumber } from "../../../../src/backends/wandb/client/history.js";
import { nextUp } from "../../../../src/core/doubles.js";
import { authHeader, backoffDelay, parseRetryAfter } from "../../../../src/backends/wandb/client/http.js";
import { parseWandbJson } from "../wandb-server.js";

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

  it("turns bucket limits into n + 1 finite, ascending bin edges, each limit one double up (W&B reads [left, right))", () => {
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
    assert.deepEqual(h.bins, [-2, nextUp(0), nextUp(5), 9], "a 0 or a 5 (in (…, 0] and (0, 5]) stays in its bin");
  });

  it("wraps config values as W&B does and keeps non-finite numbers readable", () => {
    assert.equal(configJson({ lr: 0.1, clip: Infinity }), '{"lr":{"value":0.1},"clip":{"value":"Infinity"}}');
  });
});
