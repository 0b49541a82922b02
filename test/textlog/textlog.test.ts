import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, beforeEach, test } from "node:test";
import { fileURLToPath } from "node:url";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { closeTextLogFiles, configureTextLogs, getLogger, setupFileLogging } from "../../src/textlog/index.js";
import { WorkerRankHandle } from "../fixtures/worker-rank-handle.js";
import { REPO_ROOT, tempDir, TS_LOADER } from "../helpers.js";

process.env["TZ"] = "UTC";
const FIXED = Date.UTC(2026, 10, 22, 1, 52, 3, 45);
const savedColorEnv = { NO_COLOR: process.env["NO_COLOR"], FORCE_COLOR: process.env["FORCE_COLOR"] };

/** A console sink that remembers its lines; `isTTY` says whether it stands for a terminal. */
function sink(isTTY = true): { lines: string[]; isTTY: boolean; write(text: string): void } {
  const lines: string[] = [];
  return { lines, isTTY, write: (text: string) => lines.push(text) };
}

beforeEach(() => {
  delete process.env["NO_COLOR"];
  delete process.env["FORCE_COLOR"];
  closeTextLogFiles();
});
after(() => {
  for (const [name, value] of Object.entries(savedColorEnv)) if (value !== undefined) process.env[name] = value;
  closeTextLogFiles();
});

test("console lines: time, component, level, message, fields; coloured by component kind and level (golden)", () => {
  const out = sink();
  configureTextLogs({ console: out, files: false, clock: () => FIXED, level: "debug" });
  getLogger("Trainer").info({ step: 3, loss: 0.25 }, "step done");
  getLogger("RolloutWorker").info("collected %d episodes", 16);
  getLogger("Launcher").info("started");
  getLogger("StatsLogger").debug("details");
  getLogger("Trainer").warn("slow step");
  getLogger("Trainer").error("diverged");
  getLogger("Trainer").fatal("gave up");
  getLogger("misc").info("plain");
  getLogger("misc").trace("not shown below debug");
  assert.deepEqual(out.lines, [
    "\u001b[36m20261122-01:52:03.045 Trainer INFO: step done step=3 loss=0.25\u001b[0m\n",
    "\u001b[35m20261122-01:52:03.045 RolloutWorker INFO: collected 16 episodes\u001b[0m\n",
    "\u001b[34m20261122-01:52:03.045 Launcher INFO: started\u001b[0m\n",
    "\u001b[90m20261122-01:52:03.045 StatsLogger DEBUG: details\u001b[0m\n",
    "\u001b[33m20261122-01:52:03.045 Trainer WARNING: slow step\u001b[0m\n",
    "\u001b[31m20261122-01:52:03.045 Trainer ERROR: diverged\u001b[0m\n",
    "\u001b[1m\u001b[31m20261122-01:52:03.045 Trainer CRITICAL: gave up\u001b[0m\n",
    "20261122-01:52:03.045 misc INFO: plain\n",
  ]);
});

test("NO_COLOR turns colour off; configurable patterns pick the colour of a component", () => {
  process.env["NO_COLOR"] = "1";
  const plain = sink();
  configureTextLogs({ console: plain, files: false, clock: () => FIXED });
  getLogger("Trainer").warn("slow");
  assert.deepEqual(plain.lines, ["20261122-01:52:03.045 Trainer WARNING: slow\n"]);
  delete process.env["NO_COLOR"];
  const coloured = sink();
  configureTextLogs({
    console: coloured,
    files: false,
    clock: () => FIXED,
    componentColors: [{ pattern: "^judge", color: "yellow" }],
  });
  getLogger("judge-0").info("scored");
  getLogger("Trainer").info("no pattern matches it now");
  assert.deepEqual(coloured.lines, [
    "\u001b[33m20261122-01:52:03.045 judge-0 INFO: scored\u001b[0m\n",
    "20261122-01:52:03.045 Trainer INFO: no pattern matches it now\n",
  ]);
  assert.throws(
    () => configureTextLogs({ componentColors: [{ pattern: "x", color: "purple" as never }] }),
    /colour "purple" is not valid; valid: black, red/,
  );
  assert.throws(
    () => configureTextLogs({ level: "verbose" as never }),
    /configureTextLogs: level must be one of trace, debug, info, warn, error, fatal, got "verbose"/,
  );
});

