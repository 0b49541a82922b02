/**
 * The identity model as a property (issue 20, "Done when"): random topologies — the controller,
 * 2–4 process ranks, 2–4 thread ranks and 2–4 user workers (each in the controller or a process
 * rank) — where every recorder records values known in advance, logged in every mode to every
 * backend at once. Each sink, read with its own reader, and the dashboard's JSON API return exactly
 * what each recorder recorded, under its own name:
 * - `global_reduce`: the sum over every recorder (the controller's values included);
 * - `per_rank_reduce`: per identity (the controller, each rank), its own values and its user
 *   workers' (a process is one rank);
 * - `per_rank_no_reduce`: per recorder (user workers apart), every raw value in order.
 * Sinks: the store (`rankscope/store`), jsonl files, the console, TensorBoard (its Python reader,
 * 2.21 from the test venv), W&B (the strict local server: the W&B cloud cannot run here), a real
 * Prometheus (remote write from every rank, `sum by (rank)`: scraping needs a port per rank, which
 * test/core/rank-identity/controller-line.test.ts and the Prometheus tests cover), OTLP (the
 * official protos), and the dashboard's `/api/*`.
 * A few fixed seeds of fast-check keep `npm test` to a few minutes with real processes.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { keys, ranks, series } from "../../../src/store/reader.js";
import {
  CONTROLLER_LINE,
  GLOBAL_LINE,
  lineDisplayLabel,
  lineOf,
  recorderPath,
  type RecorderRole,
} from "../../../src/core/rank-identity.js";
import { startDashboard } from "../../../src/ui/server.js";
import { PrometheusServer, prometheusMissing, promValue } from "../../backends/prometheus/prometheus-server.js";
import { startServer } from "../../backends/wandb/wandb-helpers.js";
import type { StrictWandbServer } from "../../backends/wandb/wandb-server.js";
import { pythonKit } from "../../helpers/python.js";
import { captureStdout, tempDir, waitFor } from "../../helpers.js";
import { MetricLogger, record, spawnRanks, startWorkers, stopWorkers, workerRecord } from "./fixtures/recorder.mjs";
import {
  consoleStreams,
  OtlpReceiver,
  otlpAttributes,
  otlpValues,
  readTensorBoard,
  type OtlpRequest,
} from "./sinks.js";

/**
 * The built package (dist/, plain node), as users' compiled jobs run it: the controller's logger,
 * its ranks (processes and threads) and the user workers start without tsx, which took ~10 s of
 * each seed's ~25 s under load. The sources' own tests cover the same code under tsx.
 */
const RANK_MODULE = new URL("./fixtures/recorder.mjs", import.meta.url);
const KEY = "v";
const STEPS = 2;
/** Few, well-chosen seeds: each is a whole job with real processes (20: the fewest of each; 50: the most, 4 user workers, one the controller's; 7: between). */
const SEEDS = [20, 50, 7];
const API_KEY = "local-test-key-6f1c0de0b1e2a3c4d5e6f708192a3b4c";

/** A topology: how many of each recorder, whose the user workers are, how many values each records per step. */
const topologies = fc.record({
  processRanks: fc.integer({ min: 2, max: 4 }),
  threadRanks: fc.integer({ min: 2, max: 4 }),
  /** Each user worker's owner: -1 the controller, else a process rank (taken modulo their number). */
  workerOwners: fc.array(fc.integer({ min: -1, max: 3 }), { minLength: 2, maxLength: 4 }),
  /** Values per step of recorder k (cycled). */
  counts: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 4, maxLength: 16 }),
});
type Topology = typeof topologies extends fc.Arbitrary<infer T> ? T : never;

/** One recorder of a job: who it is, its line, and how it records. */
interface Recorder {
  readonly role: RecorderRole;
  readonly rank: number;
  readonly thread: number;
  /** The identity's name (the controller's processName, a rank's rankName). */
  readonly name: string;
  /** Its stream lines' prefix on the console. */
  readonly console: string;
  /** Values recorded at `step`, known in advance. */
  values(step: number): number[];
  record(step: number): Promise<void>;
}

