import assert from "node:assert/strict";
import { describe, it, beforeEach } from "node:test";
import { getCollector } from "../../src/core/collector.js";
import { getReduceDefinition } from "../../src/core/registry.js";
import { Tracer, trace, traced } from "../../src/trace/tracer.js";
import { collectDiagnostics } from "../helpers.js";
import { handClock, onMockedTime } from "./trace-helpers.js";

/** Sleep through the global `setTimeout`, looked up at each call, so `mock.timers` drives it. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Values recorded since the last call, by key, reduced as a flush would. */
function takeValues(): Map<string, { value: number; count: number; reduce: string }> {
  const out = new Map<string, { value: number; count: number; reduce: string }>();
  for (const s of getCollector().takeStates()) {
    const value = getReduceDefinition(s.reduce).value(s.state) as number;
    out.set(s.key, { value, count: s.state.count, reduce: s.reduce });
  }
  return out;
}

describe("Tracer", () => {
  beforeEach(() => {
    getCollector().takeStates();
    getCollector().timings.take();
  });

  it("keeps its runs, phases and barriers in the thread's step timings, which a rank's flush answer carries", () => {
    const clock = handClock();
    try {
      const t = new Tracer("dp_step");
      for (let i = 0; i < 2; i++) {
        t.start();
        clock.advance(30);
        t.step("forward");
        clock.advance(50);
        t.step("backward");
        clock.advance(20);
        t.barrier("allreduce"); // 20 ms since the previous mark: waiting for the others
        t.stop();
      }
      t.start();
      clock.advance(5);
      t.step("forward"); // a run still going at the flush: its phase counts, the run does not yet
    } finally {
      clock.restore();
    }
    const values = takeValues();
    assert.ok(values.has("dp_step/allreduce/duration_avg_s"), "a barrier is recorded like a step");
    const timings = getCollector().timings.take();
    assert.deepEqual(timings, [
      {
        prefix: "dp_step",
        steps: 2,
        totalMs: 200,
        phases: [
          { name: "forward", kind: "phase", count: 3, totalMs: 65 },
          { name: "backward", kind: "phase", count: 2, totalMs: 100 },
          { name: "allreduce", kind: "barrier", count: 2, totalMs: 40 },
        ],
      },
    ]);
    assert.deepEqual(getCollector().timings.take(), [], "taken and reset");
    assert.throws(() => new Tracer("idle").barrier("allreduce"), /barrier\("allreduce"\) was called before start\(\)/);
  });

  it("records Forge's key names with MEAN and MAX, in seconds", () => {
    const clock = handClock();
    try {
      const t = new Tracer("loop");
      for (let i = 0; i < 2; i++) {
        t.start();
        clock.advance(2);
        t.step("mm");
        clock.advance(1);
        t.step("mm");
        t.stop();
      }
    } finally {
      clock.restore();
    }
    const values = takeValues();
    assert.deepEqual([...values.keys()].sort(), [
      "loop/mm/duration_avg_s",
      "loop/mm/duration_max_s",
      "loop/total_duration_avg_s",
      "loop/total_duration_max_s",
    ]);
    assert.equal(values.get("loop/mm/duration_avg_s")!.reduce, "mean");
    assert.equal(values.get("loop/mm/duration_max_s")!.reduce, "max");
    assert.equal(values.get("loop/total_duration_avg_s")!.reduce, "mean");
    assert.equal(values.get("loop/total_duration_max_s")!.reduce, "max");
    assert.equal(values.get("loop/mm/duration_avg_s")!.count, 4);
    assert.equal(values.get("loop/total_duration_avg_s")!.count, 2);
    // Stages of 2 ms and 1 ms, twice: each step is the time since the previous one.
    const close = (key: string, expected: number): void =>
      assert.ok(
        Math.abs(values.get(key)!.value - expected) < 1e-9,
        `${key} = ${values.get(key)!.value}, expected ${expected}`,
      );
    close("loop/mm/duration_avg_s", 0.0015);
    close("loop/mm/duration_max_s", 0.002);
    close("loop/total_duration_avg_s", 0.003);
    close("loop/total_duration_max_s", 0.003);
  });

  it("measures each concurrent task's own time (Forge's scenario)", async () => {
    // Forge's test: two tasks, each 50 ms, then steps of 50, 100 and 150 ms, then 50 ms, run
    // concurrently. On mocked time the figures are exact, and the tasks' sum of 800 ms in 400 ms
    // of time shows they overlapped.
    async function task(): Promise<void> {
      const t = new Tracer("concurrent", { timer: "cpu" });
      t.start();
      await sleep(50);
      t.step("a");
      for (const ms of [50, 100, 150]) {
        await sleep(ms);
        t.step("b");
      }
      await sleep(50);
      t.stop();
    }
    const { elapsedMs } = await onMockedTime(() => Promise.all([task(), task()]));
    const values = takeValues();
    const close = (key: string, expected: number, count: number): void => {
      const v = values.get(key);
      assert.ok(v !== undefined, `${key} was recorded`);
      assert.equal(v.count, count, `${key} count`);
      assert.ok(Math.abs(v.value - expected) < 1e-9, `${key} = ${v.value}, expected ${expected}`);
    };
    close("concurrent/a/duration_avg_s", 0.05, 2);
    close("concurrent/b/duration_avg_s", 0.1, 6);
    close("concurrent/b/duration_max_s", 0.15, 6);
    close("concurrent/total_duration_avg_s", 0.4, 2);
    close("concurrent/total_duration_max_s", 0.4, 2);
    assert.equal(elapsedMs, 400, "the two tasks ran concurrently");
  });

  it("says which call was out of order", () => {
    const t = new Tracer("misuse");
    assert.throws(() => t.step("x"), /Tracer\("misuse"\)\.step\("x"\) was called before start\(\)/);
    assert.throws(() => t.stop(), /Tracer\("misuse"\)\.stop\(\) was called before start\(\)/);
    t.start();
    assert.throws(() => t.start(), /start\(\) was called while it is already running; call stop\(\)/);
    t.stop();
    assert.throws(() => t.stop(), /stop\(\) was called before start\(\)/);
    // Reusable after stop.
    t.start();
    t.step("again");
    t.stop();
    assert.equal(takeValues().get("misuse/total_duration_avg_s")!.count, 2);
  });

  it("rejects an unknown timer and lists the valid ones", () => {
    assert.throws(
      () => new Tracer("p", { timer: "gpu" as never }),
      /timer the string "gpu" is not valid; valid timers: "cpu"/,
    );
    assert.throws(() => new Tracer(""), /prefix must be a non-empty string/);
    assert.throws(() => trace("p", { timer: "wall" as never }, () => 1), /valid timers: "cpu"/);
  });

  it("tracks heap and RSS memory with their own keys", () => {
    const t = new Tracer("mem", { trackMemory: true });
    t.start();
    const keep = Array.from({ length: 100_000 }, (_, i) => ({ i }));
    t.step("alloc");
    t.stop();
    assert.equal(keep.length, 100_000);
    const values = takeValues();
    for (const key of ["mem/memory_delta_end_start_avg_gb", "mem/rss_delta_end_start_avg_gb"])
      assert.equal(values.get(key)?.reduce, "mean", key);
    for (const key of ["mem/memory_peak_max_gb", "mem/rss_peak_max_gb"])
      assert.equal(values.get(key)?.reduce, "max", key);
    const peak = values.get("mem/memory_peak_max_gb")!.value;
    assert.ok(peak > 0 && peak < 64, `heap peak ${peak} GiB`);
    assert.ok(values.get("mem/rss_peak_max_gb")!.value >= peak);
  });

  it("skips nested memory tracking with one warning per prefix", async () => {
    const diagnostics = await collectDiagnostics(() => {
      const outer = new Tracer("outer", { trackMemory: true }).start();
      for (let i = 0; i < 3; i++) {
        const inner = new Tracer("inner", { trackMemory: true }).start();
        inner.step("s");
        inner.stop();
      }
      outer.stop();
      // Once the outer one stopped, the inner one tracks memory again.
      const alone = new Tracer("inner", { trackMemory: true }).start();
      alone.stop();
    });
    const nested = diagnostics.filter((d) => d.code.startsWith("tracer.nestedMemory"));
    assert.equal(nested.length, 3);
    assert.ok(nested.every((d) => d.code === "tracer.nestedMemory:inner"));
    assert.equal(nested.filter((d) => d.count === 1).length, 1, "reported (printed) once");
    assert.match(nested[0]!.message, /Tracer\("inner"\) tracks memory inside Tracer\("outer"\)/);
    const values = takeValues();
    assert.equal(values.get("outer/memory_peak_max_gb")!.count, 1);
    // Durations of the inner ones are recorded; their memory only when not nested.
    assert.equal(values.get("inner/total_duration_avg_s")!.count, 4);
    assert.equal(values.get("inner/memory_peak_max_gb")!.count, 1);
  });

  it("keeps concurrent trace() calls' memory tracking apart", async () => {
    const diagnostics = await collectDiagnostics(() =>
      Promise.all([0, 1].map(() => trace("sibling", { trackMemory: true }, async () => sleep(5)))),
    );
    assert.equal(diagnostics.filter((d) => d.code.startsWith("tracer.nestedMemory")).length, 0);
    assert.equal(takeValues().get("sibling/memory_peak_max_gb")!.count, 2);
  });
});

