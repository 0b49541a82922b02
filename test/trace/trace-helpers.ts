/** Helpers for the trace tests: golden comparison, a nesting check, and time driven by the test. */
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { mock } from "node:test";
import { fileURLToPath } from "node:url";
import type { TraceEvent } from "../../src/trace/trace-events.js";

const goldenDir = join(dirname(fileURLToPath(import.meta.url)), "golden");

/** Compare text to `golden/{name}`; `UPDATE_GOLDEN=1` rewrites it. */
export function assertGolden(name: string, actual: string): void {
  const path = join(goldenDir, name);
  if (process.env["UPDATE_GOLDEN"] === "1" || !existsSync(path)) {
    if (process.env["UPDATE_GOLDEN"] !== "1")
      assert.fail(`golden file ${name} is missing; run with UPDATE_GOLDEN=1 to create it`);
    writeFileSync(path, actual);
    return;
  }
  assert.equal(
    actual,
    readFileSync(path, "utf8"),
    `output differs from golden/${name} (UPDATE_GOLDEN=1 to accept a deliberate change)`,
  );
}

/** Replace the fields that vary run to run (times, process ids) with placeholders, keeping line structure. */
export function normaliseTraceLine(line: string, fields: readonly string[] = ["ts", "dur", "pid"]): string {
  if (line === "[" || line.trim() === "") return line;
  const comma = line.endsWith(",");
  const event = JSON.parse(comma ? line.slice(0, -1) : line) as Record<string, unknown>;
  for (const f of fields) if (f in event) event[f] = `<${f}>`;
  return JSON.stringify(event) + (comma ? "," : "");
}

/** Every row (pid, tid) of complete events nests properly: a span ends before its parent ends. */
export function assertProperNesting(events: readonly TraceEvent[]): void {
  const rows = new Map<string, TraceEvent[]>();
  for (const e of events) {
    if (e.ph !== "X") continue;
    const key = `${e.pid}/${e.tid}`;
    (rows.get(key) ?? rows.set(key, []).get(key)!).push(e);
  }
  for (const [row, spans] of rows) {
    spans.sort((a, b) => a.ts! - b.ts! || b.dur! - a.dur!);
    const stack: TraceEvent[] = [];
    for (const s of spans) {
      while (stack.length > 0 && stack[stack.length - 1]!.ts! + stack[stack.length - 1]!.dur! <= s.ts!) stack.pop();
      const parent = stack[stack.length - 1];
      if (parent !== undefined) {
        assert.ok(
          s.ts! + s.dur! <= parent.ts! + parent.dur!,
          `row ${row}: "${s.name}" overlaps "${parent.name}" without nesting in it`,
        );
      }
      stack.push(s);
    }
  }
}

/** Whether `inner` lies within `outer` in time. */
export function within(inner: TraceEvent, outer: TraceEvent): boolean {
  return inner.ts! >= outer.ts! && inner.ts! + inner.dur! <= outer.ts! + outer.dur!;
}

/**
 * `performance.now()` — the tracers' clock — moved by hand (node:test's `mock.method`): it starts
 * at the real reading (so epoch timestamps stay plausible) and moves only by `advance(ms)`.
 * `restore()` puts the real one back; call it in a `finally`.
 */
export function handClock(): { advance(ms: number): void; restore(): void } {
  let now = performance.now();
  const mocked = mock.method(performance, "now", () => now);
  return {
    advance: (ms) => {
      now += ms;
    },
    restore: () => mocked.mock.restore(),
  };
}

/**
 * Run `work` on mocked time: node:test's `mock.timers` replaces the global `setTimeout` and `Date`
 * (starting at 0), and `performance.now()` reads the mocked `Date`. Time moves in steps of
 * `stepMs`, each after the pending callbacks have run, until `work` settles — at most `limitMs`
 * of mocked time (then it fails, saying so). Returns `work`'s result and the mocked time it took.
 * (`setTimeout` from `node:timers/promises`, imported before the mock, is not replaced: sleep
 * through the global one.)
 */
export async function onMockedTime<T>(
  work: () => Promise<T>,
  { stepMs = 5, limitMs = 60_000 } = {},
): Promise<{ value: T; elapsedMs: number }> {
  mock.timers.enable({ apis: ["setTimeout", "Date"], now: 0 });
  const clock = mock.method(performance, "now", () => Date.now());
  try {
    let settled = false;
    const running = work().finally(() => {
      settled = true;
    });
    // Swallowed here, rethrown below by `await running`: the loop must not leave it unhandled.
    running.catch(() => undefined);
    while (!settled) {
      await new Promise((resolve) => setImmediate(resolve));
      if (settled) break;
      if (Date.now() >= limitMs) assert.fail(`the work did not finish within ${limitMs} ms of mocked time`);
      mock.timers.tick(stepMs);
    }
    const elapsedMs = Date.now();
    return { value: await running, elapsedMs };
  } finally {
    clock.mock.restore();
    mock.timers.reset();
  }
}