const lineOfRecorder = (r: Recorder): number => lineOf(r);
/** The line of a recorder's identity (a user worker's owner). */
const ownerLine = (r: Recorder): number => lineOf({ ...r, thread: 0 });
const sum = (values: readonly number[]): number => values.reduce((a, v) => a + v, 0);

const tensorboard = pythonKit("tensorboard");
const prometheus = prometheusMissing();

describe("every recorder's values, in every sink, under its own name", () => {
  let wandb: StrictWandbServer;
  let prom: PrometheusServer | undefined;
  const otlp = new OtlpReceiver();
  before(async () => {
    wandb = await startServer();
    await otlp.start();
    if (prometheus === undefined) prom = await PrometheusServer.start();
  });
  after(async () => {
    await wandb.stop();
    await otlp.stop();
    await prom?.stop();
  });

  for (const seed of SEEDS) {
    const [topology] = fc.sample(topologies, { seed, numRuns: 1 });
    if (topology === undefined) throw new Error("fast-check gave no sample");
    it(
      `seed ${seed}: ${topology.processRanks} process ranks, ${topology.threadRanks} thread ranks, ${topology.workerOwners.length} user workers`,
      { timeout: 240_000 },
      async () => {
        await checkTopology(seed, topology, { wandb, otlp, prom });
      },
    );
  }
});

/** The receiving ends every seed shares. */
interface Receivers {
  readonly wandb: StrictWandbServer;
  readonly otlp: OtlpReceiver;
  readonly prom: PrometheusServer | undefined;
}