describe("trace() wrapper", () => {
  beforeEach(() => {
    getCollector().takeStates();
  });

  it("wraps sync functions and returns their result", () => {
    const result = trace("sync", (t) => {
      t.step("one");
      return 42;
    });
    assert.equal(result, 42);
    const values = takeValues();
    assert.equal(values.get("sync/total_duration_avg_s")!.count, 1);
    assert.equal(values.get("sync/one/duration_avg_s")!.count, 1);
  });

  it("wraps async functions and stops when the promise settles", async () => {
    const { value: result } = await onMockedTime(() =>
      trace("async", { trackMemory: false }, async (t) => {
        await sleep(20);
        t.step("wait");
        await sleep(10);
        return "done";
      }),
    );
    assert.equal(result, "done");
    const values = takeValues();
    assert.equal(values.get("async/wait/duration_avg_s")!.value, 0.02);
    assert.equal(
      values.get("async/total_duration_avg_s")!.value,
      0.03,
      "stopped when the promise settled, not when trace() returned",
    );
    assert.equal(values.get("async/wait/duration_avg_s")!.count, 1);
  });

  it("records and rethrows when the function throws or rejects", async () => {
    assert.throws(
      () =>
        trace("throws", () => {
          throw new Error("boom");
        }),
      /boom/,
    );
    await assert.rejects(
      trace("rejects", async () => {
        await sleep(1);
        throw new Error("async boom");
      }),
      /async boom/,
    );
    const values = takeValues();
    assert.equal(values.get("throws/total_duration_avg_s")!.count, 1);
    assert.equal(values.get("rejects/total_duration_avg_s")!.count, 1);
  });

  it("needs a function", () => {
    assert.throws(() => trace("p", {} as never), /needs a function to run as its last argument/);
  });
});

