/** NeMo-RL's Logger facade and validation sample printing. */
export {
  Logger,
  flattenWithSlash,
  backendsFromOptions,
  type LoggerOptions,
  type LogMetricsOptions,
  type BackendSwitch,
} from "./logger.js";
export {
  printValidationSamples,
  formatValidationSamples,
  selectValidationSamples,
  type ValidationSample,
  type ValidationSampleOptions,
} from "./validation-samples.js";