async function checkTopology(seed: number, topology: Topology, { wandb, otlp, prom }: Receivers): Promise<void> {
  const root = tempDir();
  const runDir = join(root, "exp", `seed${seed}`);
  const wandbOptions = {
    baseUrl: wandb.baseUrl,
    apiKey: API_KEY,
    entity: "team",
    project: "ident",
    requestTimeoutMs: 10_000,
    finishTimeoutMs: 30_000,
    sendIntervalMs: 50,
  };
  const logger = new MetricLogger({ runDir, processName: "Learner", flushDeadlineMs: 40_000, quiet: true });
  const recorders: Recorder[] = [];
  const otlpFrom = otlp.requests.length;
  const stdout = await captureStdout(async () => {
    try {
      await logger.initBackends({
        store_g: { type: "store", loggingMode: "global_reduce", waitForWrites: true },
        store_r: { type: "store", loggingMode: "per_rank_reduce", waitForWrites: true },
        store_s: { type: "store", loggingMode: "per_rank_no_reduce", waitForWrites: true },
        jsonl_g: { type: "jsonl", loggingMode: "global_reduce", file: "global.jsonl" },
        jsonl_r: { type: "jsonl", loggingMode: "per_rank_reduce" },
        jsonl_s: { type: "jsonl", loggingMode: "per_rank_no_reduce" },
        console: { loggingMode: "per_rank_no_reduce" },
        tb_g: { type: "tensorboard", loggingMode: "global_reduce", dir: "tb-global" },
        tb_r: { type: "tensorboard", loggingMode: "per_rank_reduce", dir: "tb-reduce" },
        tb_s: { type: "tensorboard", loggingMode: "per_rank_no_reduce", dir: "tb-stream" },
        wandb_g: { type: "wandb", loggingMode: "global_reduce", runId: `g${seed}`, ...wandbOptions },
        wandb_r: { type: "wandb", loggingMode: "per_rank_reduce", runId: `r${seed}`, ...wandbOptions },
        wandb_s: { type: "wandb", loggingMode: "per_rank_no_reduce", runId: `s${seed}`, ...wandbOptions },
        otlp: { loggingMode: "per_rank_reduce", url: otlp.url, serviceName: `seed${seed}` },
        ...(prom === undefined
          ? {}
          : {
              prometheus_remote_write: {
                loggingMode: "per_rank_reduce",
                url: `${prom.url}/api/v1/write`,
                labels: { seed: String(seed) },
              },
            }),
      });
      const procs = await spawnRanks({
        module: RANK_MODULE,
        ranksPerReplica: topology.processRanks,
        processName: "Proc",
        logger,
      });
      const threads = await spawnRanks({
        module: RANK_MODULE,
        ranksPerReplica: topology.threadRanks,
        processName: "Thr",
        kind: "thread",
        logger,
      });
      const valuesOf =
        (k: number) =>
        (step: number): number[] =>
          Array.from(
            { length: topology.counts[k % topology.counts.length] ?? 1 },
            (_, i) => (k + 1) * 1000 + step * 100 + i,
          );
      const add = (r: Omit<Recorder, "values">): void =>
        void recorders.push({ ...r, values: valuesOf(recorders.length) });
      add({
        role: "controller",
        rank: 0,
        thread: 0,
        name: "Learner",
        console: "[controller] [Learner]",
        record: async (step) => record(KEY, valuesOf(0)(step), "sum"),
      });
      for (const group of [procs, threads]) {
        for (const identity of group.ranks) {
          const k = recorders.length;
          const prefix = `[${identity.localRank}] [${identity.processName}-${identity.localRank}/${identity.localWorldSize}]`;
          add({
            role: "rank",
            rank: identity.rank,
            thread: 0,
            name: identity.rankName,
            console: prefix,
            record: async (step) => void (await group.call(identity.rankName, "record", KEY, valuesOf(k)(step), "sum")),
          });
        }
      }
      // User workers, each in the controller or a process rank; the n-th of its process is its index there.
      const perOwner = new Map<number, number>();
      for (const owner of topology.workerOwners) {
        const k = recorders.length;
        if (owner < 0) {
          const index = perOwner.get(-1) ?? 0;
          perOwner.set(-1, index + 1);
          const [thread = 0] = await startWorkers(1);
          add({
            role: "controller",
            rank: 0,
            thread,
            name: "Learner",
            console: `[controller] [Learner] [thread ${thread}]`,
            record: (step) => workerRecord(index, KEY, valuesOf(k)(step), "sum"),
          });
        } else {
          const identity = procs.ranks[owner % topology.processRanks];
          if (identity === undefined) throw new Error("no such process rank");
          const index = perOwner.get(identity.rank) ?? 0;
          perOwner.set(identity.rank, index + 1);
          const [thread = 0] = await procs.call<number[]>(identity.rankName, "startWorkers", 1);
          const prefix = `[${identity.localRank}] [${identity.processName}-${identity.localRank}/${identity.localWorldSize}] [thread ${thread}]`;
          add({
            role: "rank",
            rank: identity.rank,
            thread,
            name: identity.rankName,
            console: prefix,
            record: async (step) =>
              void (await procs.call(identity.rankName, "workerRecord", index, KEY, valuesOf(k)(step), "sum")),
          });
        }
      }
      for (let step = 0; step < STEPS; step++) {
        for (const r of recorders) await r.record(step);
        await logger.flush(step);
      }
      if (prom !== undefined) {
        // Scraped every second: wait until the last flush is in, then compare.
        const want = JSON.stringify(prometheusTotals(recorders));
        const totals = async (): Promise<Record<string, number>> =>
          Object.fromEntries(
            (await prom.query(`sum by (rank) (${KEY}_total{seed="${seed}"})`)).map((s) => [
              s.metric["rank"] ?? "",
              promValue(s.value?.[1] ?? "NaN"),
            ]),
          );
        await waitFor(async () => JSON.stringify(sortedEntries(await totals())) === want, {
          timeoutMs: 60_000,
          what: "Prometheus to receive every identity's last flush",
        }).catch(async (error: unknown) => {
          throw new Error(
            `${String(error)}: Prometheus has ${JSON.stringify(await totals())}, rankscope logged ${want}`,
          );
        });
      }
      await stopWorkers();
    } finally {
      await logger.shutdown();
    }
  });
  const expected = expectations(recorders);
  checkStore(runDir, recorders, expected);
  checkJsonl(runDir, recorders, expected);
  checkConsole(stdout, recorders, expected);
  checkWandb(wandb, seed, recorders, expected);
  checkOtlp(
    otlp.requests
      .slice(otlpFrom)
      .filter(
        (r) => otlpAttributes(r.resource_metrics[0]?.resource.attributes ?? [])["service.name"] === `seed${seed}`,
      ),
    recorders,
    expected,
  );
  if (tensorboard.python !== null) checkTensorBoard(tensorboard.python, runDir, recorders, expected);
  await checkDashboard(root, `exp/seed${seed}`, recorders, expected);
}

