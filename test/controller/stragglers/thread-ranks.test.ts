/**
 * Straggler attribution with real ranks (worker threads started by `spawnRanks`), each tracing its
 * step with a Tracer; slowness is a rank "sleeping" longer at the steps the test chooses, so the
 * assertions are about names, not timings (docs/stragglers.md).
 *
 * The ranks' clock is virtual (fixtures/virtual-clock.mjs): in each rank's thread `performance.now()`,
 * which the Tracer reads, moves only by the plan's sleeps and barriers, so every step, phase and
 * barrier wait measures exactly the plan, however loaded the machine (with real sleeps a starved CPU
 * stretched the median 50 ms step so far that 700 ms more fell under the bar). The one
 * measure still in real time is lateness (when a rank's flush answer arrives, timed by the
 * controller); the bar to be named (`minExcessMs`) is twice the flush deadline (5 s), which no
 * answer can be later than, so lateness can name nobody here and the step times and waits name
 * exactly the planned ranks. Lateness itself is judged in analysis.test.ts.
 */
import assert from "node:assert/strict";
import { hostname } from "node:os";
import { afterEach, describe, it } from "node:test";
import { getOrCreateMetricLogger, spawnRanks, type FlushResult, type StragglerReport } from "../../../src/index.js";
import { rankTiming } from "../../../src/store/reader.js";
import { tempDir } from "../../helpers.js";
import type { StepPlan } from "./fixtures/straggler-rank.js";

const RANK_MODULE = new URL("./fixtures/straggler-rank.ts", import.meta.url);

/**
 * Virtual ms (they cost no real time): a step computes 1 s, a slowed rank 20 s more; the bar to be
 * named is 10 s, far above the flush deadline's 5 s of lateness (see the top).
 */
const BASE_MS = 1000;
const SLOW_MS = 20_000;
const STRAGGLERS = { tolerance: 0.5, minExcessMs: 10_000 };

/** Every rank named slow at any flush, by name. */
function namedEver(reports: readonly StragglerReport[]): Set<string> {
  return new Set(reports.flatMap((r) => r.slowest.map((s) => s.rankName)));
}

