/** The store's writer and read API on real SQLite files. */
import assert from "node:assert/strict";
import { sqliteDriver } from "../../src/store/sqlite.js";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, describe, test } from "node:test";
import {
  closeStores,
  config,
  histograms,
  keys,
  listRuns,
  ranks,
  runInfo,
  samples,
  series,
} from "../../src/store/reader.js";
import { CHUNK_POINTS, GLOBAL_RANK } from "../../src/store/schema.js";
import { StoreWriter, type StoreWriterOptions } from "../../src/store/writer.js";
import { tempDir, TS_LOADER } from "../helpers.js";

/** better-sqlite3's `Database` class, of the build this Node.js runs. */
const Database = sqliteDriver();

after(() => closeStores());

function writerFor(runDir: string, extra: Partial<StoreWriterOptions> = {}): StoreWriter {
  return StoreWriter.open({
    runDir,
    role: "controller",
    rank: GLOBAL_RANK,
    rankName: "Controller",
    experiment: "exp",
    trial: "t",
    ...extra,
  });
}

/** Steps 0..n-1 with wall = 1000 + step and value = f(step), written one flush per step. */
function writeSteps(
  w: StoreWriter,
  key: string,
  from: number,
  to: number,
  f: (step: number) => number,
  rank?: number,
): void {
  for (let s = from; s < to; s++)
    w.write({
      scalars: [{ key, step: s, wall: 1000 + s, value: f(s), reduce: "mean", ...(rank === undefined ? {} : { rank }) }],
    });
}

describe("store: values", () => {
  test("NaN and ±Infinity read back as themselves, from rows and from packed chunks", () => {
    const dir = tempDir();
    const w = writerFor(dir);
    const special = [NaN, Infinity, -Infinity, 0, -0.5];
    writeSteps(w, "rows", 0, special.length, (s) => special[s] as number);
    const n = CHUNK_POINTS * 2 + 10;
    const values = Float64Array.from({ length: n }, (_, i) =>
      i % 7 === 0 ? NaN : i % 11 === 0 ? Infinity : i % 13 === 0 ? -Infinity : i,
    );
    w.writeSeries(
      "packed",
      Float64Array.from({ length: n }, (_, i) => i),
      Float64Array.from({ length: n }, (_, i) => 1000 + i),
      values,
    );
    w.finish();

    const rows = series(dir, "rows", { maxPoints: Infinity }).points.map((p) => p.value);
    assert.deepEqual(rows, special);
    const packed = series(dir, "packed", { maxPoints: Infinity });
    assert.equal(packed.points.length, n);
    packed.points.forEach((p, i) => assert.ok(Object.is(p.value, values[i]), `step ${i}: ${p.value} != ${values[i]}`));
  });

  test("a step written twice keeps its last value, in rows and in packed chunks", () => {
    const dir = tempDir();
    const w = writerFor(dir);
    writeSteps(w, "loss", 0, CHUNK_POINTS + 100, (s) => s);
    // Step 5 is packed by now, step CHUNK_POINTS + 50 is a row: rewrite both.
    w.write({
      scalars: [
        { key: "loss", step: 5, wall: 1, value: -5 },
        { key: "loss", step: CHUNK_POINTS + 50, wall: 2, value: -50 },
      ],
    });
    w.write({
      scalars: [
        { key: "loss", step: 7, wall: 3, value: 1 },
        { key: "loss", step: 7, wall: 4, value: 2 },
      ],
    });
    w.finish();
    const points = series(dir, "loss", { maxPoints: Infinity }).points;
    assert.equal(points.length, CHUNK_POINTS + 100);
    assert.deepEqual(
      points.map((p) => p.step),
      Array.from({ length: CHUNK_POINTS + 100 }, (_, i) => i),
    );
    assert.equal(points[5]?.value, -5);
    assert.equal(points[7]?.value, 2);
    assert.equal(points[CHUNK_POINTS + 50]?.value, -50);
  });

  test("resuming from a step replaces the later steps of the earlier (crashed) attempt and keeps the earlier ones", () => {
    const dir = tempDir();
    // The first attempt: another process that writes 3,000 steps and dies without finishing.
    const child = spawnSync(
      process.execPath,
      [
        "--import",
        TS_LOADER,
        fileURLToPath(new URL("./fixtures/rank-writer.ts", import.meta.url)),
        dir,
        "3",
        "3000",
        "crash",
      ],
      { encoding: "utf8" },
    );
    assert.equal(child.status, 0, child.stderr);
    assert.equal(runInfo(dir).status, "crashed", "the attempt whose only process died without finishing reads crashed");

    const second = writerFor(dir, { role: "rank", rank: 3, rankName: "Trainer_0_r3", resumeStep: 1000 });
    writeSteps(second, "loss", 1000, 1500, () => 2, 3);
    second.finish();

    const points = series(dir, "loss", { rank: 3, maxPoints: Infinity }).points;
    assert.equal(points.length, 1500, "steps 0..1499, each once");
    assert.deepEqual(
      points.map((p) => p.step),
      Array.from({ length: 1500 }, (_, i) => i),
    );
    assert.ok(
      points.slice(0, 1000).every((p) => p.value === 3e6 + p.step * 10),
      "steps before the resume kept",
    );
    assert.ok(
      points.slice(1000).every((p) => p.value === 2),
      "resumed steps replaced",
    );
    assert.equal(
      series(dir, "reward", { rank: 3, maxPoints: Infinity }).points.length,
      1000,
      "keys not rewritten are cut at the resume step",
    );
    assert.equal(
      series(dir, "latency", { kind: "stream", rank: 3, maxPoints: Infinity }).points.length,
      4000,
      "stream values of steps >= 1000 removed",
    );
    assert.deepEqual(samples(dir), []);
    const run = runInfo(dir);
    assert.equal(run.resumeStep, 1000);
    assert.equal(run.status, "finished", "the crashed attempt's writer is superseded, not left running");
  });
});

