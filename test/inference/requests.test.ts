import { test } from "node:test";
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { getCollector } from "../../src/core/collector.js";
import { inferenceModel, startRequest } from "../../src/inference/requests.js";
import { reduceStates } from "../../src/pipeline/reduce-states.js";

const collector = getCollector();
const A = "{gen_ai.operation.name=chat,gen_ai.provider.name=p,gen_ai.request.model=m}";

function flushed(): Map<string, number> {
  const { metrics } = reduceStates(collector.takeStates(), { step: 1, timestamp: 0 });
  return new Map(metrics.map((m) => [m.key, m.value]));
}

test("a server request records TTFT, TPOT and duration under the conventions' names, and exact counts", () => {
  collector.clear();
  for (let i = 0; i < 5; i++) {
    const request = startRequest({ model: "m", provider: "p" });
    request.firstToken();
    request.token();
    request.token(8); // 10 output tokens
    request.end({ inputTokens: 7 });
    request.token(); // after the end: ignored
    request.end({ inputTokens: 1000 });
  }
  const failed = startRequest({ model: "m", provider: "p" });
  failed.firstToken();
  failed.fail("timeout");
  const values = flushed();
  assert.equal(values.get(`gen_ai.server.time_to_first_token/count${A}`), 5, "successful requests only");
  assert.equal(values.get(`gen_ai.server.time_per_output_token/count${A}`), 5);
  assert.equal(values.get(`gen_ai.server.request.duration/count${A}`), 5);
  assert.equal(
    values.get(
      "gen_ai.server.request.duration/count{error.type=timeout,gen_ai.operation.name=chat,gen_ai.provider.name=p,gen_ai.request.model=m}",
    ),
    1,
  );
  assert.equal(values.get(`inference/requests/total${A}`), 6);
  assert.equal(values.get(`inference/output_tokens/total${A}`), 50);
  assert.equal(values.get(`inference/input_tokens/total${A}`), 35);
  assert.equal(
    values.get(
      "inference/errors/total{error.type=timeout,gen_ai.operation.name=chat,gen_ai.provider.name=p,gen_ai.request.model=m}",
    ),
    1,
  );
  assert.ok((values.get(`gen_ai.server.time_to_first_token/p50${A}`) ?? -1) >= 0);
});

test("a client request records time to first chunk, a time per further chunk, and token usage by type", () => {
  collector.clear();
  const model = inferenceModel({ model: "m", provider: "p", side: "client", attributes: { "server.port": 443 } });
  const request = model.start();
  request.token(); // the first chunk
  request.token(3);
  request.token(2);
  request.end({ inputTokens: 12 });
  const values = flushed();
  const attrs = "gen_ai.operation.name=chat,gen_ai.provider.name=p,gen_ai.request.model=m,server.port=443";
  const usage = (type: string): string =>
    `gen_ai.operation.name=chat,gen_ai.provider.name=p,gen_ai.request.model=m,gen_ai.token.type=${type},server.port=443`;
  assert.equal(values.get(`gen_ai.client.operation.time_to_first_chunk/count{${attrs}}`), 1);
  assert.equal(values.get(`gen_ai.client.operation.time_per_output_chunk/count{${attrs}}`), 2);
  assert.equal(values.get(`gen_ai.client.operation.duration/count{${attrs}}`), 1);
  assert.equal(values.get(`gen_ai.client.token.usage/mean{${usage("input")}}`), 12);
  assert.equal(values.get(`gen_ai.client.token.usage/mean{${usage("output")}}`), 6);
});

test("a model's instruments are bound again after the collector was cleared", () => {
  collector.clear();
  startRequest({ model: "m", provider: "p" }).end();
  collector.clear();
  startRequest({ model: "m", provider: "p" }).end();
  assert.equal(flushed().get(`inference/requests/total${A}`), 1);
});

