/**
 * The process lifecycle (src/core/lifecycle.ts, docs/lifecycle.md) with real processes and real
 * signals: a controller with store + jsonl + tensorboard + stream + traces (+ 2 child ranks) is
 * ended by SIGTERM, SIGINT, an uncaught exception, or by forgetting shutdown(); every step it
 * flushed before that must be in every sink, it must die the way it would have, and no child rank
 * may be left behind.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, describe, it } from "node:test";
import { closeStores, openStore } from "../../../src/backends/store/index.js";
import { workerExecArgv } from "../../../src/core/module-worker.js";
import { runNode, tempDir, waitFor, type ChildResult } from "../../helpers.js";
import { eventFiles, readEvents, scalarPoints } from "../../backends/tensorboard/tfevents-reader.js";
import { readStream, ROOT } from "../../stream/helpers.js";
import { isAlive, NatsServer, TEST_RUN_SECRET } from "../../transport/support.js";

/** The controller job: the built package with plain node, its ranks too (`npm test` builds first). */
const CONTROLLER = join(ROOT, "test", "core", "lifecycle", "fixtures", "controller.mjs");
if (!existsSync(join(ROOT, "dist", "index.js")))
  throw new Error("dist/ is missing: run `npm run build` first (npm test does)");
const DRAINS = join(ROOT, "test", "core", "lifecycle", "fixtures", "drains.ts");
/** The drain deadline the children run with (the process must be gone within it, plus start-up slack). */
const DRAIN_DEADLINE_MS = 8000;

/** Longest a job may run, whatever it does: past it, it is killed (SIGKILL) and the test fails. */
const JOB_DEADLINE_MS = 90_000;

/** Run a job (see `runNode`) that is killed after JOB_DEADLINE_MS, which the assertions on `signal` then report. */
function runJob(
  args: string[],
  env: Record<string, string>,
  onStdout?: (text: string, child: ChildProcess) => void,
  raw = false,
): Promise<ChildResult> {
  return runNode(args, env, { ...(onStdout === undefined ? {} : { onStdout }), raw, deadlineMs: JOB_DEADLINE_MS });
}

