/**
 * The OpenTelemetry packages the otlp backend uses: optional peer dependencies of rankscope, loaded
 * when the backend's module is first evaluated (a config names `otlp`, or `rankscope/otlp` is
 * imported). Without them, that load throws an error naming the `npm install` line that adds them
 * (core/optional-packages.ts). Types come from `import type` in each module.
 */
import { requireOptional } from "../../core/optional-packages.js";

export const otelApi = requireOptional<typeof import("@opentelemetry/api")>("otlp", "@opentelemetry/api");
export const otelSdkMetrics = requireOptional<typeof import("@opentelemetry/sdk-metrics")>(
  "otlp",
  "@opentelemetry/sdk-metrics",
);
export const otelResources = requireOptional<typeof import("@opentelemetry/resources")>(
  "otlp",
  "@opentelemetry/resources",
);
export const otelSemanticConventions = requireOptional<typeof import("@opentelemetry/semantic-conventions")>(
  "otlp",
  "@opentelemetry/semantic-conventions",
);
export const otelExporter = requireOptional<typeof import("@opentelemetry/exporter-metrics-otlp-proto")>(
  "otlp",
  "@opentelemetry/exporter-metrics-otlp-proto",
);
