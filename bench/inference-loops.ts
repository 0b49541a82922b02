/**
 * The client-side loops of the inference benchmarks, over any version of the request API (this
 * checkout's, or an earlier commit's loaded by `inference-against.ts`): what a chunk mark costs at
 * the call, with its append, and a whole client request.
 */
import { median } from "./harness.js";

/** What the loops use of a bound model (`inferenceModel(...)`) of any version. */
export interface BenchModel {
  start(): { firstToken(): void; token(count?: number): void; end(usage?: { inputTokens?: number }): void };
}

/** Marks per request in `chunkMarkAtCall`: fewer than a model holds (`PENDING_CHUNKS`), so none is appended while timed. */
const SEGMENT = 255;

/**
 * ns per client chunk mark at the call: requests of `SEGMENT` marks, each timed from its first
 * mark to its last (not its start and end, where the chunk times are appended); the median of
 * `runs` runs of `n` marks. The clock reads around each segment add about 0.3 ns per mark.
 */
export function chunkMarkAtCall(model: BenchModel, n: number, runs = 5): number {
  const samples: number[] = [];
  for (let run = -1; run < runs; run++) {
    let ns = 0n;
    let marks = 0;
    while (marks < n) {
      const request = model.start();
      request.firstToken();
      const start = process.hrtime.bigint();
      for (let i = 0; i < SEGMENT; i++) request.token();
      ns += process.hrtime.bigint() - start;
      request.end();
      marks += SEGMENT;
    }
    if (run >= 0) samples.push(Number(ns) / marks); // run -1 warms up
  }
  return median(samples);
}

/** `n` client chunk marks in one request, their appends included (the request appends them as it goes). */
export function chunkMarksWithAppend(model: BenchModel): (n: number) => void {
  return (n) => {
    const request = model.start();
    request.firstToken();
    for (let i = 0; i < n; i++) request.token();
    request.end();
  };
}

/** `n` requests of `tokens` tokens (`tokens - 1` marks after the first), each ended with its input tokens. */
export function requests(model: BenchModel, tokens: number): (n: number) => void {
  return (n) => {
    for (let i = 0; i < n; i++) {
      const request = model.start();
      request.firstToken();
      for (let t = 1; t < tokens; t++) request.token();
      request.end({ inputTokens: 100 });
    }
  };
}