const dirs: string[] = [];
function runDirFor(): string {
  const dir = tempDir("rankscope-lifecycle-");
  dirs.push(dir);
  return dir;
}
after(() => {
  closeStores();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

interface Run {
  result: ChildResult;
  runDir: string;
  /** Steps whose flush had returned (printed) when the process was told to end. */
  flushed: number[];
  /** The child ranks' pids. */
  pids: number[];
  /** From the signal to the process's end (ms). */
  endedInMs: number;
}

/**
 * Run the controller fixture; with `signal`, send it after `flushed <afterStep>`. The stream may
 * wait at exit as long as the drain deadline (its writer thread may still be starting on a loaded
 * machine; the stream's own bound is tested in test/stream).
 */
async function runController(
  args: string[],
  signal?: NodeJS.Signals,
  afterStep = 20,
  env: Record<string, string> = {},
): Promise<Run> {
  const runDir = runDirFor();
  let flushedAtSignal: number[] | null = null;
  let signalledAt = 0;
  const result = await runJob(
    [CONTROLLER, ...args],
    {
      CHILD_RUN_DIR: runDir,
      RANKSCOPE_DRAIN_DEADLINE_MS: String(DRAIN_DEADLINE_MS),
      RANKSCOPE_STREAM_EXIT_WAIT_MS: String(DRAIN_DEADLINE_MS),
      ...env,
    },
    (out, child) => {
      if (signal !== undefined && flushedAtSignal === null && out.includes(`flushed ${afterStep}\n`)) {
        flushedAtSignal = flushedSteps(out);
        signalledAt = Date.now();
        child.kill(signal);
      }
    },
    true,
  );
  const endedInMs = signalledAt === 0 ? 0 : Date.now() - signalledAt;
  const pids = (/^pids (.*)$/m.exec(result.stdout)?.[1] ?? "")
    .split(" ")
    .filter((p) => p !== "")
    .map(Number);
  return { result, runDir, flushed: flushedAtSignal ?? flushedSteps(result.stdout), pids, endedInMs };
}

function flushedSteps(out: string): number[] {
  return [...out.matchAll(/^flushed (\d+)$/gm)].map((m) => Number(m[1]));
}

function describeRun(run: Run): string {
  return `code ${String(run.result.code)} signal ${String(run.result.signal)}\nstdout tail: ${run.result.stdout.slice(-400)}\nstderr: ${run.result.stderr.slice(-3000)}`;
}

/** Every flushed step is in the store, the JSONL file and the tfevents file. */
function assertInEverySink(run: Run, key = "loss"): void {
  const { runDir, flushed } = run;
  assert.ok(flushed.length > 0, "the job flushed nothing before it ended");
  const stored = new Set(
    openStore(runDir)
      .series(key, { maxPoints: Infinity })
      .points.map((p) => p.step),
  );
  const jsonl = new Set(
    readFileSync(join(runDir, "metrics.jsonl"), "utf8")
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l) as { key: string; step: number })
      .filter((l) => l.key === key)
      .map((l) => l.step),
  );
  const tb = new Set(
    eventFiles(join(runDir, "tensorboard"))
      .flatMap((f) => scalarPoints(readEvents(f)))
      .filter((p) => p.tag === key)
      .map((p) => p.step),
  );
  for (const step of flushed) {
    assert.ok(
      stored.has(step),
      `step ${step} of ${key} is missing from metrics.db (it has ${stored.size} steps, up to ${Math.max(...stored)}); ${describeRun(run)}`,
    );
    assert.ok(jsonl.has(step), `step ${step} of ${key} is missing from metrics.jsonl`);
    assert.ok(tb.has(step), `step ${step} of ${key} is missing from the tfevents file`);
  }
}

/** The stream, trace and session files hold at least one record per flushed step. */
function assertFaceFiles(run: Run, streamEnd: string): void {
  const { runDir, flushed } = run;
  const { records, ends } = readStream(join(runDir, "streams", "controller.jsonl"));
  // The stream's bound: nothing pushed before the signal is lost unless counted in the final line.
  const end = ends[0] as { stream_end: string; written: number; dropped: number } | undefined;
  assert.equal(end?.stream_end, streamEnd, `the stream's final line: ${JSON.stringify(ends)}`);
  assert.ok(
    records.length + (end?.dropped ?? 0) >= flushed.length,
    `stream: ${records.length} records + ${end?.dropped ?? 0} dropped < ${flushed.length} steps`,
  );
  assert.equal(end?.dropped, 0, "the stream dropped records although its ring never filled");
  // The controller's own trace and session files are `controller.jsonl` (ranks write rank-{r}.jsonl).
  const traces = readFileSync(join(runDir, "traces", "controller.jsonl"), "utf8");
  const spans = traces.match(/"name":"step"/g)?.length ?? 0;
  assert.ok(spans >= flushed.length, `traces: ${spans} step spans < ${flushed.length} flushed steps`);
  const sessions = readFileSync(join(runDir, "sessions", "controller.jsonl"), "utf8")
    .split("\n")
    .filter((l) => l !== "").length;
  assert.ok(sessions >= flushed.length, `sessions: ${sessions} lines < ${flushed.length} flushed steps`);
}

async function assertChildrenGone(run: Run): Promise<void> {
  assert.equal(run.pids.length, 2, `the job did not report its two ranks' pids: ${describeRun(run)}`);
  await waitFor(() => run.pids.every((pid) => !isAlive(pid)), {
    timeoutMs: 10_000,
    what: `child ranks ${run.pids.join(", ")} to be gone`,
  });
}

function runStatus(runDir: string): string {
  return openStore(runDir).runInfo().status;
}

