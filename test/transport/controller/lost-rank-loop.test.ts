/**
 * A lost rank does not end the job (issue 37 item 2): the README's loop,
 * `for (…) await actor.fanout("myFn")`, runs on real child-process ranks while one of them exits
 * in the middle of a call. The loop finishes, the live ranks' values are logged, and the loss is
 * said (a warning, the flush's `lostRanks`, the default `rank_lost` alert); `fanoutSettled` and
 * `call` say which rank went away. After `shutdown()` the store's `rank_lost` alert reads `ended`,
 * not `firing` (issue 37 item 3): the run is over.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { MetricLogger } from "../../../src/controller/metric-logger.js";
import { alerts as storedAlerts, closeStores } from "../../../src/store/reader.js";
import { spawnRanks } from "../../../src/transport/controller/launcher.js";
import { RankClosedError } from "../../../src/transport/controller/rank-carrier.js";
import { collectDiagnostics, tempDir } from "../../helpers.js";
import { SUM_RANK } from "../support.js";

test("the README's fanout loop outlives a rank that exits mid-call: the live ranks' values are logged and the loss is named", async () => {
  const runDir = tempDir();
  const logger = new MetricLogger({ processName: "Controller", runDir, quiet: true });
  const results: number[][] = [];
  let victim = "";
  const seen = await collectDiagnostics(async () => {
    await logger.initBackends({
      console: { loggingMode: "global_reduce" },
      store: { loggingMode: "global_reduce", waitForWrites: true },
    });
    const actor = await spawnRanks({ module: SUM_RANK, ranksPerReplica: 3, processName: "Lossy", logger });
    victim = actor.rankNames[1] ?? "";
    // The README's loop, with a rank that exits (code 3) in the middle of step 1's call.
    for (let step = 0; step < 4; step++) results.push(await actor.fanout<number>("myFnOrExit", step, 1, victim));
    const flushed = await logger.flush(0);
    assert.equal(
      flushed.metrics.find((m) => m.key === "my_sum_rank_metric")?.value,
      8,
      "the live ranks' values: (0 + 2) × 4 steps (the lost rank's unflushed value went with it)",
    );
    assert.deepEqual(flushed.lostRanks, [victim], "the flush names the lost rank");
    assert.deepEqual(
      flushed.alerts?.map((a) => [a.rule, a.state, a.rankName]),
      [["rank_lost", "firing", victim]],
      "the default rank_lost alert fires (no alerts option given)",
    );

    const settled = await actor.fanoutSettled<number>("myFnOrExit", 4, 1, victim);
    assert.deepEqual(
      settled.map((r) => (r.status === "fulfilled" ? [r.rankName, r.value] : [r.rankName, r.lost])),
      [
        [actor.rankNames[0], 0],
        [victim, true],
        [actor.rankNames[2], 2],
      ],
      "fanoutSettled: one result per rank, in rank order; the lost one rejected with lost: true",
    );
    const lost = settled[1];
    assert.ok(lost?.status === "rejected" && lost.reason instanceof RankClosedError);
    await assert.rejects(actor.call(victim, "myFn"), (error: unknown) => {
      assert.ok(error instanceof RankClosedError);
      assert.match(error.message, new RegExp(`rank ${victim} exited with code 3`));
      return true;
    });
    await logger.shutdown();
  });
  assert.deepEqual(
    results,
    [
      [0, 1, 2],
      [0, 2],
      [0, 2],
      [0, 2],
    ],
    "every step resolved: the step the rank died in with the ranks that answered, later steps on the live ranks",
  );
  assert.ok(
    seen.some((d) => d.code === `rank.exited:${victim}` && /exited with code 3/.test(d.message)),
    "the loss is warned about, naming the rank",
  );
  assert.deepEqual(
    storedAlerts(runDir).map((a) => [a.rule, a.rankName, a.state]),
    [
      ["rank_lost", victim, "firing"],
      ["rank_lost", victim, "ended"],
    ],
    "the rank never came back: its alert ended with the run, it is not firing after it",
  );
  closeStores();
});
