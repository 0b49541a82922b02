/**
 * Straggler attribution at 1,024 ranks: controller CPU per flush, against the target of ≤ 1 ms
 * (issue 22). Ranks reach the controller as 16 host agents × 64 ranks (their timings forwarded in
 * columns) or as 1,024 direct ranks (one `RankTiming` each); every rank traced a `train_step` with
 * two phases and an all-reduce barrier, a few ranks slower.
 *
 * Measured in this process (no other thread: `process.cpuUsage()` is this thread's CPU), median of
 * rounds of 200 flushes each:
 * - attribution alone: the flush's timings gathered into columns (`answersTiming`) and analysed
 *   (`StragglerTracker.observe`: medians, bars, top-k, chronic window, internal keys, the record);
 * - what the store backend does with the record on the controller's thread (`toRankTimingWrite`);
 * - a whole `MetricLogger.flush` over 16 in-process host handles answering with those timings
 *   (100 keys merged), with attribution on and off, paired in the same run: the difference is
 *   what attribution adds to a real flush;
 * - for reference, parsing the 16 agents' timing headers (JSON), which the transport already does.
 */
import { loadavg, tmpdir } from "node:os";
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { MetricLogger } from "../src/controller/metric-logger.js";
import { answersTiming } from "../src/controller/rank-answers.js";
import { StragglerTracker } from "../src/controller/stragglers.js";
import type { KeyState } from "../src/core/key-state.js";
import {
  appendRankTiming,
  emptyTimingColumns,
  type HostTiming,
  type RankTiming,
  type TimingColumns,
} from "../src/core/step-timing.js";
import { toRankTimingWrite } from "../src/store/rank-timing.js";
import type { RankGroupHandle, RankGroupSnapshot, RankSnapshot } from "../src/pipeline/rank-handle.js";
import { median } from "./harness.js";

const HOSTS = 16;
const PER_HOST = 64;
const RANKS = HOSTS * PER_HOST;
const FLUSHES = 200;
const ROUNDS = 7;

/** Rank r's timings at flush f: ~200 ms steps, ranks 17 and 600 slower at some flushes. */
function rankTiming(r: number, f: number): RankTiming {
  const jitter = ((r * 7919 + f * 104729) % 97) / 10;
  const slow = (r === 17 && f % 3 === 0) || r === 600 ? 80 : 0;
  const compute = 120 + jitter + slow;
  const wait = 60 - jitter / 2 - slow * 0.9;
  return {
    rank: r,
    host: `node-${Math.floor(r / PER_HOST)}`,
    tracers: [
      {
        prefix: "train_step",
        steps: 1,
        totalMs: compute + Math.max(1, wait) + 10,
        phases: [
          { name: "forward", kind: "phase", count: 1, totalMs: compute * 0.4 },
          { name: "backward", kind: "phase", count: 1, totalMs: compute * 0.6 },
          { name: "allreduce", kind: "barrier", count: 1, totalMs: Math.max(1, wait) },
        ],
      },
    ],
  };
}

/** Host h's forwarded timings at flush f, as its agent sends them (and as JSON). */
function hostTiming(h: number, f: number): { columns: TimingColumns; json: string } {
  const columns = emptyTimingColumns();
  for (let i = 0; i < PER_HOST; i++) {
    const r = h * PER_HOST + i;
    appendRankTiming(
      columns,
      `Trainer_${h}_r${i}`,
      r,
      `node-${h}`,
      0.3 + ((r * 31 + f) % 17) / 10,
      rankTiming(r, f).tracers,
    );
  }
  const forwarded: HostTiming = {
    rows: columns.ranks.map((_, i) => i),
    ranks: columns.ranks,
    arrivalMs: columns.arrivalMs,
    tracers: columns.tracers,
  };
  return { columns, json: JSON.stringify(forwarded) };
}

const own = {
  rankName: "Controller",
  init: async () => undefined,
  flush: () => Promise.reject(new Error("not asked")),
  shutdown: async () => undefined,
};
const hostFlushes = Array.from({ length: 8 }, (_, f) => Array.from({ length: HOSTS }, (_, h) => hostTiming(h, f)));
const groupSnapshots = (f: number): RankGroupSnapshot[] =>
  (hostFlushes[f % hostFlushes.length] ?? []).map(({ columns }, h) => ({
    rankName: `host:h${h}`,
    step: f,
    states: [],
    droppedKeyRecords: 0,
    group: { reporting: PER_HOST, missing: [], timing: columns },
  }));
const directSnapshots = Array.from({ length: 8 }, (_, f) =>
  Array.from({ length: RANKS }, (_, r): RankSnapshot => ({
    rankName: `Trainer_r${r}`,
    step: f,
    states: [],
    droppedKeyRecords: 0,
    timing: rankTiming(r, f),
  })),
);
const arrivals = (n: number): number[] => Array.from({ length: n }, (_, i) => 0.5 + (i % 13) / 10);
const hostArrivals = arrivals(HOSTS);
const directArrivals = arrivals(RANKS);

function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/** CPU ms per flush of `one(f)`, median over rounds. */
function perFlush(one: (f: number) => void): number {
  for (let f = 0; f < FLUSHES; f++) one(f); // warm up
  const rounds: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const c0 = cpuMs();
    for (let f = 0; f < FLUSHES; f++) one(f);
    rounds.push((cpuMs() - c0) / FLUSHES);
  }
  return median(rounds);
}

