/** `rankscope runs`, `tail` and `export`, run as a user would: child processes on the built CLI. */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { before, describe, test } from "node:test";
import { GLOBAL_RANK } from "../../../src/store/schema.js";
import { StoreWriter } from "../../../src/store/writer.js";
import { tempDir } from "../../helpers.js";

const REPO = fileURLToPath(new URL("../../..", import.meta.url));
const CLI = join(REPO, "dist", "cli", "main.js");

before(() => {
  // scripts/test.sh builds first; a direct run of this file builds when dist is missing.
  if (!existsSync(CLI)) spawnSync("npm", ["run", "build", "--silent"], { cwd: REPO, stdio: "inherit" });
});

function cli(args: readonly string[], cwd = REPO): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd, encoding: "utf8", timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function writer(runDir: string, experiment: string, trial: string): StoreWriter {
  return StoreWriter.open({ runDir, role: "controller", rank: GLOBAL_RANK, rankName: "Controller", experiment, trial });
}

describe("rankscope runs", () => {
  test("lists every run under the root with experiment, trial and status", () => {
    const root = tempDir();
    const a = writer(join(root, "ppo", "seed1"), "ppo", "seed1");
    a.write({ scalars: [{ key: "loss", step: 0, wall: Date.now(), value: 1 }] });
    a.finish();
    const b = writer(join(root, "grpo", "seed2"), "grpo", "seed2");
    b.write({ scalars: [{ key: "loss", step: 0, wall: Date.now(), value: 1 }] });
    const r = cli(["runs", "--root", root]);
    assert.equal(r.code, 0, r.stderr);
    const lines = r.stdout.trim().split("\n");
    assert.match(lines[0] ?? "", /^EXPERIMENT\s+TRIAL\s+STATUS\s+STARTED\s+DURATION\s+PATH$/);
    assert.equal(lines.length, 3);
    assert.ok(
      lines.some((l) => /^ppo\s+seed1\s+finished\s/.test(l)),
      r.stdout,
    );
    assert.ok(
      lines.some((l) => /^grpo\s+seed2\s+running\s/.test(l)),
      r.stdout,
    );
    const json = JSON.parse(cli(["runs", "--root", root, "--json"]).stdout) as { experiment: string; status: string }[];
    assert.deepEqual(json.map((x) => `${x.experiment}:${x.status}`).sort(), ["grpo:running", "ppo:finished"]);
    b.finish();
  });

  test("an empty root says so; a missing root is an error with a non-zero exit", () => {
    const root = tempDir();
    const empty = cli(["runs", "--root", root]);
    assert.equal(empty.code, 0);
    assert.match(empty.stdout, /no runs under/);
    const missing = cli(["runs", "--root", join(root, "nope")]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /rankscope: runs root .*nope does not exist/);
  });
});

describe("rankscope tail", () => {
  test("--no-follow prints the latest value of every key", () => {
    const root = tempDir();
    const w = writer(join(root, "exp", "t"), "exp", "t");
    for (let s = 0; s < 10; s++)
      w.write({
        scalars: [
          { key: "loss", step: s, wall: 1, value: 1 / (s + 1) },
          { key: "acc", step: s, wall: 1, value: s === 9 ? NaN : s },
        ],
      });
    w.finish();
    const r = cli(["tail", "exp/t", "--root", root, "--no-follow"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^exp\/t \(finished\)/);
    assert.match(r.stdout, /step 9 {2}acc {2}NaN\n/);
    assert.match(r.stdout, /step 9 {2}loss {2}0\.1\n/);
    assert.doesNotMatch(r.stdout, /step 8/);
  });

  test("follows a live run: new points appear as they are written, and tail ends with the run", async () => {
    const root = tempDir();
    const runDir = join(root, "exp", "live");
    const w = writer(runDir, "exp", "live");
    w.write({ scalars: [{ key: "loss", step: 0, wall: 1, value: 5 }] });
    const child = spawn(process.execPath, [CLI, "tail", runDir, "--interval", "100"], {
      stdio: ["ignore", "pipe", "pipe"],
      // A deadline on the exit awaited below: a tail that never ends is killed (code null).
      timeout: 60_000,
      killSignal: "SIGKILL",
    });
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const waiters = new Set<() => void>();
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      for (const check of waiters) check();
    });
    const seen = (pattern: RegExp): Promise<void> =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`tail never printed ${pattern}; got:\n${stdout}\n${stderr}`)),
          30_000,
        );
        const check = (): void => {
          if (!pattern.test(stdout)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        waiters.add(check);
        check();
      });
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    await seen(/step 0 {2}loss {2}5\n/);
    w.write({ scalars: [1, 2, 3].map((s) => ({ key: "loss", step: s, wall: 1, value: s * 10 })) });
    await seen(/step 3 {2}loss {2}30\n/);
    w.write({ scalars: [{ key: "loss", step: 4, wall: 1, value: 40 }] });
    w.finish();
    assert.equal(await exited, 0, stderr);
    assert.match(stdout, /step 1 {2}loss {2}10\nstep 2 {2}loss {2}20\nstep 3 {2}loss {2}30\n/);
    assert.match(stdout, /step 4 {2}loss {2}40\nrun finished\n$/);
    assert.equal(stdout.match(/step 0 /g)?.length, 1, "each point once");
  });

  test("a run that does not exist, or a bad option, is a clear error", () => {
    const root = tempDir();
    const r = cli(["tail", "exp/none", "--root", root]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /rankscope: no run "exp\/none": .*metrics\.db.* exists; .*rankscope runs/);
    const bad = cli(["tail", "x", "--interval", "soon"]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /--interval must be a positive integer, got "soon"/);
  });
});

