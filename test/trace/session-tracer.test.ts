import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { SessionTracer, type SessionRecord } from "../../src/trace/session-tracer.js";
import { collectDiagnostics, tempDir } from "../helpers.js";
import { assertGolden, onMockedTime } from "./trace-helpers.js";

/** Sleep through the global `setTimeout`, looked up at each call, so `mock.timers` drives it. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function sessionsFile(runDir: string, rank = 1): string {
  return join(runDir, "sessions", `rank-${rank}.jsonl`);
}

function readSessions(runDir: string, rank = 1): SessionRecord[] {
  return readFileSync(sessionsFile(runDir, rank), "utf8")
    .trimEnd()
    .split("\n")
    .map((l) => JSON.parse(l) as SessionRecord);
}

describe("SessionTracer", () => {
  it("writes a session's lifecycle with every field (golden)", async () => {
    const runDir = tempDir();
    const tracer = new SessionTracer({ runDir, rank: 1, role: "Rollout", flushThreshold: 10 });
    await onMockedTime(
      async () => {
        const session = tracer.registerSession(tracer.registerTask());
        await tracer.tracePhase(session, "generate", () => sleep(5));
        tracer.tracePhase(session, "reward", () => 1);
        await tracer.tracePhase(session, "generate", () => sleep(5));
        await sleep(2);
        tracer.addCounter(session, "tokens", 512);
        tracer.addCounter(session, "tokens", 128);
        tracer.addCounter(session, "toolcalls");
        tracer.finalize(session, "rejected", "reward below threshold");
      },
      { stepMs: 1 },
    );
    await tracer.close();
    const [record] = readSessions(runDir);
    assert.ok(record);
    assert.equal(record.phases["generate"]!.count, 2);
    assert.equal(record.phases["generate"]!.totalS, 0.01, "two phases of 5 ms");
    assert.equal(record.totalS, 0.012, "submitted to finalized: the phases and 2 ms after them");
    assert.ok(record.finalizeTime >= record.submitTime && Math.abs(record.submitTime - Date.now()) < 60_000);
    for (const span of record.spans)
      assert.ok(span.start >= record.submitTime && span.end <= record.finalizeTime && span.end >= span.start);
    const normalised = JSON.stringify({
      ...record,
      submitTime: "<ms>",
      finalizeTime: "<ms>",
      totalS: "<s>",
      phases: Object.fromEntries(Object.entries(record.phases).map(([k, v]) => [k, { ...v, totalS: "<s>" }])),
      spans: record.spans.map((s) => ({ ...s, start: "<ms>", end: "<ms>" })),
    });
    assertGolden("session.jsonl", `${normalised}\n`);
  });

  it("numbers tasks and sessions in order and writes in batches of the threshold", async () => {
    const runDir = tempDir();
    const tracer = new SessionTracer({ runDir, rank: 1, role: "Rollout", flushThreshold: 3 });
    const tasks = [tracer.registerTask(), tracer.registerTask()];
    assert.deepEqual(tasks, [0, 1]);
    const ids = [
      tracer.registerSession(0),
      tracer.registerSession(1),
      tracer.registerSession(0),
      tracer.registerSession(1),
    ];
    assert.deepEqual(ids, [0, 1, 2, 3]);
    tracer.finalize(0, "accepted");
    tracer.finalize(1, "dropped", "stale weights");
    assert.equal(existsSync(sessionsFile(runDir)), false, "below the threshold nothing is written");
    tracer.finalize(3, "failed", "tool server 500");
    await tracer.save();
    assert.deepEqual(
      readSessions(runDir).map((r) => [r.taskId, r.sessionId, r.status, r.reason]),
      [
        [0, 0, "accepted", null],
        [1, 1, "dropped", "stale weights"],
        [1, 3, "failed", "tool server 500"],
      ],
    );
    assert.equal(tracer.openSessions, 1);
    tracer.finalize(2, "accepted");
    await tracer.close();
    assert.equal(readSessions(runDir).length, 4);
  });

  it("closes a phase when the wrapped code throws, and phases left open at finalize", async () => {
    const runDir = tempDir();
    const tracer = new SessionTracer({ runDir, rank: 1, role: "Rollout", flushThreshold: 1 });
    const s = tracer.registerSession(tracer.registerTask());
    assert.throws(
      () =>
        tracer.tracePhase(s, "toolcall", () => {
          throw new Error("tool crashed");
        }),
      /tool crashed/,
    );
    await assert.rejects(
      tracer.tracePhase(s, "reward", async () => {
        throw new Error("reward model down");
      }),
      /reward model down/,
    );
    tracer.startPhase(s, "generate");
    tracer.finalize(s, "failed", "reward model down");
    await tracer.close();
    const [record] = readSessions(runDir);
    assert.deepEqual(
      record!.spans.map((x) => x.phase),
      ["toolcall", "reward", "generate"],
    );
  });

  it("holds sessions until the run is known, bounded, counting drops", async () => {
    const tracer = new SessionTracer({ flushThreshold: 1, maxBufferedSessions: 2 });
    const diagnostics = await collectDiagnostics(() => {
      const task = tracer.registerTask();
      for (let i = 0; i < 3; i++) tracer.finalize(tracer.registerSession(task), "dropped", "no run yet");
    });
    assert.equal(tracer.dropped, 1);
    assert.equal(diagnostics.filter((d) => d.code === "sessions.bufferFull").length, 1);
    await tracer.close();
  });

  it("says what was wrong on misuse", async () => {
    const tracer = new SessionTracer({ runDir: tempDir(), rank: 1 });
    assert.throws(() => tracer.registerSession(0), /no such task; register it with registerTask\(\) first/);
    const s = tracer.registerSession(tracer.registerTask());
    assert.throws(() => tracer.endPhase(s, "generate"), /the phase is not open; call startPhase first/);
    tracer.startPhase(s, "generate");
    assert.throws(() => tracer.startPhase(s, "generate"), /already open/);
    assert.throws(
      () => tracer.finalize(s, "ok" as never),
      /status the string "ok" is not valid; valid: accepted, rejected, failed, dropped/,
    );
    tracer.finalize(s, "accepted");
    assert.throws(
      () => tracer.finalize(s, "accepted"),
      /no open session number 0 \(never registered, or already finalized\)/,
    );
    assert.throws(() => new SessionTracer({ flushThreshold: 0 }), /flushThreshold must be an integer ≥ 1/);
    // Closed here, not at the process's exit (its folder is removed by then).
    await tracer.close();
  });
});