test("startRequest keeps the models of one name apart by provider, operation, side and attributes", () => {
  collector.clear();
  const tenantA = Object.freeze({ tenant: "a" });
  const requests: Parameters<typeof startRequest>[0][] = [
    { model: "m", provider: "p" },
    { model: "m", provider: "q" },
    { model: "m", provider: "p", operation: "embeddings" },
    { model: "m", provider: "p", side: "client" },
    { model: "m", provider: "p", attributes: tenantA },
    { model: "m", provider: "p", attributes: tenantA },
    { model: "m", provider: "p", attributes: Object.freeze({ tenant: "b" }) },
    { model: "m", provider: "p", attributes: { tenant: "b" } },
  ];
  for (const options of requests) startRequest(options).end();
  const values = flushed();
  assert.equal(values.get(`gen_ai.client.operation.duration/count${A}`), 1, "the client side's own instrument");
  assert.equal(values.get(`gen_ai.server.request.duration/count${A}`), 1);
  const totals = [...values].filter(([key]) => key.startsWith("inference/requests/total")).sort();
  const key = (attributes: string): string => `inference/requests/total{${attributes}}`;
  assert.deepEqual(totals, [
    [key("gen_ai.operation.name=chat,gen_ai.provider.name=p,gen_ai.request.model=m,tenant=a"), 2],
    [key("gen_ai.operation.name=chat,gen_ai.provider.name=p,gen_ai.request.model=m,tenant=b"), 2],
    [key("gen_ai.operation.name=chat,gen_ai.provider.name=p,gen_ai.request.model=m"), 2],
    [key("gen_ai.operation.name=chat,gen_ai.provider.name=q,gen_ai.request.model=m"), 1],
    [key("gen_ai.operation.name=embeddings,gen_ai.provider.name=p,gen_ai.request.model=m"), 1],
  ]);
});

test("a client's chunk times are the gaps between its chunks, each recorded once, in the flush it was measured in", () => {
  collector.clear();
  const times: number[] = [];
  let now = 1_000;
  const original = Object.getOwnPropertyDescriptor(performance, "now");
  performance.now = () => {
    now += 0.25 + ((times.length * 7) % 13) * 0.731; // irregular gaps, in ms
    times.push(now);
    return now;
  };
  const raw: Array<[key: string, value: number, step: number]> = [];
  collector.stream = { record: (entry, value, step) => raw.push([entry.key, value, step]) };
  const expected: Array<[value: number, step: number]> = [];
  const perFlush: number[] = [];
  try {
    const model = inferenceModel({ model: "m", provider: "p", side: "client" });
    // Three streams at once — one ends, one fails, one is never ended — over 700 chunk times
    // (more than a model holds, 256) and 3 flushes (a stream crossing them).
    const streams = [model.start(), model.start(), model.start()];
    const last = streams.map((request) => (request.firstToken(), times.at(-1) ?? 0));
    const mark = (s: number): void => {
      streams[s]?.token();
      const at = times.at(-1) ?? 0;
      expected.push([(at - (last[s] ?? 0)) / 1000, collector.step]);
      last[s] = at;
    };
    for (let chunk = 1; chunk < 700; chunk++) {
      mark(chunk % 3);
      if (chunk % 250 === 0) {
        perFlush.push(chunkCount(flushed()));
        collector.step++;
      }
    }
    streams[0]?.end();
    mark(1); // a chunk of another stream after the first one's end
    streams[1]?.fail("timeout");
    perFlush.push(chunkCount(flushed()));
  } finally {
    collector.stream = null;
    if (original !== undefined) Object.defineProperty(performance, "now", original);
  }
  const chunk =
    "gen_ai.client.operation.time_per_output_chunk{gen_ai.operation.name=chat,gen_ai.provider.name=p,gen_ai.request.model=m}";
  const recorded = raw.filter(([key]) => key === chunk).map(([, value, step]): [number, number] => [value, step]);
  const order = (a: [number, number], b: [number, number]): number => a[1] - b[1] || a[0] - b[0];
  assert.equal(expected.length, 700);
  assert.deepEqual(recorded.sort(order), expected.sort(order), "every gap, exactly, with the step it was measured at");
  assert.deepEqual(
    perFlush,
    perFlush.map((_, f) => expected.filter(([, step]) => step === f).length),
    "each in the flush it was measured in",
  );
});

function chunkCount(values: Map<string, number>): number {
  let count = 0;
  for (const [key, value] of values)
    if (key.startsWith("gen_ai.client.operation.time_per_output_chunk/count")) count += value;
  return count;
}
