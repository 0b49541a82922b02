import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";
import { mergeTraces } from "../../src/trace/merge.js";
import { PerfTracer } from "../../src/trace/perf-tracer.js";
import type { TraceEvent } from "../../src/trace/trace-events.js";
import { tempDir, TS_LOADER } from "../helpers.js";
import { assertGolden, assertProperNesting } from "./trace-helpers.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** A run whose ranks' clocks start at different epoch times (as a real multi-process run's do). */
function handWrittenRun(): string {
  const runDir = tempDir();
  mkdirSync(join(runDir, "traces"));
  const line = (e: TraceEvent): string => `${JSON.stringify(e)},\n`;
  const meta = (rank: number, role: string): string =>
    line({ name: "process_name", ph: "M", pid: rank, tid: 0, args: { name: `[${role}] Rank ${rank}` } }) +
    line({ name: "process_sort_index", ph: "M", pid: rank, tid: 0, args: { sort_index: rank } }) +
    line({ name: "thread_name", ph: "M", pid: rank, tid: 0, args: { name: "main" } });
  const base = 1_763_776_115_000_000;
  writeFileSync(
    join(runDir, "traces", "rank-0.jsonl"),
    "[\n" +
      meta(0, "Trainer") +
      line({ name: "forward", cat: "compute", ph: "X", ts: base + 150, dur: 40, pid: 0, tid: 0, args: { rank: 0 } }) +
      line({ name: "step", cat: "compute", ph: "X", ts: base + 100, dur: 200, pid: 0, tid: 0, args: { rank: 0 } }) +
      line({ name: "loss", ph: "C", ts: base + 300, pid: 0, tid: 0, args: { value: 1.5 } }),
  );
  writeFileSync(
    join(runDir, "traces", "rank-1.jsonl"),
    "[\n" +
      meta(1, "Trainer") +
      line({ name: "step", cat: "compute", ph: "X", ts: base + 20, dur: 250, pid: 1, tid: 0, args: { rank: 1 } }) +
      line({ name: "allreduce", cat: "comm", ph: "X", ts: base + 200, dur: 60, pid: 1, tid: 0, args: { rank: 1 } }) +
      // A crash cut this line short.
      '{"name":"optimizer","cat":"compute","ph":"X","ts":',
  );
  writeFileSync(
    join(runDir, "traces", "rank-10.jsonl"),
    "[\n" +
      meta(10, "Rollout") +
      line({ name: "generate", cat: "compute", ph: "i", s: "t", ts: base + 120, pid: 10, tid: 0, args: {} }),
  );
  writeFileSync(join(runDir, "traces", "notes.txt"), "not a trace");
  return runDir;
}

describe("traces merge", () => {
  it("aligns ranks to a common origin and sorts (golden)", async () => {
    const runDir = handWrittenRun();
    const progress: number[] = [];
    const result = await mergeTraces(runDir, { onProgress: (done, total) => progress.push(done / total) });
    assert.equal(result.files, 3);
    assert.equal(result.events, 15);
    assert.equal(result.originUs, 1_763_776_115_000_020);
    assert.deepEqual(result.truncatedFiles, [join(runDir, "traces", "rank-1.jsonl")]);
    assert.equal(progress.at(-1), 1);
    assert.ok(
      progress.every((p, i) => i === 0 || p >= progress[i - 1]!),
      "progress only moves forward",
    );
    const text = readFileSync(result.out, "utf8");
    assertGolden("merged-trace.json", text);
    const merged = JSON.parse(text) as { traceEvents: TraceEvent[]; otherData: { ranks: number[] } };
    assert.deepEqual(merged.otherData.ranks, [0, 1, 10]);
    const timed = merged.traceEvents.filter((e) => e.ph !== "M");
    assert.equal(timed[0]!.ts, 0, "the earliest event is the origin");
    assert.ok(
      timed.every((e, i) => i === 0 || e.ts! >= timed[i - 1]!.ts!),
      "sorted by time",
    );
    assert.ok(
      merged.traceEvents.slice(0, 9).every((e) => e.ph === "M"),
      "metadata first",
    );
    assertProperNesting(merged.traceEvents);
  });

  it("merges what the perf tracer wrote, keeping nesting", async () => {
    const runDir = tempDir();
    for (const rank of [0, 1]) {
      const t = new PerfTracer({ runDir, rank, role: "Trainer", enabled: true, ranks: "all", saveIntervalMs: 60_000 });
      await t.scope("step", { category: "compute" }, async () => {
        t.scope("forward", { category: "compute" }, () => {});
        await Promise.all([
          t.scope("a", undefined, () => new Promise((r) => setTimeout(r, 2))),
          t.scope("b", undefined, () => new Promise((r) => setTimeout(r, 2))),
        ]);
      });
      await t.close();
    }
    const result = await mergeTraces(runDir, { out: join(runDir, "all.json") });
    const merged = JSON.parse(readFileSync(join(runDir, "all.json"), "utf8")) as { traceEvents: TraceEvent[] };
    assert.equal(result.events, merged.traceEvents.length);
    assert.equal(merged.traceEvents.filter((e) => e.name === "step").length, 2);
    assertProperNesting(merged.traceEvents);
  });

  it("runs as `rankscope traces merge RUN` with a progress bar on stderr", () => {
    const runDir = handWrittenRun();
    const cli = spawnSync(
      process.execPath,
      ["--import", TS_LOADER, join(root, "src", "cli", "main.ts"), "traces", "merge", runDir, "--progress"],
      { encoding: "utf8", cwd: root },
    );
    assert.equal(cli.status, 0, cli.stderr);
    assert.match(cli.stdout, /merged 15 events from 3 rank file\(s\) into .*trace\.json/);
    assert.match(cli.stderr, /merging traces \[#+\] 100%/);
    assert.match(cli.stderr, /rank-1\.jsonl ends in a cut-off line \(a crash\?\); merged up to its last full event/);
    JSON.parse(readFileSync(join(runDir, "traces", "trace.json"), "utf8"));
  });

  it("takes experiment/trial under --root, like tail and export", () => {
    const runs = tempDir();
    mkdirSync(join(runs, "exp"));
    renameSync(handWrittenRun(), join(runs, "exp", "t1"));
    const cli = spawnSync(
      process.execPath,
      ["--import", TS_LOADER, join(root, "src", "cli", "main.ts"), "traces", "merge", "exp/t1", "--root", runs],
      { encoding: "utf8", cwd: root },
    );
    assert.equal(cli.status, 0, cli.stderr);
    assert.match(cli.stdout, /merged 15 events from 3 rank file\(s\) into .*exp.t1.traces.trace\.json/);
    const missing = spawnSync(
      process.execPath,
      ["--import", TS_LOADER, join(root, "src", "cli", "main.ts"), "traces", "merge", "exp/t2", "--root", runs],
      { encoding: "utf8", cwd: root },
    );
    assert.equal(missing.status, 1);
    assert.match(missing.stderr, /no run "exp\/t2": none of .*exp.t2.traces exists/);
  });

  it("says what is missing for a directory without traces", () => {
    const runDir = tempDir();
    const cli = spawnSync(
      process.execPath,
      ["--import", TS_LOADER, join(root, "src", "cli", "main.ts"), "traces", "merge", runDir],
      { encoding: "utf8", cwd: root },
    );
    assert.equal(cli.status, 1);
    assert.match(cli.stderr, /no traces folder in .*: expected per-rank files traces\/rank-\{r\}\.jsonl/);
  });
});
