/**
 * A restarted controller loses nothing of the dead one's last flush (issue 24, item 2), against a
 * real nats-server and real processes: four ranks joined over NATS (plain `node` + `joinRun`),
 * one of them busy so a flush waits for it while the other three have answered; the controller is
 * killed with SIGKILL 300 ms into that flush and a new one is started on the same run id and run
 * directory. Every rank keeps the answers no controller acknowledged; the new controller asks for
 * them when the rank registers, so logged + counted = recorded, exactly, in the store and in
 * metrics.jsonl.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { closeStores, series } from "../../src/store/reader.js";
import { tempDir, waitFor, within, TS_LOADER } from "../helpers.js";
import { killChildren, NatsServer, startChild, TEST_RUN_SECRET, type TestChild } from "./support.js";

const CONTROLLER = new URL("../fixtures/restart-controller.ts", import.meta.url);
const RANK = new URL("../fixtures/restart-rank.ts", import.meta.url);
const KEY = "restart/n";
const VALUES_PER_RANK = 3000;

let server: NatsServer;
const children: TestChild[] = [];
before(async () => {
  server = await NatsServer.start();
});
after(async () => {
  killChildren(children);
  await server.stop();
});

/** Sum of a key over every line of a run's metrics.jsonl. */
function jsonlSum(runDir: string, key: string): number {
  let sum = 0;
  for (const line of readFileSync(join(runDir, "metrics.jsonl"), "utf8").split("\n")) {
    if (line === "") continue;
    const record = JSON.parse(line) as { key: string; value: number };
    if (record.key === key) sum += record.value;
  }
  return sum;
}

/**
 * Values the job's warnings count as lost: values recorded but never flushed (`N value(s) in M
 * key(s) … not logged`). An answer reported lost without a count (`could not be sent again`,
 * `no longer kept`) makes the sum NaN: a loss that is not counted fails the test.
 */
function countedLosses(output: string): number {
  let n = 0;
  for (const line of output.split("\n")) {
    const unflushed = /(\d+) value\(s\) in \d+ key\(s\)/.exec(line);
    if (unflushed !== null) n += Number(unflushed[1]);
    else if (/could not be sent again|no longer kept/.test(line)) n = Number.NaN;
  }
  return n;
}

test(
  "SIGKILL the controller 300 ms into a flush that waits for a busy rank, start a new one: logged + counted = recorded, exactly",
  { timeout: 180_000 },
  async () => {
    const runId = `restart-${process.pid}`;
    const runDir = tempDir();
    // One run secret for the run (both controllers and every rank): messages are sealed with it.
    const env = {
      RANKSCOPE_NATS_URL: server.url,
      RANKSCOPE_RUN_ID: runId,
      RANKSCOPE_RUN_SECRET: TEST_RUN_SECRET,
      CONTROLLER_RUN_DIR: runDir,
    };
    const first = startChild(CONTROLLER, { ...env, CONTROLLER_FIRST_STEP: "0" }, children);
    const ranks = [0, 1, 2, 3].map((rank) =>
      startChild(
        RANK,
        {
          ...env,
          RANK: String(rank),
          RESTART_VALUES: String(VALUES_PER_RANK),
          ...(rank === 3 ? { RESTART_BUSY_MS: "4000" } : {}),
        },
        children,
      ),
    );
    const busy = ranks[3] as TestChild;
    await waitFor(() => busy.stdout.includes("busy"), {
      timeoutMs: 60_000,
      what: `the busy rank to block (controller: ${first.stdout}${first.stderr})`,
    });
    // A flush that starts now waits for the busy rank (blocked 4 s, under the 5 s flush deadline);
    // the other three answer it at once.
    // (the flush under way, or the next one, 100 ms later).
    await waitFor(() => /flush \d+\n$/.test(first.stdout), {
      timeoutMs: 10_000,
      what: "a flush while the rank is busy",
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.ok(!busy.stdout.includes("unblocked"), "the rank is still busy when the controller is killed");
    first.process.kill("SIGKILL");
    await within(first.exited, { timeoutMs: 10_000, what: "the SIGKILLed controller to exit" });
    assert.match(
      first.stdout,
      /flush \d+\n$/,
      "the controller was killed inside a flush (it printed no `flushed` after its last `flush`)",
    );

    const second = spawn(process.execPath, ["--import", TS_LOADER, CONTROLLER.pathname], {
      env: { ...process.env, ...env, CONTROLLER_FIRST_STEP: "100000" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let secondOut = "";
    second.stdout.on("data", (d: Buffer) => (secondOut += d.toString()));
    second.stderr.on("data", (d: Buffer) => (secondOut += d.toString()));
    const secondExited = new Promise<number | null>((resolve) => second.once("exit", (code) => resolve(code)));
    await waitFor(() => ranks.every((r) => r.stdout.includes("done ")), {
      timeoutMs: 60_000,
      what: `every rank to finish recording (second controller: ${secondOut})`,
    });
    await waitFor(() => /flushed \d+ 4\n/.test(secondOut), {
      timeoutMs: 30_000,
      what: `a flush of the new controller with all 4 ranks: ${secondOut}`,
    });
    second.stdin.end("stop\n");
    assert.equal(
      await within(secondExited, { timeoutMs: 30_000, what: "the second controller to shut down" }),
      0,
      secondOut,
    );
    await within(Promise.all(ranks.map((r) => r.exited)), { timeoutMs: 30_000, what: "the ranks to leave" });

    const recorded = ranks.reduce((n, r) => n + Number(/done (\d+)/.exec(r.stdout)?.[1] ?? Number.NaN), 0);
    assert.equal(recorded, 4 * VALUES_PER_RANK);
    const counted = countedLosses(`${first.stderr}${secondOut}${ranks.map((r) => r.stderr).join("")}`);
    const stored = series(runDir, KEY, { maxPoints: 1_000_000 }).points.reduce((n, p) => n + p.value, 0);
    closeStores();
    const losses = `${first.stderr}${secondOut}${ranks.map((r) => r.stderr).join("")}`
      .split("\n")
      .filter((l) => /could not be sent again|no longer kept|value\(s\) in \d+ key\(s\)/.test(l));
    assert.equal(
      stored + counted,
      recorded,
      `store: logged ${stored} + counted ${counted} = recorded ${recorded}; losses reported: ${losses.join(" | ")}\nBUSY: ${busy.stdout}\n${busy.stderr}\nSECOND: ${secondOut.slice(0, 3000)}`,
    );
    assert.equal(jsonlSum(runDir, KEY) + counted, recorded, "metrics.jsonl: logged + counted = recorded");
    assert.equal(counted, 0, "nothing lost: the new controller took the answers the dead one never logged");
    // The three ranks that had answered the killed controller's last flush, and the busy one (whose
    // late answer went to the dead controller's inbox): each answer sent again, once.
    for (const rankName of ranks.map((r) => /joined (\S+)/.exec(r.stdout)?.[1])) {
      assert.match(
        secondOut,
        new RegExp(
          `rank ${rankName}: its answer to flush\\(\\d+\\) was never acknowledged \\(lost in transit, or taken by an earlier controller of this run that never logged it\\)`,
        ),
        secondOut,
      );
    }
  },
);
