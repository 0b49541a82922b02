/**
 * How a text log line looks (AReaL's format): `20261122-01:52:03.123 Trainer INFO: message`,
 * coloured as a whole by the component's kind, with warnings yellow and errors red.
 */

import { isRecord } from "../core/json.js";

/** The valid colour names, for error messages. */
export const COLOR_NAMES = [
  "black",
  "red",
  "green",
  "yellow",
  "blue",
  "magenta",
  "cyan",
  "white",
  "gray",
  "none",
] as const;

/** ANSI colours a component pattern can use. */
export type ColorName = (typeof COLOR_NAMES)[number];

const ANSI: Readonly<Record<ColorName, string>> = {
  black: "\u001b[30m",
  red: "\u001b[31m",
  green: "\u001b[32m",
  yellow: "\u001b[33m",
  blue: "\u001b[34m",
  magenta: "\u001b[35m",
  cyan: "\u001b[36m",
  white: "\u001b[37m",
  gray: "\u001b[90m",
  none: "",
};
const RESET = "\u001b[0m";
const BOLD = "\u001b[1m";

/** A colour for the components whose name matches `pattern` (first match wins). */
export interface ComponentColor {
  readonly pattern: RegExp;
  readonly color: ColorName;
}

/**
 * The default component kinds, as AReaL colours its loggers: infrastructure blue, engines cyan,
 * workflows and rollouts magenta, stats and monitoring green; anything else uncoloured.
 */
export const DEFAULT_COMPONENT_COLORS: readonly ComponentColor[] = [
  { pattern: /scheduler|launcher|controller|master|rpc|transport|nats|server|cluster/i, color: "blue" },
  { pattern: /engine|fsdp|megatron|trainer|actor|critic|optimizer|model/i, color: "cyan" },
  { pattern: /workflow|rollout|agent|env|reward|sampler|generat/i, color: "magenta" },
  { pattern: /stats|metric|logger|monitor|perf|trace|system/i, color: "green" },
];

/** pino's numeric levels and the names AReaL prints. */
export const LEVEL_NAMES: Readonly<Record<number, string>> = {
  10: "TRACE",
  20: "DEBUG",
  30: "INFO",
  40: "WARNING",
  50: "ERROR",
  60: "CRITICAL",
};

/** `YYYYMMDD-HH:MM:SS.mmm` in local time (AReaL's datefmt plus milliseconds). */
export function formatLogTime(ms: number): string {
  const d = new Date(ms);
  const pad = (n: number, w = 2): string => String(n).padStart(w, "0");
  return `${d.getFullYear()}${pad(d.getMonth() + 1)}${pad(d.getDate())}-${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** The colour of a component's info lines. */
function componentColor(component: string, colors: readonly ComponentColor[]): ColorName {
  for (const c of colors) {
    c.pattern.lastIndex = 0;
    if (c.pattern.test(component)) return c.color;
  }
  return "none";
}

/** Wrap a whole line in its colour: by level for warnings and errors, else by component. */
export function colorLine(line: string, level: number, component: string, colors: readonly ComponentColor[]): string {
  let prefix: string;
  if (level >= 60) prefix = `${BOLD}${ANSI.red}`;
  else if (level >= 50) prefix = ANSI.red;
  else if (level >= 40) prefix = ANSI.yellow;
  else if (level < 30) prefix = ANSI.gray;
  else prefix = ANSI[componentColor(component, colors)];
  return prefix === "" ? line : `${prefix}${line}${RESET}`;
}

/** The fields of one pino record that are not the message, as ` key=value` pairs. */
function formatFields(record: Readonly<Record<string, unknown>>): string {
  let out = "";
  for (const [key, value] of Object.entries(record)) {
    if (key === "level" || key === "msg" || key === "component" || key === "time" || key === "err") continue;
    out += ` ${key}=${typeof value === "string" ? value : JSON.stringify(value)}`;
  }
  return out;
}

/** One uncoloured line (without newline) for a pino record, stack traces on following lines. */
export function formatRecord(
  record: Readonly<Record<string, unknown>>,
  time: number,
): { line: string; level: number; component: string } {
  const level = typeof record["level"] === "number" ? record["level"] : 30;
  const component = typeof record["component"] === "string" ? record["component"] : "root";
  const levelName = LEVEL_NAMES[level] ?? `LEVEL${level}`;
  const message = typeof record["msg"] === "string" ? record["msg"] : "";
  let line = `${formatLogTime(time)} ${component} ${levelName}: ${message}${formatFields(record)}`;
  const err = record["err"];
  if (isRecord(err)) {
    const { stack, message: errMessage } = err;
    if (typeof stack === "string") line += `\n${stack}`;
    else if (typeof errMessage === "string" && errMessage !== message) line += ` err=${errMessage}`;
  }
  return { line, level, component };
}