/** `process.on(...)`-style listeners in src on lifecycle events or signals, and `globalThis[...]` slots, outside their one owner. */
function ownersBypassed(): string[] {
  const src = join(ROOT, "src");
  const found: string[] = [];
  const listener = /process\.(?:on|once|addListener|prependListener|prependOnceListener)\(\s*"([^"]+)"/g;
  for (const file of readdirSync(src, { recursive: true, encoding: "utf8" })) {
    if (!file.endsWith(".ts")) continue;
    const text = readFileSync(join(src, file), "utf8");
    for (const match of text.matchAll(listener)) {
      const event = match[1] as string;
      // IPC traffic is not the lifecycle: a rank's messages and its channel closing (docs/lifecycle.md).
      if (event === "message" || event === "disconnect") continue;
      if (file !== join("core", "lifecycle.ts")) found.push(`src/${file}: process listener on "${event}"`);
    }
    if (/globalThis\[/.test(text) && file !== join("core", "process-wide.ts"))
      found.push(`src/${file}: a globalThis[...] slot`);
  }
  return found;
}

describe("the lifecycle's rules", () => {
  it("only src/core/lifecycle.ts listens to the process's signals and exit events; only processWide keeps globalThis slots", () => {
    assert.deepEqual(ownersBypassed(), []);
  });

  it("a drain that misses the deadline is named; the others finish; the sync parts run; the process dies by the signal", async () => {
    let sent = false;
    const result = await runJob([DRAINS, "stuck"], { RANKSCOPE_DRAIN_DEADLINE_MS: "500" }, (out, child) => {
      if (!sent && out.includes("ready\n")) {
        sent = true;
        child.kill("SIGTERM");
      }
    });
    assert.equal(result.signal, "SIGTERM", `code ${String(result.code)}: ${result.stderr}`);
    assert.match(result.stderr, /SIGTERM: 1 drain\(s\) did not finish within the 500 ms drain deadline: stuck part/);
    assert.match(result.stdout, /drained quick part SIGTERM/);
    // The sync parts run once each, producers first.
    assert.deepEqual(result.stdout.match(/^exit .*$/gm), ["exit quick part SIGTERM", "exit stuck part SIGTERM"]);
  });

  it("with a SIGINT listener of the user's, the user decides: nothing is drained at the signal, the exit parts run when the user exits", async () => {
    let sent = false;
    const result = await runJob([DRAINS, "own-sigint"], {}, (out, child) => {
      if (!sent && out.includes("ready\n")) {
        sent = true;
        child.kill("SIGINT");
      }
    });
    assert.equal(result.code, 5, result.stderr);
    assert.match(result.stdout, /user handler 1/);
    assert.doesNotMatch(result.stdout, /drained/);
    assert.deepEqual(result.stdout.match(/^exit .*$/gm), ["exit quick part exit", "exit stuck part exit"]);
  });
});

// The cases of a describe below share nothing (each its own job, run directory and, for NATS, server):
// they run at once.
describe("a controller with every sink and two child ranks", { concurrency: true }, () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`on ${signal}: every flushed step reaches every sink, the process dies by ${signal} within the drain deadline, no rank is left`, async () => {
      const run = await runController(["wait", "ranks"], signal);
      assert.equal(run.result.signal, signal, describeRun(run));
      assert.ok(run.endedInMs < DRAIN_DEADLINE_MS + 2000, `ended ${run.endedInMs} ms after the signal`);
      assertInEverySink(run);
      assertInEverySink(run, "rank_value");
      assertFaceFiles(run, signal);
      assert.equal(runStatus(run.runDir), "crashed");
      await assertChildrenGone(run);
    });
  }

  it("on an uncaught exception: every flushed step reaches every sink, exit code 1 with the stack, the run is crashed, no rank is left", async () => {
    const run = await runController(["uncaught", "ranks"]);
    assert.equal(run.result.code, 1, describeRun(run));
    assert.match(run.result.stderr, /boom after the last flush/);
    assert.deepEqual(
      run.flushed,
      Array.from({ length: 20 }, (_, i) => i),
    );
    assertInEverySink(run);
    assertFaceFiles(run, "uncaughtException");
    assert.equal(runStatus(run.runDir), "crashed");
    await assertChildrenGone(run);
  });
});