/** What every sink must hold: the global line, each identity's reduced line, each recorder's raw values. */
interface Expected {
  /** Per step, the sum over every recorder. */
  readonly global: number[];
  /** Identity line → per step, the sum of its own and its workers' values. */
  readonly reduced: Map<number, number[]>;
  /** Recorder line → every raw value in order, with its step. */
  readonly raw: Map<number, { step: number; value: number }[]>;
}

function expectations(recorders: readonly Recorder[]): Expected {
  const steps = Array.from({ length: STEPS }, (_, s) => s);
  const reduced = new Map<number, number[]>();
  const raw = new Map<number, { step: number; value: number }[]>();
  for (const r of recorders) {
    const owner = ownerLine(r);
    reduced.set(
      owner,
      steps.map((s) => (reduced.get(owner)?.[s] ?? 0) + sum(r.values(s))),
    );
    raw.set(
      lineOfRecorder(r),
      steps.flatMap((step) => r.values(step).map((value) => ({ step, value }))),
    );
  }
  return { global: steps.map((s) => sum(recorders.map((r) => sum(r.values(s))))), reduced, raw };
}

function checkStore(runDir: string, recorders: readonly Recorder[], expected: Expected): void {
  const scalar = (line: number): number[] =>
    series(runDir, KEY, { rank: line, maxPoints: Infinity }).points.map((p) => p.value);
  assert.deepEqual(scalar(GLOBAL_LINE), expected.global, "store: the global line");
  for (const [line, values] of expected.reduced) assert.deepEqual(scalar(line), values, `store: line ${line}, reduced`);
  for (const [line, values] of expected.raw) {
    const points = series(runDir, KEY, { kind: "stream", rank: line, maxPoints: Infinity }).points;
    assert.deepEqual(
      points.map((p) => [p.step, p.value]),
      values.map((v) => [v.step, v.value]),
      `store: line ${line}, raw`,
    );
  }
  const info = keys(runDir).filter((k) => k.key === KEY);
  assert.deepEqual(
    info.find((k) => k.kind === "stream")?.ranks.length,
    expected.raw.size,
    "no stream line but the recorders'",
  );
  assert.deepEqual(
    info.find((k) => k.kind === "scalar")?.ranks.length,
    expected.reduced.size + 1,
    "no scalar line but the identities' and the global one",
  );
  const names = new Map(ranks(runDir).map((r) => [r.rank, r]));
  for (const r of recorders) {
    const line = names.get(lineOfRecorder(r));
    assert.deepEqual(
      [line?.rankName, line?.role, line?.thread],
      [recorderPath({ rankName: r.name, thread: r.thread }), r.role, r.thread],
      `store: the name of line ${lineOfRecorder(r)}`,
    );
  }
}

/** A jsonl file's lines. */
function jsonLines(file: string): Record<string, unknown>[] {
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l["key"] === KEY);
}

