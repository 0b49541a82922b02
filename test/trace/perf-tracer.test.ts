import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { once } from "node:events";
import { dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { describe, it } from "node:test";
import { PerfTracer } from "../../src/trace/perf-tracer.js";
import { parseRankSelection } from "../../src/trace/rank-selection.js";
import { parseTraceText, readTraceFile } from "../../src/trace/trace-file.js";
import type { TraceEvent } from "../../src/trace/trace-events.js";
import { collectDiagnostics, tempDir } from "../helpers.js";
import { assertGolden, assertProperNesting, normaliseTraceLine, onMockedTime, within } from "./trace-helpers.js";

/** Sleep through the global `setTimeout`, looked up at each call, so `mock.timers` drives it. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function tracerIn(runDir: string, rank = 3, extra: ConstructorParameters<typeof PerfTracer>[0] = {}): PerfTracer {
  return new PerfTracer({
    runDir,
    rank,
    role: "Trainer",
    saveIntervalMs: 60_000,
    ranks: "all",
    enabled: true,
    ...extra,
  });
}

function traceFile(runDir: string, rank = 3): string {
  return join(runDir, "traces", `rank-${rank}.jsonl`);
}

function spans(events: readonly TraceEvent[], name: string): TraceEvent[] {
  return events.filter((e) => e.ph === "X" && e.name === name);
}

describe("perf tracer file", () => {
  it("writes the Chrome trace format (golden)", async () => {
    const runDir = tempDir();
    const t = tracerIn(runDir);
    t.scope("train.step", { category: "compute", args: { step: 1 } }, () => {
      t.scope("forward", { category: "compute" }, () => {});
      t.instant("checkpoint.saved", { path: "ckpt-1" });
    });
    t.counter("queue", { depth: 3, inflight: 1 });
    assert.throws(
      () =>
        t.scope("allreduce", { category: "comm" }, () => {
          throw new Error("rank 2 timed out");
        }),
      /rank 2 timed out/,
    );
    await t.close();
    const text = readFileSync(traceFile(runDir), "utf8");
    assert.ok(text.startsWith("[\n"), "an unterminated JSON array");
    assert.ok(text.endsWith(",\n"), "every event line ends with a comma");
    assertGolden(
      "perf-trace.jsonl",
      text
        .split("\n")
        .map((l) => normaliseTraceLine(l))
        .join("\n"),
    );
    // Viewers read it as JSON once the array is closed, as they do.
    const events = JSON.parse(`${text.trimEnd().slice(0, -1)}]`) as TraceEvent[];
    const step = spans(events, "train.step")[0]!;
    assert.equal(step.pid, 3);
    assert.deepEqual(step.args, { step: 1, rank: 3, role: "Trainer" });
    assert.ok(
      typeof step.ts === "number" && Math.abs(step.ts / 1000 - Date.now()) < 60_000,
      "ts is µs since the epoch",
    );
    assert.deepEqual(spans(events, "allreduce")[0]!.args, { rank: 3, role: "Trainer", error: "rank 2 timed out" });
  });

  it("parses back whole and after being cut mid-line", async () => {
    const runDir = tempDir();
    const t = tracerIn(runDir);
    for (let i = 0; i < 20; i++) t.scope(`s${i}`, undefined, () => i);
    await t.close();
    const text = readFileSync(traceFile(runDir), "utf8");
    const whole = parseTraceText(text);
    assert.equal(whole.truncated, false);
    assert.equal(whole.events.filter((e) => e.ph === "X").length, 20);
    // Cut in the middle of the last event, as a crash during a write would.
    const cut = text.slice(0, text.length - 25);
    writeFileSync(traceFile(runDir), cut);
    const parsed = await readTraceFile(traceFile(runDir));
    assert.equal(parsed.truncated, true);
    assert.equal(parsed.badLines, 0);
    assert.deepEqual(
      parsed.events.filter((e) => e.ph === "X").map((e) => e.name),
      Array.from({ length: 19 }, (_, i) => `s${i}`),
    );
  });

  it("appends to an existing file without a second '['", async () => {
    const runDir = tempDir();
    const a = tracerIn(runDir);
    a.scope("first", undefined, () => {});
    await a.close();
    const b = tracerIn(runDir);
    b.scope("second", undefined, () => {});
    await b.close();
    const text = readFileSync(traceFile(runDir), "utf8");
    assert.equal(text.split("\n").filter((l) => l === "[").length, 1);
    assert.deepEqual(
      parseTraceText(text)
        .events.filter((e) => e.ph === "X")
        .map((e) => e.name),
      ["first", "second"],
    );
  });
});

describe("perf tracer in worker threads", () => {
  it("shares the rank's file with the main thread: one '[', rows of its own", async () => {
    const runDir = tempDir();
    const main = tracerIn(runDir, 5);
    const fixture = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "trace-worker.ts");
    // A worker running TypeScript source: register tsx's loader in the worker, then load the fixture.
    const bootstrap = `import(${JSON.stringify(import.meta.resolve("tsx/esm/api"))}).then((tsx) => { tsx.register(); return import(${JSON.stringify(pathToFileURL(fixture).href)}); });`;
    const worker = new Worker(bootstrap, { eval: true, workerData: { runDir, rank: 5 } });
    await main.scope("main.step", { category: "compute" }, async () => {
      await sleep(5);
    });
    const [message] = (await once(worker, "message")) as [string];
    assert.equal(message, "done");
    await main.close();
    await worker.terminate();
    const text = readFileSync(traceFile(runDir, 5), "utf8");
    assert.equal(text.split("\n").filter((l) => l === "[").length, 1);
    const events = parseTraceText(text).events;
    const workerTids = new Set(events.filter((e) => e.ph === "X" && e.name.startsWith("worker.")).map((e) => e.tid));
    assert.ok(
      [...workerTids].every((tid) => tid >= 1000),
      `worker rows ${[...workerTids]} are apart from the main thread's`,
    );
    assert.equal(spans(events, "main.step")[0]!.tid, 0);
    const names = new Map(events.filter((e) => e.name === "thread_name").map((e) => [e.tid, e.args!["name"]]));
    assert.equal(names.get(0), "main");
    assert.match(String(names.get(Math.min(...workerTids))), /^worker \d+$/);
    assertProperNesting(events);
  });
});

describe("perf tracer spans", () => {
  it("nests sync scopes on one row", async () => {
    const runDir = tempDir();
    const t = tracerIn(runDir);
    t.scope("outer", undefined, () => {
      t.scope("middle", undefined, () => {
        t.scope("inner", undefined, () => {});
      });
      t.scope("sibling", undefined, () => {});
    });
    await t.close();
    const events = parseTraceText(readFileSync(traceFile(runDir), "utf8")).events;
    const [outer, middle, inner, sibling] = ["outer", "middle", "inner", "sibling"].map((n) => spans(events, n)[0]!);
    assert.ok(within(middle!, outer!) && within(inner!, middle!) && within(sibling!, outer!));
    assert.ok(sibling!.ts! >= middle!.ts! + middle!.dur!, "siblings follow each other");
    assert.equal(new Set([outer, middle, inner, sibling].map((e) => e!.tid)).size, 1);
    assertProperNesting(events);
  });

  it("nests async scopes across awaits, and gives concurrent siblings rows of their own", async () => {
    const runDir = tempDir();
    const t = tracerIn(runDir);
    const { value } = await onMockedTime(
      () =>
        t.scope("rollout", { category: "scheduler" }, async () => {
          await sleep(2);
          await t.scope("generate", { category: "compute" }, async () => {
            await sleep(2);
            t.scope("tokenize", undefined, () => {});
          });
          await Promise.all(
            [1, 2].map((i) =>
              t.scope(`reward.${i}`, { category: "io" }, async () => {
                await sleep(3);
                await t.scope(`reward.${i}.call`, undefined, () => sleep(1));
              }),
            ),
          );
          return "ok";
        }),
      { stepMs: 1 },
    );
    assert.equal(value, "ok");
    await t.close();
    const events = parseTraceText(readFileSync(traceFile(runDir), "utf8")).events;
    const get = (n: string): TraceEvent => spans(events, n)[0]!;
    assert.ok(within(get("generate"), get("rollout")));
    assert.ok(within(get("tokenize"), get("generate")));
    assert.equal(get("generate").tid, get("rollout").tid);
    for (const i of [1, 2]) {
      assert.ok(within(get(`reward.${i}`), get("rollout")));
      assert.ok(within(get(`reward.${i}.call`), get(`reward.${i}`)));
      assert.equal(get(`reward.${i}.call`).tid, get(`reward.${i}`).tid);
    }
    assert.notEqual(get("reward.1").tid, get("reward.2").tid, "overlapping siblings do not share a row");
    assertProperNesting(events);
    const threadNames = events
      .filter((e) => e.name === "thread_name")
      .map((e) => e.tid)
      .sort();
    assert.deepEqual(
      threadNames,
      [...new Set(events.filter((e) => e.ph === "X").map((e) => e.tid))].sort(),
      "every row is named",
    );
  });

  it("keeps rows nested when a child is not awaited and outlives its parent", async () => {
    const runDir = tempDir();
    const t = tracerIn(runDir);
    await onMockedTime(
      async () => {
        let orphan: Promise<unknown> | undefined;
        await t.scope("parent", undefined, async () => {
          orphan = t.scope("orphan", undefined, () => sleep(15));
          await sleep(2);
        });
        await t.scope("next", undefined, () => sleep(2));
        await orphan;
      },
      { stepMs: 1 },
    );
    await t.close();
    const events = parseTraceText(readFileSync(traceFile(runDir), "utf8")).events;
    const [orphan, parent, next] = ["orphan", "parent", "next"].map((n) => spans(events, n)[0]!);
    assert.equal(parent!.dur, 2000);
    assert.equal(orphan!.dur, 15_000);
    assert.equal(orphan!.ts, parent!.ts, "the orphan starts with its parent");
    assert.ok(orphan!.ts! + orphan!.dur > parent!.ts! + parent!.dur, "and outlives it");
    assert.notEqual(orphan!.tid, parent!.tid, "so it is written on a row of its own");
    assert.ok(next!.ts! < orphan!.ts! + orphan!.dur, "the next span overlaps the orphan in time");
    assertProperNesting(events);
  });

  it("records an async rejection and rethrows it", async () => {
    const runDir = tempDir();
    const t = tracerIn(runDir);
    await onMockedTime(
      () =>
        assert.rejects(
          t.scope("load", { category: "io" }, async () => {
            await sleep(2);
            throw new TypeError("no such shard");
          }),
          (e: unknown) => e instanceof TypeError && e.message === "no such shard",
        ),
      { stepMs: 1 },
    );
    await t.close();
    const load = spans(parseTraceText(readFileSync(traceFile(runDir), "utf8")).events, "load")[0]!;
    assert.equal(load.args!["error"], "no such shard");
    assert.equal(load.dur, 2000, "the span ends when the promise rejects, 2 ms after it began");
  });

  it("rejects an unknown category and lists the valid ones", () => {
    const t = tracerIn(tempDir());
    assert.throws(
      () => t.scope("x", { category: "gpu" as never }, () => {}),
      /category the string "gpu" is not valid; valid: compute, comm, io, sync, scheduler, instr, misc/,
    );
  });

  it("rejects invalid options, changing nothing", async () => {
    const runDir = tempDir();
    const t = tracerIn(runDir, 0);
    assert.throws(() => t.configure({ ranks: "1", rank: -2 }), /rank must be an integer ≥ 0, got number -2/);
    assert.throws(() => t.configure({ saveIntervalMs: 0 }), /saveIntervalMs must be an integer ≥ 1/);
    assert.throws(() => t.configure({ ranks: "first" }), /valid: "all"/);
    t.scope("still.traced", undefined, () => {});
    await t.close();
    assert.ok(existsSync(traceFile(runDir, 0)), "rank 0 is still selected after the rejected change");
  });

  it("bounds the buffer while the file is unknown, counting drops", async () => {
    const t = new PerfTracer({ ranks: "all", enabled: true, maxBufferedEvents: 5, saveIntervalMs: 60_000 });
    const diagnostics = await collectDiagnostics(() => {
      for (let i = 0; i < 8; i++) t.scope("s", undefined, () => {});
    });
    assert.deepEqual(t.getStats(), { recorded: 8, dropped: 3, written: 0, buffered: 5 });
    assert.equal(diagnostics.filter((d) => d.code === "trace.bufferFull").length, 3);
    // Once told where to write, the buffered events go out.
    const runDir = tempDir();
    t.configure({ runDir, rank: 0, role: "Rollout" });
    await t.close();
    assert.equal(
      parseTraceText(readFileSync(traceFile(runDir, 0), "utf8")).events.filter((e) => e.ph === "X").length,
      5,
    );
  });

  it("writes only the selected ranks", async () => {
    const runDir = tempDir();
    const off = tracerIn(runDir, 1, { ranks: "0,2" });
    const on = tracerIn(runDir, 2, { ranks: "0,2" });
    assert.equal(
      off.scope("x", undefined, () => 7),
      7,
      "an unselected rank still runs the function",
    );
    on.scope("x", undefined, () => 7);
    await off.close();
    await on.close();
    assert.equal(existsSync(traceFile(runDir, 1)), false);
    assert.equal(existsSync(traceFile(runDir, 2)), true);
    assert.deepEqual(off.getStats(), { recorded: 0, dropped: 0, written: 0, buffered: 0 });
  });
});

describe("rank selection", () => {
  it("parses all, lists, ranges and mixes", () => {
    assert.equal(parseRankSelection("all"), "all");
    assert.deepEqual([...(parseRankSelection("0,2") as Set<number>)], [0, 2]);
    assert.deepEqual([...(parseRankSelection("0-3") as Set<number>)], [0, 1, 2, 3]);
    assert.deepEqual([...(parseRankSelection(" 0-1 , 8 ") as Set<number>)], [0, 1, 8]);
    assert.deepEqual([...(parseRankSelection([4, 5]) as Set<number>)], [4, 5]);
  });

  it("says what is valid for bad input", () => {
    assert.throws(
      () => parseRankSelection("zero"),
      /bad part "zero"\); valid: "all", a list like "0,2", a range like "0-3"/,
    );
    assert.throws(() => parseRankSelection("3-1"), /runs backwards/);
    assert.throws(() => parseRankSelection([-1]), /not a rank number/);
  });
});