describe("issue 12 case 2: the store's queued batches at SIGTERM", () => {
  it("SIGTERM right after a burst of flushes: metrics.db has the contiguous tail, the run is marked crashed", async () => {
    // Without ranks, flushes are ~5 ms apart and the store commits every 200 ms: at the signal,
    // tens of batches wait in the writer's queue (the old exit lost exactly those).
    const run = await runController(["wait", "noranks"], "SIGTERM", 60);
    assert.equal(run.result.signal, "SIGTERM", describeRun(run));
    assertInEverySink(run);
    assert.equal(runStatus(run.runDir), "crashed");
  });
});

describe("issue 12 case 3: a perf tracer and a stream, in either install order", { concurrency: true }, () => {
  for (const order of ["tracer-first", "stream-first"]) {
    it(`${order}: the first Ctrl-C (SIGINT) ends the process, with both files complete`, async () => {
      const run = await runController(["wait", "noranks", order], "SIGINT", 5);
      assert.equal(run.result.signal, "SIGINT", `one SIGINT did not end the process: ${describeRun(run)}`);
      assertFaceFiles(run, "SIGINT");
    });
  }
});

describe("issue 12 case 6: a job that forgets shutdown()", { concurrency: true }, () => {
  it("with two child ranks: ends by itself with a warning, the values after the last flush are logged, the run is finished, no rank is left", async () => {
    const run = await runController(["forget", "ranks"]);
    assert.equal(run.result.code, 0, describeRun(run));
    assert.match(run.result.stdout, /forgetting shutdown/);
    assert.match(run.result.stderr, /without logger\.shutdown\(\)/);
    assertInEverySink(run);
    const late = openStore(run.runDir)
      .series("loss", { maxPoints: Infinity })
      .points.find((p) => p.step === 20);
    assert.equal(late?.value, 1000, "the value recorded after the last flush is not in the store at the final step");
    const rankLate = openStore(run.runDir)
      .series("rank_value", { maxPoints: Infinity })
      .points.find((p) => p.step === 20);
    assert.equal(rankLate?.value, 2000, "the ranks' values recorded after the last flush are not in the store");
    assert.equal(runStatus(run.runDir), "finished");
    await assertChildrenGone(run);
  });

  it("with two thread ranks: ends by itself with a warning, the ranks' late values are logged, the run is finished", async () => {
    const run = await runController(["forget", "threads"]);
    assert.equal(run.result.code, 0, describeRun(run));
    assert.match(run.result.stderr, /without logger\.shutdown\(\)/);
    const rankLate = openStore(run.runDir)
      .series("rank_value", { maxPoints: Infinity })
      .points.find((p) => p.step === 20);
    assert.equal(rankLate?.value, 2000);
    assert.equal(runStatus(run.runDir), "finished");
  });

  it("with two ranks over NATS: the idle NATS connection does not keep it alive; it ends with a warning, the ranks are told to stop, the run is finished", async () => {
    const server = await NatsServer.start();
    try {
      const runId = `lifecycle${process.pid}`;
      const env = { RANKSCOPE_NATS_URL: server.url, RANKSCOPE_RUN_ID: runId, RANKSCOPE_RUN_SECRET: TEST_RUN_SECRET };
      const ranks = [0, 1].map((rank) =>
        runJob([join(ROOT, "test", "fixtures", "external-rank.ts")], {
          ...env,
          RANK: String(rank),
          LOCAL_RANK: String(rank),
          EXTERNAL_VALUE: "7",
          RANKSCOPE_PROCESS_NAME: "Worker",
        }),
      );
      const run = await runController(["forget", "nats"], undefined, 20, { ...env, NATS_RANKS: "2" });
      assert.equal(run.result.code, 0, describeRun(run));
      assert.equal(run.result.signal, null, describeRun(run));
      assert.match(run.result.stdout, /nats ranks 2/);
      assert.match(run.result.stdout, /forgetting shutdown/);
      assert.match(run.result.stderr, /without logger\.shutdown\(\)/);
      assertInEverySink(run);
      const late = openStore(run.runDir)
        .series("loss", { maxPoints: Infinity })
        .points.find((p) => p.step === 20);
      assert.equal(late?.value, 1000, "the value recorded after the last flush is not in the store at the final step");
      const fromRanks = openStore(run.runDir).series("external/value", { maxPoints: Infinity }).points;
      assert.equal(
        fromRanks.reduce((sum, p) => sum + p.value, 0),
        14,
        `both NATS ranks' values: ${JSON.stringify(fromRanks)}`,
      );
      assert.equal(runStatus(run.runDir), "finished");
      // The ranks were told to stop by the controller's shutdown, and left.
      for (const rank of await Promise.all(ranks)) {
        assert.equal(rank.code, 0, `a NATS rank: ${rank.stdout} ${rank.stderr}`);
        assert.match(rank.stdout, /left: shut down by the controller/);
      }
    } finally {
      await server.stop();
    }
  });

  it("without ranks: values after the last flush reach the store and the run shows finished", async () => {
    const run = await runController(["forget", "noranks"]);
    assert.equal(run.result.code, 0, describeRun(run));
    assert.match(run.result.stderr, /without logger\.shutdown\(\)/);
    assert.equal(openStore(run.runDir).series("late", { maxPoints: Infinity }).points[0]?.value, 7);
    assert.equal(runStatus(run.runDir), "finished");
  });
});

