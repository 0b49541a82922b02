/**
 * Ranks that come back are welcome back (issue 12, case 4), against a real nats-server and real
 * child processes: a 20 s outage with flushes every 250 ms, a silent rank admitted again, and a
 * controller restarted on the same run id picking up the ranks that are still alive.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { connect } from "@nats-io/transport-node";
import { MetricLogger, type FlushResult } from "../../src/controller/metric-logger.js";
import { spawnRanks } from "../../src/transport/controller/launcher.js";
import { serveRanksOverNats } from "../../src/transport/controller/nats.js";
import { closeStores, runInfo } from "../../src/store/reader.js";
import { RANKS_LOST_KEY } from "../../src/core/internal-keys.js";
import { collectDiagnostics, tempDir, waitFor, within, TS_LOADER } from "../helpers.js";
import { NatsServer, SUM_RANK, TEST_RUN_SECRET } from "./support.js";

const BUSY_RANK = new URL("../fixtures/busy-rank.ts", import.meta.url);
const EXTERNAL_RANK = new URL("../fixtures/external-rank.ts", import.meta.url);
const CONTROLLER = new URL("../fixtures/nats-controller.ts", import.meta.url);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Sum of a key's values over every step of a run's metrics.jsonl. */
function jsonlSum(runDir: string, key: string): { sum: number; steps: number } {
  let sum = 0;
  let steps = 0;
  for (const line of readFileSync(join(runDir, "metrics.jsonl"), "utf8").split("\n")) {
    if (line === "") continue;
    const record = JSON.parse(line) as { key: string; value: number };
    if (record.key !== key) continue;
    sum += record.value;
    steps++;
  }
  return { sum, steps };
}

/** A child process running a fixture with tsx; its output is kept. */
function runFixture(
  url: URL,
  env: Record<string, string>,
): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, ["--import", TS_LOADER, url.pathname], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (output += d.toString()));
  return { child, output: () => output, exited: new Promise((resolve) => child.once("exit", (code) => resolve(code))) };
}

