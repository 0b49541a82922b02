// A model server replica: two simulated models stream tokens with a prefill, then a decode step
// per token; every request is measured with startRequest (TTFT, TPOT, duration, tokens, errors).
import { setTimeout as sleep } from "node:timers/promises";
import { startRequest } from "rankscope";

const MODELS = {
  "llama-3.1-8b": { prefillMs: 25, perTokenMs: 4, outputTokens: 24 },
  "llama-3.1-70b": { prefillMs: 80, perTokenMs: 12, outputTokens: 12 },
};
type Model = keyof typeof MODELS;

async function generate(model: Model, i: number): Promise<void> {
  const { prefillMs, perTokenMs, outputTokens } = MODELS[model];
  const request = startRequest({ model, provider: "rankscope-sim", operation: "chat" });
  await sleep(prefillMs * (1 + (i % 4) / 4)); // a longer prompt, a longer prefill
  if (model === "llama-3.1-70b" && i % 8 === 7) return request.fail("timeout"); // one in eight
  request.firstToken();
  for (let t = 1; t < outputTokens; t++) {
    await sleep(perTokenMs);
    request.token();
  }
  request.end({ inputTokens: 100 + 10 * i });
}

/** Serve `count` requests of each model at once. */
export async function serve(count: number): Promise<void> {
  const requests = Object.keys(MODELS).flatMap((model) =>
    Array.from({ length: count }, (_, i) => generate(model as Model, i)),
  );
  await Promise.all(requests);
}