describe("issue 12 case 10: worker threads start with the user's flags", () => {
  // From source, our workers start through tsx as eval'd code, where --input-type is valid; the
  // failure was with the built package, whose workers start from .js files.
  const dist = join(ROOT, "dist", "index.js");
  it(
    "a job started as node --expose-gc --input-type=module -e gets its store and its stream (built package)",
    { skip: !existsSync(dist) && "run npm run build first" },
    async () => {
      const runDir = runDirFor();
      const code = `
      const { getOrCreateMetricLogger, recordMetric, streamValues } = await import(${JSON.stringify(pathToFileURL(dist).href)});
      const logger = await getOrCreateMetricLogger({ runDir: ${JSON.stringify(runDir)} });
      await logger.initBackends({ store: { loggingMode: "global_reduce" } });
      for (let step = 0; step < 3; step++) { recordMetric("x", step); streamValues("p", [step], step); await logger.flush(step); }
      await logger.shutdown();
    `;
      // --expose-gc: a process-wide flag Node refuses in a worker's explicit execArgv (left out there).
      const result = await runJob(["--expose-gc", "--input-type=module", "-e", code], {}, undefined, true);
      assert.equal(result.code, 0, result.stderr);
      assert.doesNotMatch(result.stderr, /--input-type can only be used with string input/);
      assert.deepEqual(
        openStore(runDir)
          .series("x", { maxPoints: Infinity })
          .points.map((p) => p.step),
        [0, 1, 2],
      );
      assert.equal(runStatus(runDir), "finished");
      assert.equal(readStream(join(runDir, "streams", "controller.jsonl")).records.length, 3);
    },
  );

  it("workerExecArgv keeps the user's flags and drops those of the main entry only", () => {
    assert.deepEqual(
      workerExecArgv([
        "--input-type=module",
        "-e",
        "code",
        "--import",
        "tsx",
        "--conditions=dev",
        "--require",
        "./a.cjs",
        "--max-old-space-size=512",
        "--eval=x",
        "-p",
        "1",
        "--input-type",
        "commonjs",
        "--enable-source-maps",
      ]),
      [
        "--import",
        "tsx",
        "--conditions=dev",
        "--require",
        "./a.cjs",
        "--max-old-space-size=512",
        "--enable-source-maps",
      ],
    );
  });
});