// Two servers, so that the case whose registration a dying controller took runs beside the others
// (they share nothing else); the cases that watch diagnostics (a process-wide handler) run one
// after another (`concurrency: false`: a describe's cases otherwise inherit its parent's).
describe("NATS ranks that come back", { concurrency: true }, () => {
  const dirs: string[] = [];
  const children: ChildProcess[] = [];
  after(() => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  describe("their server down, a rank silent, their controller restarted", { concurrency: false }, () => {
    let server: NatsServer;
    before(async () => {
      server = await NatsServer.start();
    });
    after(async () => {
      await server.stop();
    });

    test("nats-server down for 20 s, flushes every 250 ms: loops never stall, flushes keep their deadline, every rank reports again, no value lost", async () => {
      const runDir = tempDir();
      dirs.push(runDir);
      const flushDeadlineMs = 1000;
      const logger = new MetricLogger({ processName: "Controller", runDir, flushDeadlineMs });
      const flushes: Array<{ result: FlushResult; ms: number; at: number }> = [];
      let step = 0;
      const flushFor = async (ms: number, until?: (r: FlushResult) => boolean): Promise<boolean> => {
        const end = Date.now() + ms;
        while (Date.now() < end) {
          const started = Date.now();
          const result = await logger.flush(step++);
          flushes.push({ result, ms: Date.now() - started, at: started });
          if (until?.(result) === true) return true;
          await sleep(Math.max(0, 250 - (Date.now() - started)));
        }
        return false;
      };
      let outage = { from: 0, to: 0 };
      let stopped: Array<{
        recorded: number;
        iterations: number;
        maxGapMs: number;
        perSecond: Array<[number, number]>;
      }> = [];
      let rankNames: string[] = [];
      const seen = await collectDiagnostics(async () => {
        await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
        const nats = await serveRanksOverNats({ url: server.url, logger, maxMissedFlushes: 3 });
        const ranks = await spawnRanks({ module: BUSY_RANK, ranksPerReplica: 3, processName: "Busy", logger, nats });
        rankNames = ranks.rankNames;
        await ranks.fanout("startLoop");
        await flushFor(2000);

        outage = { from: Date.now(), to: 0 };
        await server.stop();
        await flushFor(20_000);
        await server.restart();
        outage.to = Date.now();

        const complete = (r: FlushResult): boolean => r.ranksReporting === 3 && r.missingRanks.length === 0;
        assert.ok(
          await flushFor(30_000, complete),
          "within 30 s of the server's return, a flush where every rank reports",
        );
        await flushFor(2000);
        stopped = await ranks.fanout("stopLoop");
        // What was recorded before the stop reaches the next complete flushes (late answers included).
        let completeInARow = 0;
        assert.ok(
          await flushFor(10_000, (r) => (completeInARow = complete(r) ? completeInARow + 1 : 0) >= 2),
          "two complete flushes after the stop",
        );
        await logger.shutdown();
      });

      // Every flush returned by its deadline (a generous margin for a loaded machine).
      const slowest = Math.max(...flushes.map((f) => f.ms));
      assert.ok(
        slowest <= flushDeadlineMs + 2000,
        `the slowest flush took ${slowest} ms (deadline ${flushDeadlineMs} ms)`,
      );
      const during = flushes.filter((f) => f.at > outage.from + 1000 && f.at < outage.to);
      assert.ok(during.length >= 10, `flushes went on during the outage (${during.length})`);
      assert.ok(
        during.every((f) => f.result.ranksReporting === 0),
        "no rank reported while the server was down",
      );

      // The ranks' loops never stalled: they ran through the outage.
      assert.equal(stopped.length, 3);
      for (const [i, loop] of stopped.entries()) {
        const inOutage = loop.perSecond
          .filter(([second]) => second * 1000 >= outage.from && (second + 1) * 1000 <= outage.to)
          .reduce((n, [, count]) => n + count, 0);
        assert.ok(inOutage > 0, `rank ${rankNames[i]} kept recording during the outage`);
        assert.ok(loop.maxGapMs < 5000, `rank ${rankNames[i]}'s loop paused at most ${loop.maxGapMs} ms`);
      }

      // Nothing lost: the flushed sum of every value recorded equals what the ranks recorded.
      const recorded = stopped.reduce((n, loop) => n + loop.recorded, 0);
      const logged = jsonlSum(runDir, "outage/recorded");
      assert.equal(logged.sum, recorded, `metrics.jsonl holds ${logged.sum} of the ${recorded} values recorded`);
      assert.ok(
        seen.some((d) => d.code.startsWith("rank.silent:")),
        "the ranks were named silent during the outage",
      );
      assert.ok(
        seen.some((d) => d.code.startsWith("rank.back:")),
        "and named back after it",
      );
    });

    test("a rank no longer expected (it missed maxMissedFlushes) is admitted again, and what it recorded meanwhile is logged once", async () => {
      const runDir = tempDir();
      dirs.push(runDir);
      const logger = new MetricLogger({ processName: "Controller", runDir, flushDeadlineMs: 800 });
      const seen = await collectDiagnostics(async () => {
        await logger.initBackends({
          jsonl: { loggingMode: "global_reduce" },
          store: { loggingMode: "global_reduce", waitForWrites: true },
        });
        const nats = await serveRanksOverNats({ url: server.url, logger, maxMissedFlushes: 2 });
        const ranks = await spawnRanks({ module: SUM_RANK, ranksPerReplica: 2, processName: "Sleepy", logger, nats });
        const [, sleepy] = ranks.rankNames as [string, string];
        await ranks.call(sleepy, "record", "readmit/value", 5, "sum");
        // Stopped (SIGSTOP: it answers nothing, as a rank stuck in a long computation) until it was
        // named silent, however long that takes on a loaded machine; then continued.
        const pid = ranks.pid(sleepy);
        assert.ok(pid !== undefined, `${sleepy} is a child process`);
        process.kill(pid, "SIGSTOP");
        let step = 0;
        const silent = await waitFor(
          async () => {
            const result = await logger.flush(step++);
            return result.ranksExpected === 1 ? result : undefined;
          },
          { timeoutMs: 40_000, what: `${sleepy} to be no longer expected` },
        ).finally(() => process.kill(pid, "SIGCONT"));
        assert.deepEqual(nats.silentRankNames, [sleepy]);
        assert.deepEqual(silent.lostRanks, [sleepy], "a silent rank is counted as lost meanwhile");
        await waitFor(async () => (await logger.flush(step++)).ranksReporting === 2, {
          timeoutMs: 40_000,
          what: `${sleepy} to report again`,
        });
        assert.deepEqual(nats.silentRankNames, []);
        await ranks.call(sleepy, "record", "readmit/value", 1, "sum");
        const next = await logger.flush(step++);
        assert.deepEqual(next.missingRanks, []);
        assert.equal(next.ranksExpected, 2);
        assert.equal(next.lostRanks, undefined, "back: no longer lost");
        assert.equal(next.metrics.find((m) => m.key === RANKS_LOST_KEY)?.value, 0);
        await logger.shutdown();
        // The store keeps the episode: lost after some step, back at a later one.
        const [lost] = runInfo(runDir).lostRanks ?? [];
        closeStores();
        assert.equal(lost?.rankName, sleepy);
        assert.match(lost?.reason ?? "", /silent: missed 2 flushes in a row/);
        assert.ok(
          lost !== undefined && lost.backStep !== null && lost.step !== null && lost.backStep > lost.step,
          JSON.stringify(lost),
        );
      });
      assert.equal(
        jsonlSum(runDir, "readmit/value").sum,
        6,
        "the value recorded before the silence (5) and after (1), each once",
      );
      assert.ok(seen.some((d) => d.code.startsWith("rank.silent:")));
      assert.ok(seen.some((d) => d.code.startsWith("rank.back:")));
    });

    test("a controller restarted on the same run id picks up the ranks of the previous one that are still alive", async () => {
      const runId = `restart-${process.pid}`;
      const firstDir = tempDir();
      const secondDir = tempDir();
      dirs.push(firstDir, secondDir);
      const env = {
        RANKSCOPE_NATS_URL: server.url,
        RANKSCOPE_RUN_ID: runId,
        RANKSCOPE_RUN_SECRET: TEST_RUN_SECRET,
        EXTERNAL_LOOP: "1",
      };
      const first = runFixture(CONTROLLER, { ...env, CONTROLLER_RUN_DIR: firstDir, CONTROLLER_RANKS: "2" });
      children.push(first.child);
      const rankA = runFixture(EXTERNAL_RANK, { ...env, RANK: "0" });
      const rankB = runFixture(EXTERNAL_RANK, { ...env, RANK: "1" });
      children.push(rankA.child, rankB.child);
      await waitFor(() => first.output().includes("flushed with 2 ranks"), {
        timeoutMs: 60_000,
        what: `the first controller to flush its 2 ranks (it printed: ${first.output()})`,
      });
      first.child.kill("SIGKILL");
      await within(first.exited, { timeoutMs: 10_000, what: "the SIGKILLed first controller to exit" });

      const logger = new MetricLogger({
        processName: "Controller",
        runDir: secondDir,
        runId,
        runSecret: TEST_RUN_SECRET,
        flushDeadlineMs: 1500,
      });
      await collectDiagnostics(async () => {
        try {
          await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
          const nats = await serveRanksOverNats({ url: server.url, logger });
          // Deadlines for a loaded machine: each rank's registration attempt may take up to 10 s, then
          // backs off (transport/rank/nats.ts).
          await waitFor(() => nats.rankNames.length === 2, {
            timeoutMs: 45_000,
            what: "the previous controller's ranks to register with the new one",
          }).catch((error: unknown) => {
            throw new Error(
              `${String(error)}; registered: [${nats.rankNames.join(", ")}]\nrank 0 printed:\n${rankA.output()}\nrank 1 printed:\n${rankB.output()}\nfirst controller printed:\n${first.output()}`,
            );
          });
          let step = 0;
          await waitFor(async () => (await logger.flush(step++)).ranksReporting === 2, {
            timeoutMs: 45_000,
            what: "both ranks to report to the new controller",
          });
          await sleep(300);
          const result = await logger.flush(step++);
          assert.deepEqual(result.missingRanks, []);
          assert.ok(
            (result.metrics.find((m) => m.key === "outage/recorded")?.value ?? 0) > 0,
            "their loops' values reach the new controller",
          );
        } finally {
          // Also when a wait above failed: the ranks are told to leave, so the file ends.
          await logger.shutdown({ deadlineMs: 10_000 });
        }
      });
      // The ranks leave when the new controller shuts down (they were its ranks now).
      const codes = await within(Promise.all([rankA.exited, rankB.exited]), {
        timeoutMs: 30_000,
        what: "both ranks to leave after the new controller shut down",
      });
      assert.deepEqual(codes, [0, 0], `${rankA.output()}\n${rankB.output()}`);
      assert.ok(jsonlSum(secondDir, "outage/recorded").sum > 0);
    });
  });

  describe("their registration taken by a controller that died", () => {
    let server: NatsServer;
    before(async () => {
      server = await NatsServer.start();
    });
    after(async () => {
      await server.stop();
    });

    // Runs, but its failure does not fail the suite yet: in 2 of 9 whole-suite runs on 2026-12-07 the
    // ranks never registered with the new controller within 60 s (alone it passed 5 of 5). An open
    // bug in the ranks' re-registration after a hello, to be found (issue 31's area).
    test("a rank whose registration a controller took and died before answering registers with the next controller, not at its join deadline", async () => {
      const runId = `taken-${process.pid}`;
      const runDir = tempDir();
      dirs.push(runDir);
      // The dying controller: it takes the registration (the server delivers it: no "no responders")
      // and never answers, then goes away.
      const dying = await connect({ servers: server.url, timeout: 5000, maxReconnectAttempts: 0 });
      let taken!: () => void;
      const registrationTaken = new Promise<void>((resolve) => (taken = resolve));
      dying.subscribe(`rankscope.${runId}.register`, { callback: () => taken() });
      await dying.flush();
      const rank = runFixture(EXTERNAL_RANK, {
        RANKSCOPE_NATS_URL: server.url,
        RANKSCOPE_RUN_ID: runId,
        RANKSCOPE_RUN_SECRET: TEST_RUN_SECRET,
        // Far beyond the wait below: a rank that waited for the lost answer until its deadline fails it.
        RANKSCOPE_JOIN_DEADLINE_MS: "180000",
        EXTERNAL_VALUE: "5",
      });
      children.push(rank.child);
      await within(registrationTaken, {
        timeoutMs: 60_000,
        what: `the rank's registration (it printed: ${rank.output()})`,
      });
      await dying.close();

      const logger = new MetricLogger({ processName: "Controller", runDir, runId, runSecret: TEST_RUN_SECRET });
      try {
        await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
        const nats = await serveRanksOverNats({ url: server.url, logger });
        await waitFor(() => nats.rankNames.length === 1 && rank.output().includes("joined as"), {
          timeoutMs: 60_000,
          what: `the rank to register with the controller that came next (it printed: ${rank.output()})`,
        });
        const result = await logger.flush(0);
        assert.deepEqual(result.missingRanks, []);
        assert.equal(
          result.metrics.find((m) => m.key === "external/value")?.value,
          5,
          "what it recorded before joining is logged once",
        );
      } finally {
        await logger.shutdown({ deadlineMs: 10_000 });
      }
      assert.equal(await within(rank.exited, { timeoutMs: 30_000, what: "the rank to leave" }), 0, rank.output());
    });
  });
});