function checkJsonl(runDir: string, recorders: readonly Recorder[], expected: Expected): void {
  assert.deepEqual(
    jsonLines(join(runDir, "global.jsonl")).map((l) => l["value"]),
    expected.global,
    "jsonl: global",
  );
  for (const r of recorders.filter((x) => x.thread === 0)) {
    const lines = jsonLines(join(runDir, `metrics-${r.name}.jsonl`));
    const who = r.role === "controller" ? { role: "controller" } : {};
    assert.deepEqual(
      lines.filter((l) => "reduce" in l).map((l) => [l["value"], l["rankName"], l["role"]]),
      (expected.reduced.get(ownerLine(r)) ?? []).map((v) => [v, r.name, who.role]),
      `jsonl: ${r.name}, reduced`,
    );
    for (const w of recorders.filter((x) => ownerLine(x) === ownerLine(r))) {
      const own = lines.filter((l) => !("reduce" in l) && (l["thread"] ?? 0) === w.thread);
      assert.ok(
        own.every((l) =>
          w.role === "controller" ? l["role"] === "controller" && !("rank" in l) : l["rank"] === w.rank,
        ),
        `jsonl: ${r.name}, thread ${w.thread}: who`,
      );
      assert.deepEqual(
        own.map((l) => [l["step"], l["value"]]),
        (expected.raw.get(lineOfRecorder(w)) ?? []).map((v) => [v.step, v.value]),
        `jsonl: ${r.name}, thread ${w.thread}, raw`,
      );
    }
  }
}

function checkConsole(stdout: string, recorders: readonly Recorder[], expected: Expected): void {
  const printed = consoleStreams(stdout, KEY);
  assert.equal(
    printed.size,
    recorders.length,
    `console: one stream per recorder, got ${[...printed.keys()].join(", ")}`,
  );
  for (const r of recorders)
    assert.deepEqual(
      printed.get(r.console),
      (expected.raw.get(lineOfRecorder(r)) ?? []).map((v) => v.value),
      `console: ${r.console}`,
    );
}

function checkWandb(server: StrictWandbServer, seed: number, recorders: readonly Recorder[], expected: Expected): void {
  const history = (name: string): Record<string, unknown>[] => server.history(name);
  assert.deepEqual(
    history(`g${seed}`)
      .filter((row) => KEY in row)
      .map((row) => row[KEY]),
    expected.global,
    "wandb: the global run",
  );
  for (const r of recorders.filter((x) => x.thread === 0)) {
    assert.deepEqual(
      history(`r${seed}_${r.name}`)
        .filter((row) => KEY in row)
        .map((row) => row[KEY]),
      expected.reduced.get(ownerLine(r)),
      `wandb: ${r.name}'s reduced run`,
    );
    const rows = history(`s${seed}_${r.name}`);
    for (const w of recorders.filter((x) => ownerLine(x) === ownerLine(r))) {
      const key = w.thread === 0 ? KEY : `thread-${w.thread}/${KEY}`;
      assert.deepEqual(
        rows.filter((row) => key in row).map((row) => [row["global_step"], row[key]]),
        (expected.raw.get(lineOfRecorder(w)) ?? []).map((v) => [v.step, v.value]),
        `wandb: ${r.name}'s raw run, ${key}`,
      );
    }
  }
}

/** What `sum by (rank) (v_total)` must give: each identity's total (its workers' included), by its `rank` label. */
function prometheusTotals(recorders: readonly Recorder[]): [string, number][] {
  const want: Record<string, number> = {};
  for (const r of recorders) {
    const label = r.role === "controller" ? "controller" : String(r.rank);
    want[label] = (want[label] ?? 0) + sum(Array.from({ length: STEPS }, (_, s) => sum(r.values(s))));
  }
  return sortedEntries(want);
}

const sortedEntries = (o: Record<string, number>): [string, number][] =>
  Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

