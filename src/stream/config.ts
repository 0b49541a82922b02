/**
 * The stream's configuration: options in code, then environment variables, then defaults.
 *
 * An explicit option beats the environment, and when both are set to different values that is a
 * warning naming both, so nothing is overridden silently. A bad option is a TypeError that says
 * what is valid; a bad environment value is a warning and the default (a typo in a job script
 * must not kill a long run at start).
 */
import { resolve } from "node:path";
import { warn } from "../core/diagnostics.js";

/** Options of `startStream`. Every one has an environment variable and a default. */
export interface StreamOptions {
  /** JSONL file of this rank's stream (env RANKSCOPE_STREAM_FILE; default `{runDir}/streams/rank-{rank}.jsonl`). */
  file?: string;
  /**
   * Records after which the writer drains before the interval (env RANKSCOPE_STREAM_BATCH; default
   * 100). It looks every millisecond while records flow; an idle writer is woken.
   */
  batchSize?: number;
  /** Longest a record waits before it is written, ms (env RANKSCOPE_STREAM_FLUSH_MS; default 1000). */
  flushMs?: number;
  /** Values a probe keeps of its array (env RANKSCOPE_STREAM_VALUES; default 10). */
  values?: number;
  /** Slots of the ring, rounded up to a power of two (env RANKSCOPE_STREAM_CAPACITY; default 16384). */
  capacity?: number;
  /** Longest the process waits at exit for the ring to be written, ms (env RANKSCOPE_STREAM_EXIT_WAIT_MS; default 2000). */
  exitWaitMs?: number;
  /** Drain on SIGINT/SIGTERM, then end the process as the signal asks (default true). */
  handleSignals?: boolean;
  /**
   * Make the file's writes on a thread of their own, so the writer formats the next batch
   * meanwhile (env RANKSCOPE_STREAM_FILE_THREAD; default true). False: one thread fewer, and
   * formatting and writing take turns.
   */
  fileThread?: boolean;
}

/** The resolved configuration. */
export interface StreamConfig {
  readonly file: string | undefined;
  readonly batchSize: number;
  readonly flushMs: number;
  readonly values: number;
  readonly capacity: number;
  readonly exitWaitMs: number;
  readonly handleSignals: boolean;
  readonly fileThread: boolean;
}

type NumericOption = "batchSize" | "flushMs" | "values" | "capacity" | "exitWaitMs";

/** Each numeric option: its variable, default and valid range. */
export const STREAM_SETTINGS: Readonly<Record<NumericOption, { env: string; fallback: number; min: number; max: number }>> = {
  batchSize: { env: "RANKSCOPE_STREAM_BATCH", fallback: 100, min: 1, max: 1 << 20 },
  flushMs: { env: "RANKSCOPE_STREAM_FLUSH_MS", fallback: 1000, min: 1, max: 3_600_000 },
  values: { env: "RANKSCOPE_STREAM_VALUES", fallback: 10, min: 0, max: 4096 },
  capacity: { env: "RANKSCOPE_STREAM_CAPACITY", fallback: 16384, min: 2, max: 1 << 24 },
  exitWaitMs: { env: "RANKSCOPE_STREAM_EXIT_WAIT_MS", fallback: 2000, min: 0, max: 600_000 },
};

const FILE_ENV = "RANKSCOPE_STREAM_FILE";
const FILE_THREAD_ENV = "RANKSCOPE_STREAM_FILE_THREAD";
const KNOWN_OPTIONS = new Set(["file", ...Object.keys(STREAM_SETTINGS), "handleSignals", "fileThread"]);

/** Resolve options against the environment. Throws a TypeError for an invalid option. */
export function resolveStreamConfig(options: StreamOptions = {}, env: NodeJS.ProcessEnv = process.env): StreamConfig {
  if (options === null || typeof options !== "object") throw new TypeError(`startStream(options) takes an object of options, got ${String(options)}`);
  for (const name of Object.keys(options)) {
    if (!KNOWN_OPTIONS.has(name)) throw new TypeError(`startStream: unknown option "${name}"; valid: ${[...KNOWN_OPTIONS].join(", ")}`);
  }
  const numbers = {} as Record<NumericOption, number>;
  for (const name of Object.keys(STREAM_SETTINGS) as NumericOption[]) numbers[name] = resolveNumber(name, options[name], env);
  if (options.handleSignals !== undefined && typeof options.handleSignals !== "boolean") {
    throw new TypeError(`startStream: handleSignals must be true or false, got ${String(options.handleSignals)}`);
  }
  return { file: resolveFile(options.file, env), ...numbers, handleSignals: options.handleSignals ?? true, fileThread: resolveFileThread(options.fileThread, env) };
}

function resolveFileThread(option: unknown, env: NodeJS.ProcessEnv): boolean {
  if (option !== undefined && typeof option !== "boolean") throw new TypeError(`startStream: fileThread must be true or false, got ${String(option)}`);
  const raw = env[FILE_THREAD_ENV];
  let fromEnv: boolean | undefined;
  if (raw !== undefined && raw.trim() !== "") {
    const value = raw.trim().toLowerCase();
    if (["1", "true", "yes", "on"].includes(value)) fromEnv = true;
    else if (["0", "false", "no", "off"].includes(value)) fromEnv = false;
    else warn(`env.${FILE_THREAD_ENV}`, `${FILE_THREAD_ENV}=${JSON.stringify(raw)} is not a boolean; valid: true/1/yes/on or false/0/no/off. Using ${option === undefined ? "the default true" : "the option given in code"}.`);
  }
  if (option === undefined) return fromEnv ?? true;
  if (fromEnv !== undefined && fromEnv !== option) warn("stream.config.fileThread", `startStream: option fileThread=${option} overrides ${FILE_THREAD_ENV}=${raw}; the option given in code wins`);
  return option;
}

function resolveNumber(name: NumericOption, option: unknown, env: NodeJS.ProcessEnv): number {
  const { env: variable, fallback, min, max } = STREAM_SETTINGS[name];
  const raw = env[variable];
  let fromEnv: number | undefined;
  if (raw !== undefined && raw.trim() !== "") {
    const value = Number(raw);
    if (Number.isInteger(value) && value >= min && value <= max) fromEnv = value;
    else warn(`env.${variable}`, `${variable}=${JSON.stringify(raw)} is not an integer from ${min} to ${max}; using ${option === undefined ? `the default ${fallback}` : "the option given in code"}.`);
  }
  if (option === undefined) return fromEnv ?? fallback;
  if (typeof option !== "number" || !Number.isInteger(option) || option < min || option > max) {
    throw new TypeError(`startStream: ${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(option)}`);
  }
  if (fromEnv !== undefined && fromEnv !== option) {
    warn(`stream.config.${name}`, `startStream: option ${name}=${option} overrides ${variable}=${raw}; the option given in code wins`);
  }
  return option;
}

function resolveFile(option: unknown, env: NodeJS.ProcessEnv): string | undefined {
  const raw = env[FILE_ENV];
  const fromEnv = raw !== undefined && raw.trim() !== "" ? resolve(raw) : undefined;
  if (option === undefined) return fromEnv;
  if (typeof option !== "string" || option.length === 0) throw new TypeError(`startStream: file must be a non-empty path, got ${JSON.stringify(option)}`);
  const file = resolve(option);
  if (fromEnv !== undefined && fromEnv !== file) warn("stream.config.file", `startStream: option file=${option} overrides ${FILE_ENV}=${raw}; the option given in code wins`);
  return file;
}
