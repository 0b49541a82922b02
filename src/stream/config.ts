/**
 * The stream's configuration: options in code, then environment variables, then defaults, under
 * the one settings policy (`core/settings.ts`): an explicit option beats the environment (a
 * warning when both differ), and a bad option or variable is a TypeError saying what is valid.
 */
import type { Recorder } from "../core/rank-identity.js";
import { resolve } from "node:path";
import {
  flagKind,
  integerKind,
  rejectUnknownOptions,
  resolveSetting,
  textKind,
  type Setting,
  type SettingKind,
} from "../core/settings.js";

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
const STREAM_SETTINGS: Readonly<Record<NumericOption, { env: string; fallback: number; min: number; max: number }>> = {
  batchSize: { env: "RANKSCOPE_STREAM_BATCH", fallback: 100, min: 1, max: 1 << 20 },
  flushMs: { env: "RANKSCOPE_STREAM_FLUSH_MS", fallback: 1000, min: 1, max: 3_600_000 },
  values: { env: "RANKSCOPE_STREAM_VALUES", fallback: 10, min: 0, max: 4096 },
  capacity: { env: "RANKSCOPE_STREAM_CAPACITY", fallback: 16384, min: 2, max: 1 << 24 },
  exitWaitMs: { env: "RANKSCOPE_STREAM_EXIT_WAIT_MS", fallback: 2000, min: 0, max: 600_000 },
};

const FILE_ENV = "RANKSCOPE_STREAM_FILE";
const FILE_THREAD_ENV = "RANKSCOPE_STREAM_FILE_THREAD";
const KNOWN_OPTIONS = ["file", ...Object.keys(STREAM_SETTINGS), "handleSignals", "fileThread"];

/** The stream's settings, through the one resolver (option → environment → default; invalid → TypeError). */
function setting<T>(option: string, env: string | undefined, kind: SettingKind<T>, fallback: T): Setting<T> {
  return { owner: "startStream", option, ...(env === undefined ? {} : { env }), kind, fallback };
}

const FILE_SETTING = setting<string | undefined>("file", FILE_ENV, textKind(undefined, "a non-empty path"), undefined);

/** The stream file set in the environment (`RANKSCOPE_STREAM_FILE`), or undefined. */
export function streamFileFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return resolveSetting(FILE_SETTING, undefined, env);
}

/** Resolve options against the environment. Throws a TypeError for an invalid option or variable. */
export function resolveStreamConfig(options: StreamOptions = {}, env: NodeJS.ProcessEnv = process.env): StreamConfig {
  if (options === null || typeof options !== "object")
    throw new TypeError(`startStream(options) takes an object of options, got ${String(options)}`);
  rejectUnknownOptions("startStream", options, KNOWN_OPTIONS);
  const numeric = (name: NumericOption): number => {
    const { env: variable, fallback, min, max } = STREAM_SETTINGS[name];
    return resolveSetting(setting(name, variable, integerKind(min, max), fallback), options[name], env);
  };
  const batchSize = numeric("batchSize");
  const flushMs = numeric("flushMs");
  const values = numeric("values");
  const capacity = numeric("capacity");
  const exitWaitMs = numeric("exitWaitMs");
  const file = resolveSetting(FILE_SETTING, options.file, env);
  return {
    file: file === undefined ? undefined : resolve(file),
    batchSize,
    flushMs,
    values,
    capacity,
    exitWaitMs,
    handleSignals: resolveSetting(setting("handleSignals", undefined, flagKind, true), options.handleSignals, env),
    fileThread: resolveSetting(setting("fileThread", FILE_THREAD_ENV, flagKind, true), options.fileThread, env),
  };
}

/** A stream file's name in `{runDir}/streams/`: `controller.jsonl` for the controller, `rank-{r}.jsonl` for rank r. */
export function streamFileName(recorder: Pick<Recorder, "role" | "rank">): string {
  return recorder.role === "controller" ? "controller.jsonl" : `rank-${recorder.rank}.jsonl`;
}