describe("straggler attribution with real thread ranks", () => {
  afterEach(async () => {
    await (await getOrCreateMetricLogger()).shutdown();
  });

  it("names a chronic and a transient straggler among 8 ranks, with their host, and nobody else", async () => {
    const runDir = tempDir("rankscope-stragglers-");
    // Alerts on with the built-in rules (no webhook): the straggler rule reads the same report.
    const logger = await getOrCreateMetricLogger({ runDir, quiet: true, stragglers: STRAGGLERS, alerts: {} });
    await logger.initBackends({ store: { loggingMode: "global_reduce" } });
    const group = await spawnRanks({
      module: RANK_MODULE,
      ranksPerReplica: 8,
      kind: "thread",
      processName: "Trainer",
      logger,
    });
    const chronic = 5;
    const transient = 2;
    // A third of the steps, spread out: at most 4 of any window of 10, under the half that makes a rank chronic.
    const transientSteps = new Set([1, 4, 7, 10]);
    const reports: StragglerReport[] = [];
    const results: FlushResult[] = [];
    // Two steps past a full window of 10: the chronic rank is then slow at every flush of its window.
    const steps = 12;
    for (let step = 0; step < steps; step++) {
      const plan: StepPlan = {
        baseMs: BASE_MS,
        slowMs: SLOW_MS,
        slow: transientSteps.has(step) ? [chronic, transient] : [chronic],
      };
      await group.fanout("trainStep", step, plan);
      const result = await logger.flush(step);
      results.push(result);
      assert.ok(result.stragglers !== undefined, `flush(${step}) has a straggler report`);
      reports.push(result.stragglers);
    }
    const names = group.rankNames;
    const chronicName = names[chronic] ?? "";
    const transientName = names[transient] ?? "";

    assert.deepEqual(
      [...namedEver(reports)].sort(),
      [chronicName, transientName].sort(),
      "only the two slowed ranks are ever named",
    );
    for (const report of reports) {
      assert.equal(report.ranks, 8);
      assert.equal(report.tracer, "train_step");
      assert.ok(
        report.slowest.some((s) => s.rankName === chronicName && s.by.includes("step")),
        `the chronic rank is named at step ${report.step}`,
      );
      assert.equal(
        report.slowest.some((s) => s.rankName === transientName),
        transientSteps.has(report.step),
        `the transient rank is named exactly at its slow steps (step ${report.step})`,
      );
      for (const s of report.slowest) {
        assert.equal(s.host, hostname(), "a named rank comes with its host");
        assert.equal(s.rank, names.indexOf(s.rankName));
        assert.equal(s.phase?.name, "compute", "the phase that made it slow");
      }
    }
    // Chronic from the fifth slow flush of the window of 10 (half of it); the transient one never.
    const last = reports[reports.length - 1];
    assert.deepEqual(
      last?.chronic.map((c) => [c.rankName, c.host, c.slowFlushes, c.window]),
      [[chronicName, hostname(), 10, 10]],
    );
    assert.deepEqual(
      reports.map((r) => r.chronic.length > 0),
      reports.map((r) => r.step >= 4),
    );
    assert.ok(
      reports.every((r) => r.chronic.every((c) => c.rankName === chronicName)),
      "the transient straggler is never chronic",
    );
    // The alerts' straggler rule fires once, for the chronic rank, at the flush it became chronic; never for the transient one.
    const stragglerAlerts = results.flatMap((r) => r.alerts ?? []).filter((a) => a.rule === "straggler");
    assert.deepEqual(
      stragglerAlerts.map((a) => [a.state, a.rank, a.rankName, a.host, a.step]),
      [["firing", chronic, chronicName, hostname(), 4]],
    );
    // Internal keys name the rank with its host.
    const keys = new Set(results[steps - 1]?.metrics.map((m) => m.key));
    assert.ok(keys.has(`rankscope/stragglers/chronic/${chronicName}@${hostname()}`));
    assert.ok(keys.has(`rankscope/stragglers/step_ms/${chronicName}@${hostname()}`));
    assert.ok(keys.has("rankscope/stragglers/skew"));
    await group.stop();

    // The store keeps every rank's figures and each flush's report, for the Ranks view.
    await logger.shutdown();
    const stored = rankTiming(runDir);
    assert.deepEqual(
      stored.ranks.map((r) => [r.rank, r.rankName, r.host]),
      names.map((name, i) => [i, name, hostname()]),
    );
    assert.deepEqual(
      stored.steps,
      Array.from({ length: steps }, (_, i) => i),
    );
    assert.ok(stored.stepMs.every(Number.isFinite), "a step time for every rank at every flush");
    assert.deepEqual(
      stored.reports.map((r) => r.slowest.map((s) => s.rankName).sort()),
      reports.map((r) => r.slowest.map((s) => s.rankName).sort()),
    );
    assert.deepEqual(
      stored.reports[steps - 1]?.chronic.map((c) => c.rankName),
      [chronicName],
    );
  });

  it("names the rank the others waited for at a marked barrier, where every step takes as long", async () => {
    const logger = await getOrCreateMetricLogger({
      runDir: tempDir("rankscope-stragglers-"),
      quiet: true,
      stragglers: STRAGGLERS,
    });
    await logger.initBackends({ store: { loggingMode: "global_reduce" } });
    const group = await spawnRanks({
      module: RANK_MODULE,
      ranksPerReplica: 4,
      kind: "thread",
      processName: "Reducer",
      logger,
    });
    const slow = 1;
    const reports: StragglerReport[] = [];
    const barrier = { channel: `stragglers-${logger.runId}`, world: 4 };
    await group.fanout("openBarrier", barrier);
    // A first step nobody is slowed at, and not judged.
    await group.fanout("trainStep", 0, { baseMs: BASE_MS, slowMs: 0, slow: [], barrier } satisfies StepPlan);
    await logger.flush(0);
    for (let step = 1; step <= 6; step++) {
      const plan: StepPlan = { baseMs: BASE_MS, slowMs: SLOW_MS, slow: [slow], barrier };
      await group.fanout("trainStep", step, plan);
      const result = await logger.flush(step);
      if (result.stragglers !== undefined) reports.push(result.stragglers);
    }
    await group.fanout("closeBarrier");
    const slowName = group.rankNames[slow] ?? "";
    assert.equal(reports.length, 6);
    for (const report of reports) {
      assert.deepEqual(
        report.slowest.map((s) => s.rankName),
        [slowName],
        `only the rank the others waited for is named (flush ${report.step})`,
      );
      const named = report.slowest[0];
      assert.ok(named?.by.includes("wait"), "named from the others' wait");
      assert.ok(!named?.by.includes("step"), "not from its step time: the barrier made every step as long");
      assert.ok((named?.causedWaitMs ?? 0) > 0);
      assert.equal(named?.host, hostname());
    }
    await group.stop();
  });
});
