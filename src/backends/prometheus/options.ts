/**
 * The options of the `prometheus` and `prometheus_remote_write` backends, declared once (type,
 * names and checks; `option-schema.ts`).
 */
import { z } from "zod";
import { describeValue } from "../../core/settings.js";
import { integerOption, internalOption, isHttpUrl, says, stringMapOption, type OptionsOf } from "../option-schema.js";

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** What is wrong with a `labels` option, or undefined when it is valid. */
function labelsProblem(labels: unknown): string | undefined {
  if (labels === null || typeof labels !== "object" || Array.isArray(labels))
    return `labels must be an object of label names to string values, got ${describeValue(labels)}`;
  for (const [name, value] of Object.entries(labels)) {
    if (!LABEL_NAME.test(name) || name.startsWith("__"))
      return `label name ${JSON.stringify(name)} is not valid: use letters, digits and "_", not starting with a digit or "__"`;
    if (["rank", "rank_name", "host", "le", "quantile"].includes(name))
      return `label "${name}" is set by rankscope; choose another name`;
    if (typeof value !== "string") return `label "${name}" must be a string, got ${describeValue(value)}`;
  }
  return undefined;
}

/** Constant labels on every series. */
const labels = (): z.ZodOptional<z.ZodType<Readonly<Record<string, string>>>> =>
  z
    .custom<Readonly<Record<string, string>>>(
      (value) => labelsProblem(value) === undefined,
      (value: unknown) => ({ message: labelsProblem(value) }),
    )
    .optional();

export const PROMETHEUS_OPTIONS = {
  /** Address to listen on (default `127.0.0.1`). */
  host: z
    .string(says((got) => `host must be an address to listen on such as "127.0.0.1" or "0.0.0.0", got ${got}`))
    .min(1)
    .optional(),
  /** The controller's process listens here (default 9464); rank r on `port + 1 + r`; 0: any free port. */
  port: z
    .number({
      errorMap: (issue, ctx) => ({
        message:
          issue.code === "too_big"
            ? `port must be 0-65535, got ${describeValue(ctx.data)}`
            : `port must be an integer ≥ 0, got ${describeValue(ctx.data)}`,
      }),
    })
    .int()
    .min(0)
    .max(65535)
    .optional(),
  /** Default `/metrics`. */
  path: z
    .string(says((got) => `path must start with "/", e.g. "/metrics", got ${got}`))
    .startsWith("/")
    .optional(),
  /** `false`: no server of its own; mount `metricsHandler()` from `rankscope/prometheus`. */
  serve: z
    .boolean(
      says((got) => `serve must be true (listen on host:port) or false (mount metricsHandler() yourself), got ${got}`),
    )
    .optional(),
  /** Constant labels on every series. */
  labels: labels(),
  /** `init` fails if it cannot listen by then (default 5000 ms). */
  listenDeadlineMs: integerOption(1),
  /** Also export rankscope's own keys (`…__count`, `rankscope/…`); default false. */
  internal: internalOption("exports"),
};

/** Options of the `prometheus` backend (docs/prometheus.md). */
export type PrometheusBackendOptions = OptionsOf<typeof PROMETHEUS_OPTIONS>;

const REMOTE_WRITE_URL = (got: string): string =>
  `url must be the receiver's http(s) URL, e.g. "http://127.0.0.1:9090/api/v1/write", got ${got}`;

export const PROMETHEUS_REMOTE_WRITE_OPTIONS = {
  /** The receiver, e.g. `http://127.0.0.1:9090/api/v1/write`. */
  url: z.string(says(REMOTE_WRITE_URL)).refine(isHttpUrl, (url) => ({ message: REMOTE_WRITE_URL(describeValue(url)) })),
  /** Extra request headers (never logged). */
  headers: stringMapOption("header names"),
  /** Constant labels on every series. */
  labels: labels(),
  /** Deadline of one request (default 5000 ms). */
  timeoutMs: integerOption(1),
  /** How long a failing request is retried (default 30 000 ms). */
  retryBudgetMs: integerOption(1),
  /** The send queue's bound (default 100 000 samples). */
  maxQueuedSamples: integerOption(1),
  /** Samples per request (default 2000). */
  maxSamplesPerSend: integerOption(1),
  /** At shutdown, what is not sent by then is counted lost (default 8000 ms). */
  finishDeadlineMs: integerOption(1),
  /** Also export rankscope's own keys (`…__count`, `rankscope/…`); default false. */
  internal: internalOption("exports"),
};

/** Options of the `prometheus_remote_write` backend (docs/prometheus.md). */
export type PrometheusRemoteWriteBackendOptions = OptionsOf<typeof PROMETHEUS_REMOTE_WRITE_OPTIONS>;
