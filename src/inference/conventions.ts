/**
 * OpenTelemetry's GenAI metric conventions, as rankscope implements them: the instruments' names,
 * units, recommended explicit bucket boundaries and attribute names, from one pinned version of
 * open-telemetry/semantic-conventions-genai (`docs/gen-ai/gen-ai-metrics.md`,
 * `model/gen-ai/metrics.yaml`). docs/inference.md lists them with the pin; a change of version
 * changes both.
 */
import type { NumericReduceName } from "../core/reduce.js";
import { Reduce } from "../core/registry.js";

/** The version implemented: the repository and commit whose `gen-ai-metrics.md` these come from. */
export const GENAI_CONVENTIONS = {
  repository: "open-telemetry/semantic-conventions-genai",
  commit: "004902b8cb70aa5ae6ca4ae07132b7daabcd3e10",
} as const;

/** The attribute names the instruments carry. */
export const GENAI_ATTRIBUTES = {
  operation: "gen_ai.operation.name",
  provider: "gen_ai.provider.name",
  requestModel: "gen_ai.request.model",
  responseModel: "gen_ai.response.model",
  tokenType: "gen_ai.token.type",
  errorType: "error.type",
  serverAddress: "server.address",
  serverPort: "server.port",
} as const;

/** One instrument: its name, unit (UCUM), description and recommended bucket boundaries. */
export interface GenAiInstrument {
  readonly name: string;
  readonly unit: string;
  readonly description: string;
  readonly boundaries: readonly number[];
}

/** `gen_ai.server.request.duration`, the client durations and chunk times. */
const DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0];
const TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5];
const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];

function instrument(name: string, unit: string, description: string, boundaries: number[]): GenAiInstrument {
  return { name, unit, description, boundaries };
}

/** The instruments of the pinned version that a request measures. */
export const GENAI_INSTRUMENTS = {
  serverRequestDuration: instrument(
    "gen_ai.server.request.duration",
    "s",
    "Generative AI server request duration such as time-to-last byte or last output token.",
    DURATION_BUCKETS,
  ),
  serverTimeToFirstToken: instrument(
    "gen_ai.server.time_to_first_token",
    "s",
    "Time to generate first token for successful responses.",
    TTFT_BUCKETS,
  ),
  serverTimePerOutputToken: instrument(
    "gen_ai.server.time_per_output_token",
    "s",
    "Time per output token generated after the first token for successful responses.",
    TPOT_BUCKETS,
  ),
  clientOperationDuration: instrument(
    "gen_ai.client.operation.duration",
    "s",
    "GenAI operation duration.",
    DURATION_BUCKETS,
  ),
  clientTokenUsage: instrument(
    "gen_ai.client.token.usage",
    "{token}",
    "Number of input and output tokens used.",
    TOKEN_BUCKETS,
  ),
  clientTimeToFirstChunk: instrument(
    "gen_ai.client.operation.time_to_first_chunk",
    "s",
    "Time to receive the first chunk, measured from when the client issues the generation request to when the first chunk is received in the response stream.",
    DURATION_BUCKETS,
  ),
  clientTimePerOutputChunk: instrument(
    "gen_ai.client.operation.time_per_output_chunk",
    "s",
    "Time per output chunk, recorded for each chunk received after the first one, measured as the time elapsed from the end of the previous chunk to the end of the current chunk.",
    DURATION_BUCKETS,
  ),
} as const;

/** The instrument of a metric name (the key without suffix and attributes), if it is one of the conventions'. */
export function genAiInstrument(name: string): GenAiInstrument | undefined {
  for (const entry of Object.values(GENAI_INSTRUMENTS)) if (entry.name === name) return entry;
  return undefined;
}

/** The instrument of a metric name or of one of its outputs (`…/p99`, `…/min`), if it is one of the conventions'. */
export function genAiConventionOf(name: string): GenAiInstrument | undefined {
  const slash = name.lastIndexOf("/");
  return genAiInstrument(name) ?? (slash > 0 ? genAiInstrument(name.slice(0, slash)) : undefined);
}

/** The reduction an instrument is recorded with: its buckets and the quantile sketch. */
export function instrumentReduce(entry: GenAiInstrument): NumericReduceName {
  return Reduce.buckets(entry.boundaries);
}

/**
 * rankscope's own counts per model and operation (not in the conventions): requests, errors (by
 * `error.type`), input and output tokens, each a `Reduce.RATE` (`…/total`, `…/per_s`).
 */
export const INFERENCE_COUNTS = {
  requests: "inference/requests",
  errors: "inference/errors",
  inputTokens: "inference/input_tokens",
  outputTokens: "inference/output_tokens",
} as const;
