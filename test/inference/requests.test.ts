import { test } from "node:test";
import assert from "node:assert/strict";
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