test("errors print their stack on the following lines", () => {
  const out = sink();
  configureTextLogs({ console: out, files: false, clock: () => FIXED, color: false });
  getLogger("Trainer").error(new Error("boom"));
  const text = out.lines.join("");
  assert.match(text, /^20261122-01:52:03\.045 Trainer ERROR: boom\nError: boom\n\s+at /);
});

test("main.log holds the controller's lines, merged.log every process's lines prefixed by rank name, written as they happen", async () => {
  const early = sink();
  configureTextLogs({ console: early, clock: () => FIXED, color: false });
  getLogger("Controller").info("before the run is known");
  const runDir = tempDir();
  const logger = new MetricLogger({ runDir, processName: "Controller" });
  const log = getLogger("Controller");
  log.info("run started");
  // tail -f: the line is in the file as soon as the call returns.
  assert.match(readFileSync(join(runDir, "logs", "main.log"), "utf8"), /Controller INFO: run started\n$/);

  const child = fileURLToPath(new URL("../fixtures/textlog-rank.ts", import.meta.url));
  const run = (rank: string): Promise<number | null> =>
    new Promise((resolve) =>
      spawn(process.execPath, ["--import", TS_LOADER, child, runDir, rank, "50"], {
        stdio: "inherit",
        timeout: 60_000,
        killSignal: "SIGKILL",
      }).on("exit", resolve),
    );
  const codes = await Promise.all([run("Trainer_0_r0"), run("Trainer_0_r1")]);
  assert.deepEqual(codes, [0, 0]);
  log.warn("ranks done");
  await logger.shutdown();

  const main = readFileSync(join(runDir, "logs", "main.log"), "utf8")
    .split("\n")
    .filter(Boolean);
  assert.deepEqual(main, [
    "20261122-01:52:03.045 Controller INFO: before the run is known",
    "20261122-01:52:03.045 Controller INFO: run started",
    "20261122-01:52:03.045 Controller WARNING: ranks done",
  ]);
  const merged = readFileSync(join(runDir, "logs", "merged.log"), "utf8")
    .split("\n")
    .filter(Boolean);
  assert.equal(merged.length, 3 + 2 * 51, "every line of every process, none torn or lost");
  assert.equal(merged[0], "[Controller]     20261122-01:52:03.045 Controller INFO: before the run is known");
  for (const rank of ["Trainer_0_r0", "Trainer_0_r1"]) {
    const mine = merged.filter((l) => l.startsWith(`[${rank}]`));
    assert.equal(mine.length, 51);
    assert.equal(mine[0], `[${rank}]   20260102-03:04:05.006 RolloutWorker INFO: ${rank} line i=0`);
    assert.equal(mine[50], `[${rank}]   20260102-03:04:05.006 RolloutWorker WARNING: careful`);
    mine.slice(0, 50).forEach((l, i) => assert.ok(l.endsWith(`line i=${i}`), l));
  }
  assert.equal(merged.at(-1), "[Controller]     20261122-01:52:03.045 Controller WARNING: ranks done");
});

test("files keep colours like AReaL's unless NO_COLOR; setupFileLogging works without a MetricLogger", () => {
  const dir = tempDir();
  configureTextLogs({ console: false, clock: () => FIXED });
  setupFileLogging(dir);
  getLogger("Trainer").warn("w");
  assert.equal(
    readFileSync(join(dir, "logs", "main.log"), "utf8"),
    "\u001b[33m20261122-01:52:03.045 Trainer WARNING: w\u001b[0m\n",
  );
  assert.equal(
    readFileSync(join(dir, "logs", "merged.log"), "utf8"),
    "[main]           \u001b[33m20261122-01:52:03.045 Trainer WARNING: w\u001b[0m\n",
  );
  closeTextLogFiles();
  process.env["NO_COLOR"] = "1";
  const plainDir = tempDir();
  configureTextLogs({ console: false, clock: () => FIXED });
  setupFileLogging(plainDir);
  getLogger("Trainer").warn("w");
  assert.equal(readFileSync(join(plainDir, "logs", "main.log"), "utf8"), "20261122-01:52:03.045 Trainer WARNING: w\n");
});