describe("store: downsampling", () => {
  test("a long series comes back as at most maxPoints points that keep the spikes, the dips, a NaN and the last point", () => {
    const dir = tempDir();
    const w = writerFor(dir);
    const n = 200_000;
    const steps = Float64Array.from({ length: n }, (_, i) => i);
    const values = Float64Array.from({ length: n }, (_, i) => Math.sin(i / 1000));
    values[123_457] = 1e6;
    values[54_321] = -1e6;
    values[77_777] = NaN;
    w.writeSeries(
      "loss",
      steps,
      Float64Array.from(steps, (s) => 1000 + s),
      values,
    );
    writeSteps(w, "loss", n, n + 10, () => 0.25); // a few rows after the chunks
    w.finish();

    // 2000 points fold the chunks' points; 300 points (2,000 per bucket) fold their pre-aggregated blocks.
    for (const [x, maxPoints] of [
      ["step", 2000],
      ["wall", 2000],
      ["step", 300],
      ["wall", 300],
    ] as const) {
      const r = series(dir, "loss", { maxPoints, x });
      assert.equal(r.downsampled, true);
      assert.equal(r.total, n + 10);
      assert.ok(r.points.length <= maxPoints && r.points.length > maxPoints / 2, `${r.points.length} points`);
      assert.ok(
        r.points.some((p) => p.step === 123_457 && p.value === 1e6),
        `spike kept (x=${x})`,
      );
      assert.ok(
        r.points.some((p) => p.step === 54_321 && p.value === -1e6),
        `dip kept (x=${x})`,
      );
      assert.ok(
        r.points.some((p) => p.step === 77_777 && Number.isNaN(p.value)),
        `NaN kept (x=${x})`,
      );
      assert.deepEqual(r.points.at(-1), { step: n + 9, wall: 1000 + n + 9, value: 0.25 });
      for (let i = 1; i < r.points.length; i++)
        assert.ok((r.points[i]?.step as number) > (r.points[i - 1]?.step as number), "in x order, no duplicates");
    }
  });

  test("maxPoints must be a usable number", () => {
    const dir = tempDir();
    const w = writerFor(dir);
    writeSteps(w, "loss", 0, 3, (s) => s);
    w.finish();
    assert.throws(() => series(dir, "loss", { maxPoints: 1 }), /maxPoints must be an integer >= 3 or Infinity, got 1/);
    assert.throws(() => series(dir, "loss", { x: "time" as never }), /series x "time" is not valid; valid: step, wall/);
    assert.throws(() => series(dir, "loss", { kind: "tensor" as never }), /valid: scalar, stream, system/);
  });
});

