/**
 * The controller logger's options: what `getOrCreateMetricLogger`, `initBackends`, `flush`,
 * `logDirect` and `shutdown` take and return, how the logger's own options are checked and
 * resolved (option → environment → default), and which of them a later
 * `getOrCreateMetricLogger` call must not contradict.
 */
import { randomBytes } from "node:crypto";
import { resolve as resolvePath } from "node:path";
import { isDeepStrictEqual } from "node:util";
import type { AlertOptions } from "../alerts/options.js";
import type { AlertEvent } from "../core/alert.js";
import type { Metric } from "../core/metric.js";
import { DEFAULT_PROCESS_NAME } from "../core/rank-identity.js";
import {
  describeValue,
  flagKind,
  integerKind,
  rejectUnknownOptions,
  resolveSetting,
  textKind,
  type Setting,
} from "../core/settings.js";
import { claimRunLocation, type RunDirOptions, type RunLocation } from "../run/run-dir.js";
import { newRunSecret, runSecretSetting } from "../core/run-secret.js";
import { DEFAULT_BACKEND_DEADLINE_MS, type BackendDeliveryStats } from "../pipeline/backend-set.js";
import type { BackendsConfig } from "../pipeline/config.js";
import type { StragglerReport } from "../core/straggler-report.js";
import { resolveStragglerOptions, type ResolvedStragglerOptions, type StragglerOptions } from "./straggler-options.js";

/** Options of `getOrCreateMetricLogger`. */
export interface MetricLoggerOptions extends RunDirOptions {
  /** Name of this process, e.g. `Controller` (default). */
  processName?: string;
  /** How long `flush` waits for ranks before logging what arrived (default 5000 ms, env RANKSCOPE_FLUSH_DEADLINE_MS). */
  flushDeadlineMs?: number;
  /** How long `shutdown` waits for ranks and backends (default 5000 ms, env RANKSCOPE_SHUTDOWN_DEADLINE_MS). */
  shutdownDeadlineMs?: number;
  /**
   * How long one call of a backend (`init`, `logBatch`, `logHyperparams`, `finish`…) may take
   * before the caller and the other backends go on without it; the miss is reported by name and
   * counted (default 10 000 ms, env RANKSCOPE_BACKEND_DEADLINE_MS; a backend's own `deadlineMs`
   * option beats it). Applies on the controller and, for per-rank backends, in every rank.
   */
  backendDeadlineMs?: number;
  /**
   * The total time every part gets to write what it holds when the process ends by SIGINT/SIGTERM
   * or at `beforeExit` without `shutdown()` (default 5000 ms, env RANKSCOPE_DRAIN_DEADLINE_MS); see
   * docs/lifecycle.md.
   */
  drainDeadlineMs?: number;
  /**
   * Id of this run in messages between the controller and its ranks (NATS subjects are namespaced
   * by it, so two runs on one server never see each other). Letters, digits, `_`, `-`. Default: a
   * fresh random id (env RANKSCOPE_RUN_ID).
   */
  runId?: string;
  /**
   * The secret that seals this run's messages over NATS (docs/security.md): ranks and host agents
   * prove with it that their messages come from the run, and read what only the run may read.
   * `spawnRanks` hands it to the ranks it starts; give ranks and agents that join on their own the
   * same value through `RANKSCOPE_RUN_SECRET` (their environment, never a command line). At least
   * 32 printable characters (`openssl rand -base64 32`). Default: a fresh random secret (env
   * RANKSCOPE_RUN_SECRET); a controller restarted on the same run id needs the same one.
   */
  runSecret?: string;
  /**
   * Do not print where the run's data went (the run directory and how to open the dashboard,
   * two lines on stderr at `shutdown()`). Default false; env RANKSCOPE_QUIET.
   */
  quiet?: boolean;
  /**
   * Alerts (docs/alerts.md): rules judged at every flush on the reduced values and by a watchdog
   * between flushes, recorded in the run (a line on stderr per episode, the text log, the store's
   * Alerts) and POSTed to a webhook. Default: `nonfinite` and `rank_lost` on; given, or with
   * `RANKSCOPE_ALERT_WEBHOOK` set, all four built-in rules (when it has no `rules`). `false` (or
   * env `RANKSCOPE_ALERTS=0` with no option) turns them off. The user's own `alert()` calls are
   * recorded either way. At `shutdown()` episodes still firing end with the run (`ended`).
   */
  alerts?: AlertOptions | false;
  /**
   * Straggler attribution at every flush from the ranks' Tracer timings (docs/stragglers.md): its
   * options, or `false` to turn it off. Default on, with `DEFAULT_STRAGGLER_OPTIONS`.
   */
  stragglers?: StragglerOptions | false;
}

