/** Text logs: coloured component loggers on pino, with main.log and merged.log in the run directory. */
export {
  getLogger,
  configureTextLogs,
  setupFileLogging,
  closeTextLogFiles,
  type TextLogger,
  type TextLogOptions,
  type LineSink,
} from "./logger.js";
export { DEFAULT_COMPONENT_COLORS, COLOR_NAMES, formatLogTime, type ColorName, type ComponentColor } from "./format.js";