test("a rank in a worker thread writes merged.log once the controller initialises it", async () => {
  const runDir = tempDir();
  configureTextLogs({ console: false, color: false, clock: () => FIXED });
  const logger = new MetricLogger({ runDir, processName: "Controller" });
  const rank = new WorkerRankHandle("Trainer_0_r1", 1);
  try {
    await logger.registerRank(rank);
    await logger.initBackends({});
    await rank.request("log", "hello from the worker");
    getLogger("Controller").info("hello from the controller");
    await logger.shutdown();
  } finally {
    await rank.terminate();
  }
  const merged = readFileSync(join(runDir, "logs", "merged.log"), "utf8");
  assert.match(merged, /^\[Trainer_0_r1\] {3}\d{8}-\d\d:\d\d:\d\d\.\d{3} RolloutWorker INFO: hello from the worker$/m);
  assert.match(merged, /^\[Controller\] {5}20261122-01:52:03\.045 Controller INFO: hello from the controller$/m);
  assert.ok(
    !readFileSync(join(runDir, "logs", "main.log"), "utf8").includes("worker"),
    "main.log is the controller's own",
  );
});

const ESC = "\u001b[";
/** On the built package with plain node: thirteen short jobs, each without tsx loading the sources. */
const colorJob = fileURLToPath(new URL("fixtures/color-job.mjs", import.meta.url));

/**
 * Run the colour job with `env` (empty values clear a variable: the resolver reads them as unset),
 * its stdout a pipe or a real terminal (a pseudo-terminal from util-linux `script`).
 */
function runColorJob(
  mode: "plain" | "ranks" | "levels",
  stdout: "pipe" | "terminal",
  env: Record<string, string>,
): { status: number | null; out: string; err: string; runDir: string } {
  const runDir = tempDir();
  const args = [colorJob, mode, runDir];
  const options = {
    cwd: REPO_ROOT,
    env: { ...process.env, NO_COLOR: "", FORCE_COLOR: "", ...env },
    encoding: "utf8" as const,
    timeout: 90_000,
    killSignal: "SIGKILL" as const,
  };
  const run =
    stdout === "pipe"
      ? spawnSync(process.execPath, args, options)
      : spawnSync("script", ["-qec", [process.execPath, ...args].map((a) => `'${a}'`).join(" "), "/dev/null"], {
          ...options,
          input: "",
        });
  return { status: run.status, out: run.stdout, err: run.stderr, runDir };
}

/** Output with each escape character shown as `<ESC>`, to match against. */
const visible = (text: string): string => text.replaceAll("\u001b", "<ESC>");

const hasScript = spawnSync("script", ["--version"], { encoding: "utf8" }).status === 0;