/** Options of `initBackends`. */
export interface InitBackendsOptions {
  /** Resume a run at this step (a restart from a checkpoint). */
  resumeStep?: number;
  /**
   * The user's run config (hyperparameters, experiment settings). When given, the controller
   * writes `config.yaml` (secrets such as API keys redacted) and `version.json` (package version,
   * git branch/commit/dirty of the working directory) into the run directory at start, and logs
   * both (redacted, the version info under `version_info`) as the run's hyperparameters: W&B's
   * config, TensorBoard's hparams, the store's hyperparams — in the global backends and, through
   * the ranks' init, the per-rank ones.
   */
  runConfig?: unknown;
  /** Labels of this run (`["baseline", "lr-sweep"]`), kept in the run directory's `run.json`; the dashboard shows and filters by them. */
  tags?: readonly string[];
  /** The group this run belongs to (`"sweep-3"`), kept in `run.json`; the dashboard groups runs by it. */
  group?: string;
  /**
   * Replace the backends of an earlier `initBackends` (default false: a second call is an Error).
   * The old backends log what they kept (`every: N`) and finish first; the ranks get the new
   * per-rank backends. Values already flushed stay where they were logged.
   */
  replace?: boolean;
}

/** Options of `shutdown`. */
export interface ShutdownOptions {
  /** Wait at most this long for ranks and backends (default: the logger's `shutdownDeadlineMs`). */
  deadlineMs?: number;
}

/** Options of `flush`. */
export interface FlushOptions {
  /** Do not warn when `step` repeats the last one (faces that log several dicts per step). */
  allowRepeatedStep?: boolean;
}

/** Options of `logDirect`. */
export interface LogDirectOptions {
  /** The x value: the training step, or the value on `axis`. */
  step: number;
  /** The metrics' own x-axis (e.g. `system/step`); absent = the training step. */
  axis?: string;
  /** When the values were taken (ms since the epoch; default now). */
  timestamp?: number;
}

/** What one `flush(step)` did. */
export interface FlushResult {
  readonly step: number;
  /** The merged metrics handed to the `global_reduce` backends. */
  readonly metrics: readonly Metric[];
  /** Ranks registered with the controller (its own in-process collector is not counted). */
  readonly ranksExpected: number;
  /** Of those, how many answered by the deadline. */
  readonly ranksReporting: number;
  /** Ranks that did not answer by the deadline. */
  readonly missingRanks: readonly string[];
  /**
   * Ranks lost so far in the run (their process or thread ended without being shut down, or a
   * NATS rank fell silent and has not answered again); absent while none is. Counted per flush as
   * `rankscope/ranks_lost`.
   */
  readonly lostRanks?: readonly string[];
  /**
   * Calls each controller-side backend did not get (missed its deadline, skipped while hung, or
   * failed), cumulative since `initBackends`, by config name; only backends that missed any.
   * Per flush (and summed over ranks for per-rank backends) it is `rankscope/backend_undelivered/{name}`.
   */
  readonly undelivered: Readonly<Record<string, BackendDeliveryStats>>;
  /** True if backends were not initialised yet: the values wait for the first flush after `initBackends`. */
  readonly beforeInit?: boolean;
  /** The alerts this flush raised (episodes that started or ended), when any (docs/alerts.md). */
  readonly alerts?: readonly AlertEvent[];
  /**
   * Straggler attribution at this flush (docs/stragglers.md): the ranks named slow, the skew, the
   * chronic ones. Absent when no rank sent step timings (no Tracer ran in the ranks) or when
   * attribution is off (`stragglers: false`).
   */
  readonly stragglers?: StragglerReport;
}

/**
 * The backends used when `initBackends()` gets no config: the console, and the embedded store
 * (`metrics.db` in the run directory, what `rankscope ui` shows) with the values reduced across ranks.
 */
export const DEFAULT_BACKENDS: BackendsConfig = {
  console: { loggingMode: "global_reduce" },
  store: { loggingMode: "global_reduce" },
};

export { GLOBAL_DISPLAY_NAME } from "../core/rank-identity.js";

/** Flushes kept before `initBackends` (for the first flush after it); older ones are dropped and counted. */
export const MAX_FLUSHES_BEFORE_INIT = 1000;

/** Who the options belong to, in error messages. */
export const OWNER = "getOrCreateMetricLogger";
const DEADLINE_KIND = integerKind(1, 3_600_000);
/** The logger's settings (the one resolver: option → environment → default). */
export const LOGGER_SETTINGS = {
  flushDeadlineMs: {
    owner: OWNER,
    option: "flushDeadlineMs",
    env: "RANKSCOPE_FLUSH_DEADLINE_MS",
    kind: DEADLINE_KIND,
    fallback: 5000,
  },
  shutdownDeadlineMs: {
    owner: OWNER,
    option: "shutdownDeadlineMs",
    env: "RANKSCOPE_SHUTDOWN_DEADLINE_MS",
    kind: DEADLINE_KIND,
    fallback: 5000,
  },
  quiet: { owner: OWNER, option: "quiet", env: "RANKSCOPE_QUIET", kind: flagKind, fallback: false },
  backendDeadlineMs: {
    owner: OWNER,
    option: "backendDeadlineMs",
    env: "RANKSCOPE_BACKEND_DEADLINE_MS",
    kind: DEADLINE_KIND,
    fallback: DEFAULT_BACKEND_DEADLINE_MS,
  },
  runId: {
    owner: OWNER,
    option: "runId",
    env: "RANKSCOPE_RUN_ID",
    kind: textKind(/^[A-Za-z0-9_-]{1,128}$/, '1 to 128 letters, digits, "_" or "-" (it is part of NATS subjects)'),
    fallback: undefined,
  },
} satisfies { readonly [K in keyof MetricLoggerOptions]?: Setting<unknown> & { option: K } };