describe("@traced decorator and using", () => {
  beforeEach(() => {
    getCollector().takeStates();
  });

  it("traces every call of a decorated sync or async method, with this intact", async () => {
    class Rewarder {
      scale = 2;
      @traced("my_reward_fn", { trackMemory: false, timer: "cpu" })
      async reward(x: number): Promise<number> {
        await sleep(1);
        return x > 0 ? this.scale : 0;
      }
      @traced()
      double(x: number): number {
        return x * this.scale;
      }
    }
    const r = new Rewarder();
    assert.equal(await r.reward(1), 2);
    assert.equal(await r.reward(-1), 0);
    assert.equal(r.double(4), 8);
    const values = takeValues();
    assert.equal(values.get("my_reward_fn/total_duration_avg_s")!.count, 2);
    assert.equal(values.get("double/total_duration_max_s")!.count, 1);
  });

  it("stops at the end of a using block, also when it throws", () => {
    {
      using t = new Tracer("scoped").start();
      t.step("fwd");
      t.step("bwd");
    }
    assert.throws(() => {
      using t = new Tracer("scoped").start();
      t.step("fwd");
      throw new Error("in block");
    }, /in block/);
    const values = takeValues();
    assert.equal(values.get("scoped/total_duration_avg_s")!.count, 2);
    assert.equal(values.get("scoped/fwd/duration_avg_s")!.count, 2);
    assert.equal(values.get("scoped/bwd/duration_avg_s")!.count, 1);
  });
});

describe("Tracer through the logger", () => {
  it("prints Forge's table: every key of a memory-tracking tracer, reduced", async () => {
    const { getOrCreateMetricLogger } = await import("../../src/controller/metric-logger.js");
    const { captureStdout } = await import("../helpers.js");
    getCollector().takeStates();
    const logger = await getOrCreateMetricLogger({ runDir: (await import("../helpers.js")).tempDir() });
    await logger.initBackends({ console: { loggingMode: "global_reduce" } });
    const clock = handClock();
    try {
      for (let round = 0; round < 2; round++) {
        const t = new Tracer("my_loop", { trackMemory: true, timer: "cpu" });
        t.start();
        for (let i = 0; i < 3; i++) {
          clock.advance(1);
          t.step("my_metric_mm");
        }
        t.stop();
      }
    } finally {
      clock.restore();
    }
    const out = await captureStdout(() => logger.flush(0));
    await logger.shutdown();
    const lines = out.trim().split("\n");
    assert.equal(lines[0], "=== [GlobalReduce] - METRICS STEP 0 ===");
    assert.deepEqual(
      lines.slice(1, -1).map((l) => l.split(":")[0]),
      [
        "my_loop/memory_delta_end_start_avg_gb",
        "my_loop/memory_peak_max_gb",
        "my_loop/my_metric_mm/duration_avg_s",
        "my_loop/my_metric_mm/duration_max_s",
        "my_loop/rss_delta_end_start_avg_gb",
        "my_loop/rss_peak_max_gb",
        "my_loop/total_duration_avg_s",
        "my_loop/total_duration_max_s",
      ],
    );
    const duration = Number(lines.find((l) => l.startsWith("my_loop/my_metric_mm/duration_avg_s"))!.split(":")[1]);
    assert.ok(Math.abs(duration - 0.001) < 1e-6, `step duration ${duration} s, expected 0.001`);
  });
});
