/** The `otlp` backend's options, declared once (type, names and checks; `option-schema.ts`). */
import { z } from "zod";
import { describeValue } from "../../core/settings.js";
import { integerOption, internalOption, isHttpUrl, says, stringMapOption, type OptionsOf } from "../option-schema.js";

/** OpenTelemetry's default OTLP/HTTP metrics endpoint. */
export const DEFAULT_OTLP_METRICS_URL = "http://127.0.0.1:4318/v1/metrics";

const URL_MESSAGE = (got: string): string =>
  `url must be an OTLP/HTTP metrics endpoint such as "${DEFAULT_OTLP_METRICS_URL}", got ${got}`;

export const OTLP_OPTIONS = {
  /** OTLP/HTTP metrics endpoint (default `http://127.0.0.1:4318/v1/metrics`). */
  url: z
    .string(says(URL_MESSAGE))
    .refine(isHttpUrl, (url) => ({ message: URL_MESSAGE(describeValue(url)) }))
    .optional(),
  /** Extra request headers (never logged). */
  headers: stringMapOption("names"),
  /** `service.name` (default `rankscope`). */
  serviceName: z
    .string(says(() => "serviceName must be a non-empty string"))
    .min(1)
    .optional(),
  /** Extra resource attributes. */
  resourceAttributes: stringMapOption("names"),
  /** `cumulative` (default) or `delta`. */
  temporality: z
    .enum(
      ["cumulative", "delta"],
      says((got) => `temporality must be "cumulative" or "delta", got ${got}`),
    )
    .optional(),
  /** Deadline of one export (default 10 000 ms). */
  timeoutMs: integerOption(1),
  /** Exports waiting while one is in flight (default 100). */
  maxQueuedExports: integerOption(1),
  /** At shutdown, what is still queued then is counted lost (default 8000 ms). */
  finishDeadlineMs: integerOption(1),
  /** Also export rankscope's own keys (`…__count`, `rankscope/…`); default false. */
  internal: internalOption("exports"),
};

/** Options of the `otlp` backend (docs/otlp.md). */
export type OtlpBackendOptions = OptionsOf<typeof OTLP_OPTIONS>;