describe("store: live reads by cursor", () => {
  test("series(..., { after: cursor }) returns only the points written since", () => {
    const dir = tempDir();
    const w = writerFor(dir);
    writeSteps(w, "loss", 0, 100, (s) => s);
    const first = series(dir, "loss");
    assert.equal(first.points.length, 100);
    assert.equal(first.cursor, 99);
    const none = series(dir, "loss", { after: first.cursor ?? undefined });
    assert.deepEqual(none.points, []);
    assert.equal(none.cursor, 99, "an empty answer keeps the cursor");

    writeSteps(w, "loss", 100, 100 + CHUNK_POINTS, (s) => s); // crosses a packing
    const next = series(dir, "loss", { after: first.cursor ?? undefined, maxPoints: Infinity });
    assert.equal(next.points.length, CHUNK_POINTS);
    assert.equal(next.points[0]?.step, 100);
    assert.equal(next.cursor, 99 + CHUNK_POINTS);

    w.write({ streams: [1, 2, 3].map((v) => ({ key: "raw", step: 0, wall: 5000 + v, value: v })) });
    const s1 = series(dir, "raw", { kind: "stream" });
    assert.deepEqual(
      s1.points.map((p) => p.value),
      [1, 2, 3],
    );
    w.write({ streams: [{ key: "raw", step: 1, wall: 6000, value: NaN }] });
    const s2 = series(dir, "raw", { kind: "stream", after: s1.cursor ?? undefined });
    assert.equal(s2.points.length, 1);
    assert.ok(Number.isNaN(s2.points[0]?.value));
    w.finish();
  });
});

describe("store: batches", () => {
  test("writeAll stores several batches in one transaction; the later batch wins for a step given twice", () => {
    const dir = tempDir();
    const w = writerFor(dir);
    w.writeAll([
      {
        scalars: [
          { key: "loss", step: 0, wall: 1, value: 1 },
          { key: "loss", step: 1, wall: 1, value: 1 },
        ],
        streams: [{ key: "raw", step: 0, wall: 1, value: 1 }],
      },
      {
        scalars: [{ key: "loss", step: 1, wall: 2, value: 2 }],
        streams: [{ key: "raw", step: 0, wall: 2, value: 2 }],
        hyperparams: { a: 1 },
      },
      { hyperparams: { a: 2, b: 3 } },
    ]);
    w.finish();
    assert.deepEqual(
      series(dir, "loss").points.map((p) => [p.step, p.value]),
      [
        [0, 1],
        [1, 2],
      ],
    );
    const raw = series(dir, "raw", { kind: "stream" });
    assert.deepEqual(
      raw.points.map((p) => p.value),
      [1, 2],
    );
    assert.equal(raw.cursor, 1);
    assert.deepEqual(config(dir), { a: 2, b: 3 });
  });
});

describe("store: packing", () => {
  test("writes of a few dozen points make small chunks that are merged as they pile up; every step stays once", () => {
    const dir = tempDir();
    const w = writerFor(dir);
    const expected = new Map<number, number>();
    const put = (from: number, count: number, value: (s: number) => number): void => {
      const steps = Float64Array.from({ length: count }, (_, i) => from + i);
      w.writeSeries(
        "loss",
        steps,
        Float64Array.from(steps, (s) => 1000 + s),
        Float64Array.from(steps, value),
      );
      for (const s of steps) expected.set(s, value(s));
    };
    for (let t = 0; t < 60; t++) put(t * 20, 20, (s) => s); // 60 small runs
    put(5, 1, () => -5); // an old step: rewrites the chunk it is in
    for (let s = 1200; s < 1205; s++) w.write({ scalars: [{ key: "loss", step: s, wall: 1000 + s, value: s }] }); // rows
    expected.set(5, -5);
    for (let s = 1200; s < 1205; s++) expected.set(s, s);
    put(1205, 3000, (s) => s * 2); // a bulk write after rows and small chunks
    w.finish();

    const { points } = series(dir, "loss", { maxPoints: Infinity });
    assert.equal(points.length, expected.size);
    for (const p of points) assert.equal(p.value, expected.get(p.step), `step ${p.step}`);
    assert.deepEqual(
      points.map((p) => p.step),
      [...expected.keys()].sort((a, b) => a - b),
    );
    const db = new Database(join(dir, "metrics.db"), { readonly: true });
    const chunks = db.prepare("SELECT n FROM chunks ORDER BY first_step").all() as { n: number }[];
    db.close();
    assert.ok(chunks.length <= 4, `${chunks.length} chunks for ${expected.size} points: small ones were merged`);
  });
});