let named = 0;
const viaAgents = new StragglerTracker();
const attributionAgents = perFlush((f) => {
  const flushed = viaAgents.observe(
    f,
    0,
    answersTiming({ snapshots: groupSnapshots(f), arrivalMs: hostArrivals }, own),
  );
  named += flushed?.report.slowest.length ?? 0;
});
const direct = new StragglerTracker();
const attributionDirect = perFlush((f) => {
  const flushed = direct.observe(
    f,
    0,
    answersTiming({ snapshots: directSnapshots[f % directSnapshots.length] ?? [], arrivalMs: directArrivals }, own),
  );
  named += flushed?.report.slowest.length ?? 0;
});
const records = Array.from(
  { length: 8 },
  (_, f) =>
    viaAgents.observe(f, 0, answersTiming({ snapshots: groupSnapshots(f), arrivalMs: hostArrivals }, own))?.record,
);
let last = records[0] ?? null;
const storeHandOff = perFlush((f) => {
  const record = records[f % records.length];
  if (record === undefined) return;
  toRankTimingWrite(record, last);
  last = record;
});
const parseHeaders = perFlush((f) => {
  for (const { json } of hostFlushes[f % hostFlushes.length] ?? [])
    named += (JSON.parse(json) as HostTiming).rows.length > 0 ? 0 : 1;
});

/** 16 in-process host handles answering with 100 keys each and their ranks' timings. */
function hostHandles(): RankGroupHandle[] {
  const states: KeyState[] = Array.from({ length: 100 }, (_, k) => ({
    key: `train/key_${k}`,
    reduce: "mean",
    state: { v: 1, count: PER_HOST, sum: k * PER_HOST },
  }));
  return Array.from({ length: HOSTS }, (_, h) => ({
    rankName: `host:h${h}`,
    memberRanks: () => Array.from({ length: PER_HOST }, (_, i) => `Trainer_${h}_r${i}`),
    init: async () => undefined,
    shutdown: async () => undefined,
    flush: async (step: number): Promise<RankGroupSnapshot> => ({
      rankName: `host:h${h}`,
      step,
      states,
      droppedKeyRecords: 0,
      group: {
        reporting: PER_HOST,
        missing: [],
        timing: hostFlushes[step % hostFlushes.length]?.[h]?.columns ?? emptyTimingColumns(),
      },
    }),
  }));
}

const runsDir = mkdtempSync(join(tmpdir(), "rankscope-bench-stragglers-"));
async function flushCpu(stragglers: boolean): Promise<number> {
  const logger = new MetricLogger({
    runDir: join(runsDir, String(stragglers)),
    quiet: true,
    ...(stragglers ? {} : { stragglers: false }),
  });
  await logger.initBackends({});
  for (const handle of hostHandles()) await logger.registerRank(handle);
  const flushes = 100;
  for (let s = 0; s < flushes; s++) await logger.flush(s);
  const rounds: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const c0 = cpuMs();
    for (let s = 0; s < flushes; s++) await logger.flush((r + 1) * flushes + s);
    rounds.push((cpuMs() - c0) / flushes);
  }
  await logger.shutdown();
  return median(rounds);
}
// Paired: off, on, off, on — the same process, the same handles.
const off: number[] = [];
const on: number[] = [];
for (let i = 0; i < 2; i++) {
  off.push(await flushCpu(false));
  on.push(await flushCpu(true));
}
rmSync(runsDir, { recursive: true, force: true });
const flushOff = Math.min(...off);
const flushOn = Math.min(...on);

const load = loadavg()
  .map((l) => l.toFixed(1))
  .join(", ");
process.stdout.write(
  `Node ${process.version}; ${RANKS} ranks (${HOSTS} hosts × ${PER_HOST}); median of ${ROUNDS} rounds of ${FLUSHES} flushes; load average ${load}.\n`,
);
process.stdout.write("Controller CPU (this thread) per flush, ms; ratio to the 1 ms target.\n\n");
process.stdout.write("| work per flush | CPU ms | ÷ target (1 ms) |\n|---|---:|---:|\n");
const row = (name: string, ms: number, target = true): void =>
  void process.stdout.write(`| ${name} | ${ms.toFixed(3)} | ${target ? (ms / 1).toFixed(2) : "—"} |\n`);
row("attribution, 1,024 ranks through 16 host agents (gather columns + analyse + keys)", attributionAgents);
row("attribution, 1,024 direct ranks (one RankTiming each)", attributionDirect);
row("store backend: the record as its writer's batch (float32 columns, ranks when changed)", storeHandOff, false);
row("reference: JSON.parse of the 16 agents' forwarded timings (transport)", parseHeaders, false);
row(`whole MetricLogger.flush, 16 hosts × 100 keys, attribution off (best of ${off.length})`, flushOff, false);
row(`whole MetricLogger.flush, same, attribution on (best of ${on.length})`, flushOn, false);
row("  difference: what attribution adds to the flush", flushOn - flushOff);
process.stdout.write(
  `\nWhole flush with attribution ÷ the same flush without it (paired, this run): ${(flushOn / flushOff).toFixed(2)}×.\n`,
);
if (named < 0) process.stdout.write("unreachable\n");
