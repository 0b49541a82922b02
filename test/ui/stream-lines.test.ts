/**
 * `/api/lines?kind=stream` with a line `[key, rank, …]` answers that rank's raw values only, over
 * the local root and over a team server the run was synced to: two process ranks that each record
 * values of their own (rank 0 in [100, 112), rank 1 in [200, 212)) each get their own values back,
 * and a line with no rank (`null`) still gets every rank's.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { closeStores } from "../../src/store/reader.js";
import { StoreWriter } from "../../src/store/writer.js";
import { tempDir } from "../helpers.js";
import { openRun } from "./seed.js";
import { SOURCES, type Served } from "./web/support.js";

const PER_RANK = 12;
const valuesOf = (rank: number): number[] => Array.from({ length: PER_RANK }, (_, i) => 100 * (rank + 1) + i);

/** A run whose two ranks each write their own stream of `probe/loss` from their own process (store writer). */
function twoRankStreams(root: string): void {
  const t0 = Date.now() - 60_000;
  const controller = openRun(root, "streams", "two");
  for (const rank of [0, 1]) {
    const writer = StoreWriter.open({
      runDir: join(root, "streams", "two"),
      role: "rank",
      rank,
      rankName: `Trainer_0_r${rank}`,
      experiment: "streams",
      trial: "two",
    });
    writer.write({
      streams: valuesOf(rank).map((value, i) => ({
        key: "probe/loss",
        step: i,
        wall: t0 + i * 100 + rank,
        value,
        rank,
      })),
    });
    writer.finish("finished");
  }
  controller.finish("finished");
}

interface StreamLine {
  ranks: number[];
  values: number[];
  cursor: string | null;
}

async function lines(served: Served, lineList: unknown[]): Promise<StreamLine[]> {
  const url = new URL(served.url);
  url.pathname = "/api/lines";
  url.hash = "";
  url.searchParams.set("run", "streams/two");
  url.searchParams.set("kind", "stream");
  url.searchParams.set("lines", JSON.stringify(lineList));
  const res = await fetch(url);
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { lines: StreamLine[] };
  return body.lines;
}

for (const [name, serve, skip] of SOURCES)
  describe(`per-rank stream lines: ${name}`, { skip }, () => {
    let served: Served;

    before(async () => {
      const root = tempDir("rankscope-ui-stream-lines-");
      twoRankStreams(root);
      closeStores();
      served = await serve(root);
    });

    after(async () => {
      await served?.close();
    });

    it("answers each rank's line with that rank's values only", async () => {
      const [zero, one, all] = await lines(served, [
        ["probe/loss", 0, null],
        ["probe/loss", 1, null],
        ["probe/loss", null, null],
      ]);
      assert.ok(zero !== undefined && one !== undefined && all !== undefined);
      assert.deepEqual(zero.values, valuesOf(0), "rank 0's line");
      assert.deepEqual([...new Set(zero.ranks)], [0]);
      assert.deepEqual(one.values, valuesOf(1), "rank 1's line");
      assert.deepEqual([...new Set(one.ranks)], [1]);
      assert.deepEqual(
        [...all.values].sort((a, b) => a - b),
        [...valuesOf(0), ...valuesOf(1)],
        "a line with no rank has every rank's values",
      );
    });

    it("continues a rank's line after its cursor with nothing of the other rank", async () => {
      const [first] = await lines(served, [["probe/loss", 1, null]]);
      assert.ok(first?.cursor !== null && first?.cursor !== undefined);
      const [next] = await lines(served, [["probe/loss", 1, first.cursor]]);
      assert.deepEqual(next?.values, [], "no newer values of rank 1, and none of rank 0");
    });

    it("answers a rank the stream has no values of with an empty line", async () => {
      const [none] = await lines(served, [["probe/loss", 5, null]]);
      assert.deepEqual(none?.values, []);
    });
  });
