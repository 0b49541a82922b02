/**
 * The `stalled` watchdog on a mocked clock (`mock.timers`): no flush for `factor` × the median of
 * the recent flush intervals (at least `minMs`) fires once, the next flush resolves it; it is not
 * armed before three intervals are known, never keeps a process alive (unref'd), and stops with
 * the engine.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, it, mock } from "node:test";
import type { AlertEvent } from "../../src/core/alert.js";
import { AlertEngine } from "../../src/alerts/engine.js";
import { resolveAlertOptions } from "../../src/alerts/options.js";
import type { StalledRule } from "../../src/alerts/rule-config.js";
import { TS_LOADER } from "../helpers.js";

function stalledEngine(rule: Partial<StalledRule> = {}): {
  engine: AlertEngine;
  emitted: AlertEvent[];
  flush: (step: number) => AlertEvent[];
} {
  const emitted: AlertEvent[] = [];
  const engine = new AlertEngine(
    "exp/t",
    resolveAlertOptions({ rules: [{ rule: "stalled", ...rule }], minIntervalMs: 0 }, {}),
    (events) => emitted.push(...events),
  );
  return { engine, emitted, flush: (step) => engine.observeFlush({ step, at: Date.now(), metrics: [] }) };
}

describe("stalled", () => {
  beforeEach(() => mock.timers.enable({ apis: ["setTimeout", "Date"], now: 1_000_000 }));
  afterEach(() => mock.timers.reset());

  it("fires once after 10× the median flush interval without a flush, and the next flush resolves it", () => {
    const { engine, emitted, flush } = stalledEngine({ minMs: 100 });
    for (let step = 0; step < 5; step++) {
      assert.deepEqual(flush(step), []);
      mock.timers.tick(step === 2 ? 300 : 200); // intervals 200, 200, 300, 200: median 200
    }
    // The last flush (step 4) was 200 ms ago; the watchdog fires 10 × 200 = 2000 ms after it.
    mock.timers.tick(1799);
    assert.equal(emitted.length, 0);
    mock.timers.tick(1);
    assert.equal(emitted.length, 1);
    const [firing] = emitted;
    assert.deepEqual(
      [firing?.rule, firing?.state, firing?.level, firing?.step, firing?.id],
      ["stalled", "firing", "error", 4, "stalled:job#1"],
    );
    assert.equal(
      firing?.message,
      "no flush for 2.0 s after step 4 (10× the median flush interval of 0.20 s, at least 0.10 s)",
    );
    mock.timers.tick(60_000);
    assert.equal(emitted.length, 1, "one alert per episode however long it lasts");
    const resolved = flush(5);
    assert.deepEqual(
      resolved.map((e) => [e.state, e.id, e.step, e.message]),
      [["resolved", "stalled:job#1", 5, "flushing again: step 5, 62 s after the last flush"]],
    );
    engine.close();
  });

  it("minMs is the least time before a stall, however fast the flushes", () => {
    const { engine, emitted, flush } = stalledEngine({ factor: 10, minMs: 5000 });
    for (let step = 0; step < 4; step++) {
      flush(step);
      mock.timers.tick(10);
    }
    mock.timers.tick(4980);
    assert.equal(emitted.length, 0);
    mock.timers.tick(10);
    assert.equal(emitted.length, 1);
    engine.close();
  });

  it("is not armed before three flush intervals are known (the first steps are often slow)", () => {
    const { engine, emitted, flush } = stalledEngine({ minMs: 0 });
    flush(0);
    mock.timers.tick(10);
    flush(1);
    mock.timers.tick(10);
    flush(2);
    mock.timers.tick(3_600_000);
    assert.equal(emitted.length, 0);
    engine.close();
  });

  it("stops with the engine: no alert after close", () => {
    const { engine, emitted, flush } = stalledEngine({ minMs: 0 });
    for (let step = 0; step < 5; step++) {
      flush(step);
      mock.timers.tick(100);
    }
    engine.close();
    mock.timers.tick(3_600_000);
    assert.equal(emitted.length, 0);
  });
});

it("the watchdog's timer is unref'd: a job whose loop is done is not kept alive by it", async () => {
  const { runSnippet } = await import("../helpers.js");
  const code = `
    const { AlertEngine } = await import(${JSON.stringify(new URL("../../src/alerts/engine.ts", import.meta.url).href)});
    const { resolveAlertOptions } = await import(${JSON.stringify(new URL("../../src/alerts/options.ts", import.meta.url).href)});
    const engine = new AlertEngine("e/t", resolveAlertOptions({ rules: [{ rule: "stalled", minMs: 600000 }] }, {}), () => {});
    for (let step = 0; step < 5; step++) { engine.observeFlush({ step, at: Date.now() + step, metrics: [] }); }
    console.log("armed");
  `;
  const result = await runSnippet(code, { NODE_OPTIONS: `--import ${TS_LOADER}` });
  assert.equal(result.code, 0, result.stderr);
  assert.equal(result.stdout.trim(), "armed");
});