describe("store: streams", () => {
  test("stream values keep arrival order across batches; a cursor inside a packed chunk and downsampling both work", () => {
    const dir = tempDir();
    const w = writerFor(dir, { role: "rank", rank: 2, rankName: "r2" });
    const n = 3 * CHUNK_POINTS + 17;
    const value = (i: number): number => (i === 4321 ? 1e9 : i % 10);
    for (let at = 0; at < n; at += 1000) {
      w.write({
        streams: Array.from({ length: Math.min(1000, n - at) }, (_, j) => ({
          key: "probe",
          step: Math.floor((at + j) / 100),
          wall: 1000 + at + j,
          value: value(at + j),
        })),
      });
    }
    w.finish();
    const all = series(dir, "probe", { kind: "stream", maxPoints: Infinity });
    assert.equal(all.rank, 2);
    assert.equal(all.points.length, n);
    assert.ok(all.points.every((p, i) => p.wall === 1000 + i && p.value === value(i)));
    assert.equal(all.cursor, n - 1);
    const tail = series(dir, "probe", { kind: "stream", after: 2500, maxPoints: Infinity });
    assert.equal(tail.points.length, n - 2501);
    assert.equal(tail.points[0]?.wall, 1000 + 2501);
    const small = series(dir, "probe", { kind: "stream", maxPoints: 90 });
    assert.ok(small.downsampled && small.points.length <= 90);
    assert.ok(
      small.points.some((p) => p.value === 1e9),
      "the spike survives downsampling",
    );
  });
});

describe("store: runs, keys, records", () => {
  test("listRuns finds runs under a root with their metadata; keys, ranks, config, samples and histograms read back", () => {
    const root = tempDir();
    const dir = join(root, "ppo", "seed1");
    const w = writerFor(dir, { experiment: "ppo", trial: "seed1" });
    const rank1 = StoreWriter.open({
      runDir: dir,
      role: "rank",
      rank: 1,
      rankName: "Trainer_0_r1",
      experiment: "ppo",
      trial: "seed1",
    });
    writeSteps(w, "loss", 0, 3, (s) => s);
    writeSteps(rank1, "loss", 0, 3, (s) => s * 10);
    w.write({
      samples: [{ key: "rollout/sample", step: 2, wall: 10, records: [{ prompt: "<b>hi</b>", reward: NaN }] }],
      histograms: [
        {
          key: "len",
          step: 2,
          wall: 11,
          histogram: {
            count: 2,
            min: 1,
            max: 3,
            sum: 4,
            sumSquares: 10,
            bucketLimits: [2, Infinity],
            bucketCounts: [1, 1],
          },
        },
      ],
      system: [{ key: "gpu0/util", step: 0, wall: 12, value: 97 }],
      hyperparams: { lr: 3e-4, model: { layers: 2 } },
    });
    w.writeHyperparams({ seed: 1 });
    assert.equal(runInfo(dir).status, "running");
    rank1.finish();
    assert.equal(runInfo(dir).status, "running", "the controller has not finished yet");
    w.finish();

    const runs = listRuns(root);
    assert.equal(runs.length, 1);
    const run = runs[0];
    assert.equal(run?.experiment, "ppo");
    assert.equal(run?.trial, "seed1");
    assert.equal(run?.status, "finished");
    assert.ok((run?.startedAt ?? 0) <= (run?.endedAt ?? 0));
    assert.deepEqual(
      keys(dir).map((k) => [k.key, k.kind, k.ranks]),
      [
        ["gpu0/util", "system", [-1]],
        ["len", "histogram", [-1]],
        ["loss", "scalar", [-1, 1]],
        ["rollout/sample", "sample", [-1]],
      ],
    );
    assert.deepEqual(ranks(dir), [
      { rank: -1, rankName: "global", role: "global", thread: 0, host: null, label: "global" },
      { rank: 1, rankName: "Trainer_0_r1", role: "rank", thread: 0, host: null, label: "rank 1" },
    ]);
    assert.deepEqual(
      series(dir, "loss", { rank: 1 }).points.map((p) => p.value),
      [0, 10, 20],
    );
    assert.deepEqual(
      series(dir, "loss").points.map((p) => p.value),
      [0, 1, 2],
      "the global series by default",
    );
    assert.deepEqual(config(dir), { lr: 3e-4, model: { layers: 2 }, seed: 1 });
    assert.deepEqual(samples(dir)[0]?.records, [{ prompt: "<b>hi</b>", reward: "NaN" }]);
    assert.deepEqual(histograms(dir, "len")[0]?.histogram.bucketLimits, [2, Infinity]);
    assert.equal(series(dir, "gpu0/util", { kind: "system" }).points[0]?.value, 97);
  });

  test("reading a directory without a store, or a key that does not exist, says so", () => {
    const dir = tempDir();
    assert.throws(() => keys(dir), /no rankscope store in .*metrics\.db is missing/);
    assert.throws(() => listRuns(join(dir, "nope")), /runs root .* does not exist/);
    const w = writerFor(dir);
    w.finish();
    assert.throws(() => series(dir, "nope"), /has no scalar key "nope"/);
  });
});