/** The logger's options as resolved at creation (what a later call is compared with). */
export interface ResolvedLoggerOptions {
  readonly processName: string;
  readonly run: RunLocation;
  readonly flushDeadlineMs: number;
  readonly shutdownDeadlineMs: number;
  readonly backendDeadlineMs: number;
  readonly quiet: boolean;
  readonly runId: string;
  /** The `alerts` option as given (compared as a value with a later call's). */
  readonly alertOptions: AlertOptions | false | undefined;
  readonly runSecret: string;
  /** Straggler attribution's options; null when it is off. */
  readonly stragglers: ResolvedStragglerOptions | null;
}

/**
 * Check the options of `getOrCreateMetricLogger` (an object of known options; a TypeError naming
 * what was wrong otherwise) and resolve each from the option, the environment, or its default.
 */
export function resolveLoggerOptions(options: MetricLoggerOptions): ResolvedLoggerOptions {
  if (options === null || typeof options !== "object")
    throw new TypeError(`${OWNER}(options) takes an object of options, got ${describeValue(options)}`);
  rejectUnknownOptions(OWNER, options, LOGGER_OPTIONS);
  return {
    processName: options.processName ?? DEFAULT_PROCESS_NAME,
    run: claimRunLocation(options),
    flushDeadlineMs: resolveSetting(LOGGER_SETTINGS.flushDeadlineMs, options.flushDeadlineMs),
    shutdownDeadlineMs: resolveSetting(LOGGER_SETTINGS.shutdownDeadlineMs, options.shutdownDeadlineMs),
    backendDeadlineMs: resolveSetting(LOGGER_SETTINGS.backendDeadlineMs, options.backendDeadlineMs),
    quiet: resolveSetting(LOGGER_SETTINGS.quiet, options.quiet),
    runId: resolveSetting<string | undefined>(LOGGER_SETTINGS.runId, options.runId) ?? randomBytes(6).toString("hex"),
    alertOptions: options.alerts,
    runSecret: resolveSetting(runSecretSetting(OWNER), options.runSecret) ?? newRunSecret(),
    stragglers: resolveStragglerOptions(options.stragglers),
  };
}

/**
 * Every option of `getOrCreateMetricLogger`, once: what the existing logger holds for it, which a
 * later call's value must agree with. Typed by `MetricLoggerOptions`' keys, so an option added to
 * the interface and not here (or here and not there) is a compile error; the known names (others
 * are a TypeError naming them) come from this table.
 */
const LOGGER_OPTION_TABLE: {
  readonly [K in keyof Required<MetricLoggerOptions>]: (existing: ResolvedLoggerOptions) => unknown;
} = {
  processName: (e) => e.processName,
  flushDeadlineMs: (e) => e.flushDeadlineMs,
  shutdownDeadlineMs: (e) => e.shutdownDeadlineMs,
  backendDeadlineMs: (e) => e.backendDeadlineMs,
  // Process-wide (core/lifecycle.ts), not kept by the logger: given again, it is a conflict.
  drainDeadlineMs: () => undefined,
  runId: (e) => e.runId,
  runSecret: (e) => e.runSecret,
  quiet: (e) => e.quiet,
  alerts: (e) => e.alertOptions,
  stragglers: (e) => JSON.stringify(e.stragglers),
  root: (e) => e.run.root,
  experiment: (e) => e.run.experiment,
  trial: (e) => e.run.trial,
  runDir: (e) => e.run.runDir,
};

/** Every option `getOrCreateMetricLogger` takes. */
const LOGGER_OPTIONS = Object.keys(LOGGER_OPTION_TABLE);

function isLoggerOption(key: string): key is keyof MetricLoggerOptions {
  return LOGGER_OPTIONS.includes(key);
}

/** Options that must agree with the existing logger's when given again. */
export function conflictingOptions(existing: ResolvedLoggerOptions, options: MetricLoggerOptions): string[] {
  const conflicts: string[] = [];
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined) continue;
    // Compared with what the existing logger resolved, so `{ runDir }` naming its directory agrees.
    const has = isLoggerOption(key) ? LOGGER_OPTION_TABLE[key](existing) : undefined;
    const wanted =
      (key === "root" || key === "runDir") && typeof value === "string"
        ? resolvePath(value)
        : key === "stragglers"
          ? JSON.stringify(resolveStragglerOptions(value))
          : value;
    if (key === "alerts" ? isDeepStrictEqual(value, has) : wanted === has) continue;
    conflicts.push(
      key === "runSecret"
        ? "runSecret: another secret (not shown)"
        : `${key}: ${describeValue(value)} (the logger has ${describeValue(has)})`,
    );
  }
  return conflicts;
}
