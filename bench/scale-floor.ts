/**
 * The CPU floor of the scale benchmark's target row (1,024 ranks on 16 hosts × 1,000 keys), in one
 * thread without NATS: what the simulated ranks themselves spend per flush (record one value per
 * key, take their states straight into their frame, as `RankAgent` does) and what the 16 agents
 * spend (decode 64 frames each, merge their columns, encode one frame), with the code the real
 * rank and agent run. Divided by the machine's cores, the sum is a floor for the flush wall
 * that no transport can beat on this machine. Printed by `npm run bench -- scale` after its table.
 */
import { Collector, type MetricEntry } from "../src/core/collector.js";
import { FrameMerger, StateDecoder, StateEncoder, type DecodedFrame } from "../src/transport/wire/codec.js";
import { reduceStates } from "../src/pipeline/reduce-states.js";
import { scaleKeys } from "./scale-keys.js";

/** Milliseconds of CPU (`process.cpuUsage`) per flush, by phase, summed over every rank and agent (median of `flushes`). */
export interface ScaleFloor {
  readonly record: number;
  /** Taking the states straight from the accumulators into the frame (`encodeTaking`). */
  readonly rankTakeEncode: number;
  readonly agentDecode: number;
  readonly agentMerge: number;
  readonly agentEncode: number;
}

/** CPU milliseconds this process used so far (user + system): unlike the wall clock, not inflated by other jobs on the machine. */
function cpuNow(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

export function measureFloor(ranks: number, hosts: number, keyCount: number, flushes = 5): ScaleFloor {
  const keys = scaleKeys(keyCount);
  const perHost = ranks / hosts;
  const collectors = Array.from({ length: ranks }, () => new Collector());
  const entries = collectors.map((c) => keys.map(({ key, reduce }) => c.entryFor(key, reduce) as MetricEntry));
  const rankEncoders = collectors.map(() => new StateEncoder());
  const agentDecoders = collectors.map(() => new StateDecoder());
  const hostEncoders = Array.from({ length: hosts }, () => new StateEncoder());
  const mergers = Array.from({ length: hosts }, () => new FrameMerger());
  const header = { proto: "rankscope", v: 1, run: "r", t: "reply" };
  const samples: Record<keyof ScaleFloor, number[]> = {
    record: [],
    rankTakeEncode: [],
    agentDecode: [],
    agentMerge: [],
    agentEncode: [],
  };
  for (let flush = 0; flush < flushes + 2; flush++) {
    const t: Record<keyof ScaleFloor, number> = {
      record: 0,
      rankTakeEncode: 0,
      agentDecode: 0,
      agentMerge: 0,
      agentEncode: 0,
    };
    let t0 = cpuNow();
    entries.forEach((es, r) => {
      for (let k = 0; k < es.length; k++)
        (es[k] as MetricEntry).accumulator.append((((r * 7 + k * 13 + flush) % 101) / 10) as never);
    });
    t.record = cpuNow() - t0;
    for (let h = 0; h < hosts; h++) {
      const frames: DecodedFrame[] = [];
      for (let r = h * perHost; r < (h + 1) * perHost; r++) {
        t0 = cpuNow();
        const collector = collectors[r] ?? new Collector();
        const frame = (rankEncoders[r] ?? new StateEncoder()).encodeTaking(header, collector.entriesInKeyOrder());
        const t1 = cpuNow();
        frames.push((agentDecoders[r] ?? new StateDecoder()).decode(frame));
        t.rankTakeEncode += t1 - t0;
        t.agentDecode += cpuNow() - t1;
      }
      t0 = cpuNow();
      const merger = mergers[h] ?? new FrameMerger();
      merger.begin();
      for (const frame of frames) merger.add(frame);
      const merged = merger.result() ?? [];
      const t1 = cpuNow();
      (hostEncoders[h] ?? new StateEncoder()).encode(header, merged);
      t.agentMerge += t1 - t0;
      t.agentEncode += cpuNow() - t1;
    }
    if (flush >= 2) for (const phase of Object.keys(t) as Array<keyof ScaleFloor>) samples[phase].push(t[phase]);
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
  return Object.fromEntries(Object.entries(samples).map(([k, xs]) => [k, median(xs)])) as unknown as ScaleFloor;
}

/**
 * The controller's own CPU per flush behind `racks` rack agents (issue 34), in one thread without
 * NATS: decode one frame per rack (each the merged states of `ranks / racks` ranks × `keyCount`
 * keys, as a rack agent sends them), merge their columns, reduce — median of `flushes`, ms. What a
 * flush costs the controller apart from receiving the frames and the garbage collector.
 */
export function measureControllerFloor(ranks: number, racks: number, keyCount: number, flushes = 15): number {
  const keys = scaleKeys(keyCount);
  const perRack = ranks / racks;
  const collectors = Array.from({ length: racks }, () => new Collector());
  const entries = collectors.map((c) => keys.map(({ key, reduce }) => c.entryFor(key, reduce)));
  const encoders = collectors.map(() => new StateEncoder());
  const decoders = collectors.map(() => new StateDecoder());
  const merger = new FrameMerger();
  const header = { proto: "rankscope", v: 1, run: "r", t: "reply" };
  const samples: number[] = [];
  for (let flush = 0; flush < flushes + 3; flush++) {
    // One rack's frame: every one of its ranks' values in one collector (the merged states' shape and width).
    const frames = collectors.map((collector, rack) => {
      for (let r = rack * perRack; r < (rack + 1) * perRack; r++)
        entries[rack]?.forEach((entry, k) =>
          entry?.accumulator.append((((r * 7 + k * 13 + flush) % 101) / 10) as never),
        );
      return (encoders[rack] ?? new StateEncoder()).encodeTaking(header, collector.entriesInKeyOrder());
    });
    const t0 = cpuNow();
    const decoded = frames.map((frame, rack) => (decoders[rack] ?? new StateDecoder()).decode(frame));
    merger.begin();
    for (const frame of decoded) merger.add(frame);
    reduceStates(merger.result() ?? [], { step: flush, timestamp: Date.now() });
    if (flush >= 3) samples.push(cpuNow() - t0);
  }
  return [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)] ?? NaN;
}

if (import.meta.url === `file://${process.argv[1] ?? ""}`) {
  const floor = measureFloor(1024, 16, 1000);
  process.stdout.write(`${JSON.stringify(floor)}\n`);
}