describe("internal keys in tail and export", () => {
  test("…__count and rankscope/… keys are left out unless --internal is given", () => {
    const root = tempDir();
    const w = writer(join(root, "exp", "i"), "exp", "i");
    w.write({
      scalars: [
        { key: "loss", step: 0, wall: 1000, value: 1 },
        { key: "acc__count", step: 0, wall: 1000, value: 8 },
        { key: "rankscope/ranks_expected", step: 0, wall: 1000, value: 4 },
      ],
    });
    w.finish();
    const tail = cli(["tail", "exp/i", "--root", root, "--no-follow"]);
    assert.equal(tail.code, 0, tail.stderr);
    assert.match(tail.stdout, /step 0 {2}loss {2}1\n/);
    assert.doesNotMatch(tail.stdout, /acc__count|rankscope\//);
    const tailAll = cli(["tail", "exp/i", "--root", root, "--no-follow", "--internal"]);
    assert.match(tailAll.stdout, /step 0 {2}acc__count {2}8\n/);
    assert.match(tailAll.stdout, /step 0 {2}rankscope\/ranks_expected {2}4\n/);
    const csv = cli(["export", "exp/i", "--root", root, "--format", "csv"]);
    assert.equal(csv.stdout, "key,kind,rank,step,wall,value\nloss,scalar,-1,0,1000,1\n");
    const csvAll = cli(["export", "exp/i", "--root", root, "--format", "csv", "--internal"]);
    assert.equal(csvAll.stdout.trim().split("\n").length, 4);
  });
});

describe("rankscope export", () => {
  function exampleRun(): { root: string; runDir: string } {
    const root = tempDir();
    const runDir = join(root, "exp", "t");
    const w = writer(runDir, "exp", "t");
    w.write({
      scalars: [
        { key: "loss", step: 0, wall: 1000, value: NaN },
        { key: "loss", step: 1, wall: 1001, value: Infinity },
        { key: 'odd,"key"', step: 0, wall: 1000, value: 1.5 },
        { key: "loss", step: 0, wall: 1000, value: 2, rank: 1 },
      ],
      streams: [{ key: "latency", step: 0, wall: 1002, value: -Infinity, rank: 0 }],
    });
    w.finish();
    return { root, runDir };
  }

  test("--format csv writes every point of every series with a header, and a progress bar on stderr", () => {
    const { root } = exampleRun();
    const out = join(root, "out.csv");
    const r = cli(["export", "exp/t", "--root", root, "--format", "csv", "--out", out]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(
      readFileSync(out, "utf8"),
      [
        "key,kind,rank,step,wall,value",
        "latency,stream,0,0,1002,-Infinity",
        "loss,scalar,-1,0,1000,NaN",
        "loss,scalar,-1,1,1001,Infinity",
        "loss,scalar,1,0,1000,2",
        '"odd,""key""",scalar,-1,0,1000,1.5',
        "",
      ].join("\n"),
    );
    assert.match(r.stderr, /\[#+\] 100% {2}4\/4 series, 5 points/);
    assert.match(r.stderr, /wrote 5 points of 4 series to/);
    // stderr is a pipe here, not a terminal: the bar is printed once, in its final state.
    assert.deepEqual(
      r.stderr.split("\n").filter((line) => line.includes("series,")),
      ["[##############################] 100%  4/4 series, 5 points"],
    );
    assert.ok(!r.stderr.includes("\r"), "no carriage returns outside a terminal");
  });

  test("--format jsonl to stdout keeps NaN and ±Infinity as proto3 JSON strings", () => {
    const { runDir } = exampleRun();
    const r = cli(["export", runDir, "--format", "jsonl"]);
    assert.equal(r.code, 0, r.stderr);
    const rows = r.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(rows.length, 5);
    assert.deepEqual(rows[1], { key: "loss", kind: "scalar", rank: -1, step: 0, wall: 1000, value: "NaN" });
    assert.deepEqual(rows[0], { key: "latency", kind: "stream", rank: 0, step: 0, wall: 1002, value: "-Infinity" });
  });

  test("a missing or unknown format is refused with the valid ones", () => {
    const { runDir } = exampleRun();
    const missing = cli(["export", runDir]);
    assert.notEqual(missing.code, 0);
    assert.match(missing.stderr, /required option '--format <format>' not specified/);
    const bad = cli(["export", runDir, "--format", "xml"]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /--format "xml" is not supported; valid: csv, jsonl/);
  });
});

describe("rankscope demo", () => {
  test("writes its run to the store and says how to open the dashboard", () => {
    const cwd = tempDir();
    const r = cli(["demo", "--steps", "2"], cwd);
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stderr,
      /^rankscope: this run's data is in runs\/default\/\S+\nrankscope: open the dashboard with: npx rankscope ui --root runs$/m,
    );
    assert.equal(r.stderr.split("this run's data is in").length - 1, 1, "said once, by the controller only");
    const runs = JSON.parse(cli(["runs", "--json"], cwd).stdout) as { experiment: string; status: string }[];
    assert.equal(runs.length, 1);
    assert.equal(runs[0]?.status, "finished");
  });
});

describe("rankscope (commands)", () => {
  test("every store command has help; an unknown command is an error with a non-zero exit", () => {
    for (const [command, option] of [
      ["runs", "--root"],
      ["tail", "--interval"],
      ["export", "--format"],
    ] as const) {
      const r = cli([command, "--help"]);
      assert.equal(r.code, 0, `${command} --help`);
      assert.match(r.stdout, new RegExp(`Usage: rankscope ${command}`));
      assert.match(r.stdout, new RegExp(option));
    }
    const unknown = cli(["frobnicate"]);
    assert.notEqual(unknown.code, 0);
    assert.match(unknown.stderr, /unknown command 'frobnicate'/);
  });
});