test(
  "console lines carry no ANSI codes when stdout is not a terminal; a terminal gets colours; FORCE_COLOR, then NO_COLOR, decide over the terminal",
  { skip: hasScript ? false : "util-linux script (a pseudo-terminal) is missing" },
  () => {
    const cases: [stdout: "pipe" | "terminal", env: Record<string, string>, coloured: boolean][] = [
      ["pipe", {}, false],
      ["terminal", {}, true],
      ["pipe", { FORCE_COLOR: "1" }, true],
      ["pipe", { FORCE_COLOR: "3" }, true],
      ["terminal", { FORCE_COLOR: "0" }, false],
      ["terminal", { FORCE_COLOR: "false" }, false],
      ["terminal", { NO_COLOR: "1" }, false],
      ["pipe", { FORCE_COLOR: "1", NO_COLOR: "1" }, true],
    ];
    for (const [stdout, env, coloured] of cases) {
      const { status, out, err } = runColorJob("plain", stdout, env);
      const what = `${stdout} ${JSON.stringify(env)}`;
      assert.equal(status, 0, `${what}: ${err}`);
      // A warning goes to stderr, which `script` writes to its stdout with the terminal's stdout.
      const console = stdout === "pipe" ? err : out;
      assert.match(console, /Trainer WARNING: from the controller/, what);
      assert.equal(console.includes(ESC), coloured, `${what}: ${JSON.stringify(console)}`);
      if (coloured)
        assert.match(visible(console), /<ESC>\[33m\d{8}-[\d:.]+ Trainer WARNING: from the controller<ESC>\[0m/, what);
    }
    const invalid = runColorJob("plain", "pipe", { FORCE_COLOR: "maybe" });
    assert.notEqual(invalid.status, 0);
    assert.match(
      invalid.err,
      /FORCE_COLOR="maybe" is not valid \(it sets configureTextLogs's color\); valid: true or false \(the variable: 1, 2, 3, true, yes, on; or 0, false, no, off\)/,
    );
  },
);

test(
  "a spawned rank's lines, forwarded to the controller's console, are coloured exactly when the controller's are",
  { skip: hasScript ? false : "util-linux script (a pseudo-terminal) is missing" },
  () => {
    const piped = runColorJob("ranks", "pipe", {});
    assert.equal(piped.status, 0, piped.err);
    assert.match(piped.err, /RolloutWorker WARNING: from the rank/);
    assert.ok(!piped.err.includes(ESC), `no ANSI codes in a piped job's output: ${JSON.stringify(piped.err)}`);
    // merged.log keeps AReaL's colours for every process alike, whatever stdout is.
    const merged = visible(readFileSync(join(piped.runDir, "logs", "merged.log"), "utf8"));
    assert.match(
      merged,
      /^\[Controller\] +<ESC>\[33m\d{8}-[\d:.]+ Trainer WARNING: from the controller<ESC>\[0m$/m,
      merged,
    );
    assert.match(
      merged,
      /^\[Colour_\w+_r0\] +<ESC>\[33m\d{8}-[\d:.]+ RolloutWorker WARNING: from the rank<ESC>\[0m$/m,
      merged,
    );
    const noColor = runColorJob("ranks", "pipe", { NO_COLOR: "1" });
    assert.equal(noColor.status, 0, noColor.err);
    assert.ok(
      !readFileSync(join(noColor.runDir, "logs", "merged.log"), "utf8").includes(ESC),
      "NO_COLOR: no colour in any process's file lines",
    );
    const terminal = runColorJob("ranks", "terminal", {});
    assert.equal(terminal.status, 0, terminal.err);
    assert.match(visible(terminal.out), /<ESC>\[33m\d{8}-[\d:.]+ Trainer WARNING: from the controller<ESC>\[0m/);
    assert.match(
      visible(terminal.out),
      /<ESC>\[33m\d{8}-[\d:.]+ RolloutWorker WARNING: from the rank<ESC>\[0m/,
      "the rank, whose stdout is a pipe, colours because the controller's is a terminal",
    );
  },
);

test("info lines go to stdout, errors to stderr, as Node's console does: the controller's own and a spawned rank's alike", () => {
  const { status, out, err } = runColorJob("levels", "pipe", {});
  assert.equal(status, 0, err);
  assert.match(out, /Trainer INFO: controller info/);
  assert.match(out, /RolloutWorker INFO: rank info/);
  assert.match(err, /Trainer ERROR: controller error/);
  assert.match(err, /RolloutWorker ERROR: rank error/);
  assert.doesNotMatch(out, /ERROR/, "an error line reached stdout");
  assert.doesNotMatch(err, /INFO: (controller|rank) info/, "an info line reached stderr");
});

test("a console sink given in code gets every level", () => {
  const out = sink(false);
  configureTextLogs({ console: out, files: false, clock: () => FIXED });
  getLogger("Trainer").info("fine");
  getLogger("Trainer").error("broken");
  assert.deepEqual(
    out.lines.map((l) => l.replace(/^\S+ /, "")),
    ["Trainer INFO: fine\n", "Trainer ERROR: broken\n"],
  );
});
