/**
 * Every way a process ends drains the ring: normal end, process.exit, beforeExit, SIGINT, SIGTERM
 * and an uncaught exception. Real child processes, real writer threads; the test counts lines.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, it } from "node:test";
import { tempDir } from "../helpers.js";
import { readStream, ROOT, runChild, STREAM_CHILD } from "./helpers.js";

const N = 5000;
/**
 * What these tests check is that every way of ending drains the ring, not how fast: the default
 * waits (2 s for the writer at exit, 5 s to drain at a signal) are a user's bounds, and on a
 * loaded machine 5,000 lines can outlast them. Their misses are tested in faults.test.ts.
 */
const PATIENT = { RANKSCOPE_STREAM_EXIT_WAIT_MS: "60000", RANKSCOPE_DRAIN_DEADLINE_MS: "60000" };

async function streamThenEnd(mode: string) {
  const file = join(tempDir(), "stream.jsonl");
  const result = await runChild(STREAM_CHILD, [mode, String(N)], { ...PATIENT, RANKSCOPE_STREAM_FILE: file });
  return { result, ...readStream(file) };
}

function assertComplete(
  records: Record<string, unknown>[],
  ends: Record<string, unknown>[],
  count: number,
  reason: string,
): void {
  assert.equal(records.length, count, "every streamed probe is in the file");
  assert.deepEqual(
    records.filter((r) => r["checkpoint"] === "logits").map((r) => r["index"]),
    Array.from({ length: N }, (_, i) => i),
    "in order, none missing or repeated",
  );
  assert.equal(ends.length, 1, "one final line");
  assert.equal(ends[0]?.["stream_end"], reason);
  assert.equal(ends[0]?.["written"], count);
  assert.equal(ends[0]?.["dropped"], 0);
}

describe("stream drains at exit", () => {
  it("when the script simply ends", async () => {
    const { result, records, ends } = await streamThenEnd("normal");
    assert.equal(result.code, 0, result.stderr);
    assertComplete(records, ends, N, "exit");
  });

  it("on process.exit(3), keeping the exit code", async () => {
    const { result, records, ends } = await streamThenEnd("exit");
    assert.equal(result.code, 3, result.stderr);
    assertComplete(records, ends, N, "exit");
  });

  it("at beforeExit, including values streamed by the user's own beforeExit handler", async () => {
    const { result, records, ends } = await streamThenEnd("beforeExit");
    assert.equal(result.code, 0, result.stderr);
    assertComplete(records, ends, 2 * N, "exit");
    assert.equal(records.filter((r) => r["checkpoint"] === "late").length, N);
  });

  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    it(`on ${signal}, and the process still ends by ${signal}`, async () => {
      const file = join(tempDir(), "stream.jsonl");
      let sent = false;
      const result = await runChild(
        STREAM_CHILD,
        ["signal", String(N)],
        { ...PATIENT, RANKSCOPE_STREAM_FILE: file },
        (out, child) => {
          if (!sent && out.includes("ready\n")) {
            sent = true;
            child.kill(signal);
          }
        },
      );
      assert.equal(result.signal, signal, `exited with code ${String(result.code)}: ${result.stderr}`);
      const { records, ends } = readStream(file);
      assertComplete(records, ends, N, signal);
    });
  }

  // The lifecycle's rule (docs/lifecycle.md): a listener of the user's owns the signal, as in Node;
  // nothing is drained at the signal (the user's code may go on streaming), and when their handler
  // ends the process, the exit drain writes the ring.
  it("on SIGINT with the user's own listener: the user's listener decides, the ring is written when it exits", async () => {
    const file = join(tempDir(), "stream.jsonl");
    let sent = false;
    const result = await runChild(
      STREAM_CHILD,
      ["signal-own-handler", String(N)],
      { ...PATIENT, RANKSCOPE_STREAM_FILE: file },
      (out, child) => {
        if (!sent && out.includes("ready\n")) {
          sent = true;
          child.kill("SIGINT");
        }
      },
    );
    assert.equal(result.code, 7, result.stderr);
    assert.match(result.stdout, /handled/);
    const { records, ends } = readStream(file);
    assertComplete(records, ends, N, "exit");
  });

  it("not at all with RANKSCOPE_DISABLE_STREAM=true: no file, no writer, the script unaffected", async () => {
    const file = join(tempDir(), "stream.jsonl");
    const result = await runChild(STREAM_CHILD, ["normal", String(N)], {
      RANKSCOPE_STREAM_FILE: file,
      RANKSCOPE_DISABLE_STREAM: "true",
    });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(existsSync(file), false);
  });

  it("on an uncaught exception, which still ends the process with code 1 and its stack", async () => {
    const { result, records, ends } = await streamThenEnd("uncaught");
    assert.equal(result.code, 1);
    assert.match(result.stderr, /boom in the loop/);
    assertComplete(records, ends, N, "uncaughtException");
  });

  for (const how of ["normal", "exit"]) {
    it(`hands what is in the ring to per_rank_no_reduce backends at ${how === "exit" ? "process.exit()" : "a normal end"}`, async () => {
      const runDir = tempDir();
      const result = await runChild(join(ROOT, "test", "stream", "fixtures", "backend-child.mjs"), ["50", how], {
        CHILD_RUN_DIR: runDir,
      });
      assert.equal(result.code, 0, result.stderr);
      const lines = result.stdout.match(/^\[controller\] \[Exiting\] \S+ \S+ INFO tokens: \d+$/gm) ?? [];
      assert.deepEqual(
        lines.map((l) => Number(l.split(": ")[1])),
        Array.from({ length: 50 }, (_, i) => i),
      );
      const { records, ends } = readStream(join(runDir, "streams", "controller.jsonl"));
      assert.equal(records.length, 50);
      // A normal end without shutdown(): the logger is shut down at beforeExit (with a warning),
      // which stops the stream; process.exit(): the exit drain stops it.
      assert.equal(ends[0]?.["stream_end"], how === "exit" ? "exit" : "stop");
      if (how === "normal") assert.match(result.stderr, /without logger\.shutdown\(\)/);
    });
  }

  const dist = join(ROOT, "dist", "index.js");
  it(
    "from the built package (dist/, plain node): the writer starts from writer.js",
    { skip: !existsSync(dist) && "run npm run build first" },
    () => {
      const dir = tempDir();
      const script = join(dir, "user.mjs");
      writeFileSync(
        script,
        `import { streamValues } from ${JSON.stringify(pathToFileURL(dist).href)};\nfor (let i = 0; i < ${N}; i++) streamValues("logits", new Float32Array([i, 0.5]), i);\n`,
      );
      const file = join(dir, "stream.jsonl");
      const result = spawnSync(process.execPath, [script], {
        env: { ...process.env, RANKSCOPE_STREAM_FILE: file },
        encoding: "utf8",
      });
      assert.equal(result.status, 0, result.stderr);
      const { records, ends } = readStream(file);
      assertComplete(records, ends, N, "exit");
    },
  );
});
