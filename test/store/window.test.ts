/** The read API's windows (`after` and `before`) and last values, on real SQLite files. */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, test } from "node:test";
import { closeStores, lastValues, ranks, series } from "../../src/store/reader.js";
import { CHUNK_POINTS, GLOBAL_RANK } from "../../src/store/schema.js";
import { StoreWriter } from "../../src/store/writer.js";
import { tempDir } from "../helpers.js";

const dirs: string[] = [];
after(() => {
  closeStores();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function run(): { dir: string; w: StoreWriter } {
  const dir = tempDir("rankscope-window-");
  dirs.push(dir);
  return {
    dir,
    w: StoreWriter.open({
      runDir: dir,
      role: "controller",
      rank: GLOBAL_RANK,
      rankName: "Controller",
      experiment: "e",
      trial: "t",
    }),
  };
}

describe("store: windows", () => {
  // Packed chunks (steps 0..N-1) then recent rows (N..N+99): a window can cut both.
  const N = CHUNK_POINTS * 10;
  const { dir, w } = run();
  w.writeSeries(
    "long",
    Float64Array.from({ length: N }, (_, i) => i),
    Float64Array.from({ length: N }, (_, i) => 1000 + i),
    Float64Array.from({ length: N }, (_, i) => Math.sin(i / 50) + (i === 7777 ? 100 : 0)),
  );
  for (let s = N; s < N + 100; s++) w.write({ scalars: [{ key: "long", step: s, wall: 1000 + s, value: -s }] });
  w.write({
    streams: Array.from({ length: 500 }, (_, i) => ({ key: "probe", step: i >> 2, wall: 5000 + i, value: i, rank: 0 })),
  });
  w.finish();

  test("before bounds a read from above: the raw points of a window anywhere in a long series", () => {
    for (const [from, to] of [
      [CHUNK_POINTS - 10, CHUNK_POINTS + 10], // across a chunk edge
      [5000, 6500], // inside and across chunks
      [N - 5, N + 5], // chunks into rows
      [N + 10, N + 20], // rows only
      [-1, 3], // the start
    ] as const) {
      const r = series(dir, "long", { after: from, before: to, maxPoints: 2000 });
      assert.equal(r.downsampled, false, `${from}..${to}`);
      assert.deepEqual(
        r.points.map((p) => p.step),
        Array.from({ length: to - from - 1 }, (_, i) => from + 1 + i),
        `${from}..${to}`,
      );
      assert.equal(r.total, to - from - 1);
      assert.equal(r.cursor, to - 1);
    }
    const empty = series(dir, "long", { after: 10, before: 11 });
    assert.deepEqual(empty.points, []);
  });

  test("a window larger than maxPoints is downsampled within the window, keeping its spike", () => {
    const r = series(dir, "long", { after: 999, before: 9000, maxPoints: 300 });
    assert.equal(r.downsampled, true);
    assert.equal(r.total, 8000);
    assert.ok(r.points.length <= 300 && r.points.length > 100, `${r.points.length}`);
    assert.ok(
      r.points.every((p) => p.step >= 1000 && p.step < 9000),
      "nothing outside the window",
    );
    assert.ok(
      r.points.some((p) => p.step === 7777 && p.value > 99),
      "the spike kept",
    );
    // Without a window the whole series (chunks folded by their blocks) still ends at its last step.
    const all = series(dir, "long", { maxPoints: 300 });
    assert.equal(all.points.at(-1)?.step, N + 99);
  });

  test("before on a stream counts arrivals", () => {
    const r = series(dir, "probe", { kind: "stream", rank: 0, after: 99, before: 200, maxPoints: Infinity });
    assert.deepEqual(
      r.points.map((p) => p.value),
      Array.from({ length: 100 }, (_, i) => 100 + i),
    );
  });

  test("before must be a number", () => {
    assert.throws(() => series(dir, "long", { before: "5" as unknown as number }), /before must be a number/);
  });
});

describe("store: rank names", () => {
  test("the writer that writes data names its rank; one that may not claim (claimRankName: false) names it only when no one else does", () => {
    for (const order of ["weak first", "weak last"] as const) {
      const dir = tempDir("rankscope-names-");
      dirs.push(dir);
      const open = (rankName: string, claimRankName: boolean): StoreWriter =>
        StoreWriter.open({ runDir: dir, role: "rank", rank: 0, rankName, experiment: "e", trial: "t", claimRankName });
      const data = { scalars: [{ key: "x", step: 0, wall: 1, value: 1 }] };
      if (order === "weak first") {
        const weak = open("Controller", false);
        weak.write(data);
        const real = open("Trainer_0_r0", true);
        real.write(data);
        weak.finish();
        real.finish();
      } else {
        const real = open("Trainer_0_r0", true);
        real.write(data);
        const weak = open("Controller", false);
        weak.write(data);
        weak.finish();
        real.finish();
      }
      assert.deepEqual(
        ranks(dir),
        [{ rank: 0, rankName: "Trainer_0_r0", role: "rank", thread: 0, host: null, label: "rank 0" }],
        order,
      );
    }
    // Alone, even a writer that may not claim names its rank.
    const { dir: alone, w } = run();
    w.finish();
    const weak = StoreWriter.open({
      runDir: alone,
      role: "rank",
      rank: 0,
      rankName: "Controller",
      experiment: "e",
      trial: "t",
      claimRankName: false,
    });
    weak.finish();
    assert.deepEqual(
      ranks(alone).find((r) => r.rank === 0),
      { rank: 0, rankName: "Controller", role: "rank", thread: 0, host: null, label: "rank 0" },
    );
  });
});

describe("store: last values", () => {
  test("the last point of each scalar key: the global line, else the lowest rank; from rows or chunks", () => {
    const { dir, w } = run();
    w.writeSeries(
      "packed",
      Float64Array.from({ length: 3000 }, (_, i) => i),
      Float64Array.from({ length: 3000 }, (_, i) => i),
      Float64Array.from({ length: 3000 }, (_, i) => i * 2),
    );
    w.write({
      scalars: [
        { key: "rows", step: 0, wall: 1, value: 1 },
        { key: "rows", step: 1, wall: 2, value: NaN },
        { key: "ranked", step: 4, wall: 1, value: 10, rank: 2 },
        { key: "ranked", step: 4, wall: 1, value: 20, rank: 1 },
        { key: "both", step: 3, wall: 1, value: 5 },
        { key: "both", step: 9, wall: 1, value: 7, rank: 0 },
      ],
    });
    w.finish();
    const got = Object.fromEntries(lastValues(dir).map((v) => [v.key, [v.rank, v.step, v.value]]));
    assert.deepEqual(got, {
      both: [GLOBAL_RANK, 3, 5],
      packed: [GLOBAL_RANK, 2999, 5998],
      ranked: [1, 4, 20],
      rows: [GLOBAL_RANK, 1, NaN],
    });
  });
});