function checkOtlp(requests: readonly OtlpRequest[], recorders: readonly Recorder[], expected: Expected): void {
  const last = new Map<string, number>();
  for (const request of requests) {
    for (const rm of request.resource_metrics) {
      const attributes = otlpAttributes(rm.resource.attributes);
      const who = attributes["rankscope.role"] === "controller" ? "controller" : `rank ${attributes["rankscope.rank"]}`;
      const values = otlpValues(
        rm.scope_metrics.flatMap((s) => s.metrics),
        KEY,
      );
      if (values.length > 0) last.set(who, values.at(-1) ?? NaN);
    }
  }
  const want = new Map<string, number>();
  for (const [line, values] of expected.reduced)
    want.set(line === CONTROLLER_LINE ? "controller" : `rank ${line}`, sum(values));
  assert.deepEqual(
    Object.fromEntries(last),
    Object.fromEntries(want),
    "otlp: each identity's cumulative sum under its own resource",
  );
  assert.ok(recorders.length > 0);
}

function checkTensorBoard(python: string, runDir: string, recorders: readonly Recorder[], expected: Expected): void {
  const points = (runs: Record<string, Record<string, [number, number][]>>, run: string): [number, number][] =>
    runs[run]?.[KEY] ?? [];
  const [global = {}, reduce = {}, stream = {}] = readTensorBoard(
    python,
    ["tb-global", "tb-reduce", "tb-stream"].map((dir) => join(runDir, dir)),
  );
  assert.deepEqual(
    points(global, ".").map(([, v]) => v),
    expected.global,
    "tensorboard: the global run",
  );
  for (const r of recorders) {
    const run = recorderPath({ rankName: r.name, thread: r.thread });
    if (r.thread === 0)
      assert.deepEqual(
        points(reduce, r.name).map(([step, v]) => [step, v]),
        (expected.reduced.get(ownerLine(r)) ?? []).map((v, step) => [step, v]),
        `tensorboard: run ${r.name}, reduced`,
      );
    assert.deepEqual(
      points(stream, run).map(([step, v]) => [step, v]),
      (expected.raw.get(lineOfRecorder(r)) ?? []).map((v) => [v.step, v.value]),
      `tensorboard: run ${run}, raw`,
    );
  }
  assert.equal(
    Object.keys(stream).length,
    recorders.length,
    `tensorboard: one raw run per recorder, got ${Object.keys(stream).join(", ")}`,
  );
}

async function checkDashboard(
  root: string,
  run: string,
  recorders: readonly Recorder[],
  expected: Expected,
): Promise<void> {
  const dashboard = await startDashboard({ root, port: 0 });
  try {
    const get = async <T>(path: string): Promise<T> => {
      const response = await fetch(new URL(path, dashboard.url));
      assert.equal(response.status, 200, `${path}: ${await response.clone().text()}`);
      return (await response.json()) as T;
    };
    const api = await get<{ rankLabels: Record<string, string>; rankNames: Record<string, string> }>(
      `/api/keys?run=${run}`,
    );
    for (const r of recorders) {
      const line = lineOfRecorder(r);
      assert.equal(
        api.rankLabels[String(line)],
        lineDisplayLabel(line, recorderPath({ rankName: r.name, thread: r.thread })),
        `dashboard: the label of line ${line}`,
      );
    }
    const lines = [GLOBAL_LINE, ...expected.reduced.keys()];
    const answer = await get<{ lines: { values: number[] }[] }>(
      `/api/lines?run=${run}&lines=${encodeURIComponent(JSON.stringify(lines.map((l) => [KEY, l === GLOBAL_LINE ? null : l, null])))}`,
    );
    assert.deepEqual(
      answer.lines.map((l) => l.values),
      [expected.global, ...expected.reduced.values()],
      "dashboard: /api/lines, global and per identity",
    );
    const stream = await get<{ ranks: number[]; values: number[] }>(`/api/stream?run=${run}&key=${KEY}`);
    const byLine = new Map<number, number[]>();
    stream.ranks.forEach((line, i) => byLine.set(line, [...(byLine.get(line) ?? []), stream.values[i] ?? NaN]));
    for (const [line, values] of expected.raw)
      assert.deepEqual(
        byLine.get(line),
        values.map((v) => v.value),
        `dashboard: /api/stream, line ${line}`,
      );
    assert.equal(byLine.size, expected.raw.size);
  } finally {
    await dashboard.close();
  }
}
