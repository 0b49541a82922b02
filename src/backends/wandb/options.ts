/**
 * The `wandb` backend's options: what a config may say, checked before anything starts, and the
 * values resolved from options, then the environment (the variables W&B's own clients read), then
 * defaults.
 *
 * The API key is resolved here and nowhere else, and is kept out of every object that is logged,
 * spooled or shown in an error: only `authHeader` (built in `http.ts`) ever sees it.
 */
import { redactRecord } from "../../core/redact.js";
import { enumKind, resolveSetting, textKind, type Setting, type SettingKind } from "../../core/settings.js";
import { z } from "zod";
import type { BackendOptions } from "../backend.js";
import { checkOptions, internalOption, says, type OptionsOf } from "../option-schema.js";

/** `online` sends live (spooling what cannot be sent), `offline` spools everything, `disabled` does nothing. */
export type WandbMode = "online" | "offline" | "disabled";

/** W&B's resume policies: `allow` resumes a run that exists, `must` fails if it does not, `never` fails if it does. */
export type WandbResume = "allow" | "must" | "never";

const positiveInt = (): z.ZodOptional<z.ZodNumber> =>
  z
    .number(says((_got, name) => `${name} must be a positive integer`))
    .int()
    .positive()
    .optional();

const text = (): z.ZodOptional<z.ZodString> =>
  z
    .string({
      errorMap: (issue) => ({
        message: `${String(issue.path[0])} must ${issue.code === "invalid_type" ? "be a string" : "not be empty"}`,
      }),
    })
    .min(1)
    .optional();

const RUN_ID = /^[A-Za-z0-9_.-]+$/;

/** The options a `wandb` backend config may carry besides the common ones, declared once (type, names and checks; `option-schema.ts`). */
export const WANDB_OPTIONS = {
  /** W&B entity (user or team); default `WANDB_ENTITY`, else the API key's default entity. */
  entity: text(),
  /** Project; default `WANDB_PROJECT`, else the experiment name. */
  project: text(),
  /** Display name; default the trial name. Per-rank runs are named `{name}_{rankName}`. */
  name: text(),
  /** Group; default `{experiment}_{trial}` (AReaL's). Per-rank runs always share it. */
  group: text(),
  /** Job type, e.g. `train`. */
  jobType: text(),
  /** Tags of the run. */
  tags: z
    .array(
      z.string(says(() => "tags must be an array of strings")),
      says(() => "tags must be an array of strings"),
    )
    .optional(),
  /** Notes of the run. */
  notes: z.string(says(() => "notes must be a string")).optional(),
  /** Run config (hyperparameters) sent with the run; `logHyperparams` adds to it. */
  config: z
    .record(
      z.unknown(),
      says(() => "config must be an object of hyperparameters"),
    )
    .optional(),
  /** The run id; default derived from experiment and trial (and the rank name per rank). */
  runId: z
    .string(says(() => "runId must be a string"))
    .regex(RUN_ID, "runId may contain only letters, digits, '_', '-' and '.' (W&B run ids are URL path segments)")
    .optional(),
  /** Resume policy (default `allow`, as AReaL). */
  resume: z
    .enum(
      ["allow", "must", "never"],
      says(() => "resume must be one of: allow, must, never"),
    )
    .optional(),
  /** Default `WANDB_MODE` (`offline`/`dryrun` → offline, `disabled`), else `online`. */
  mode: z
    .enum(
      ["online", "offline", "disabled"],
      says(() => "mode must be one of: online, offline, disabled"),
    )
    .optional(),
  /** Server base URL; default `WANDB_BASE_URL`, else `https://api.wandb.ai` (AReaL's `wandb_base_url`). */
  baseUrl: z
    .string(says(() => "baseUrl must be a string"))
    .regex(
      /^https?:\/\/[^/\s]+/,
      "baseUrl must be an http(s) URL such as https://api.wandb.ai or http://wandb.internal:8080",
    )
    .optional(),
  /** API key; default `WANDB_API_KEY`. Prefer the environment: config files get written to disk. */
  apiKey: text(),
  /** Bound on history bytes waiting to be sent; past it the writer spools to disk (default 32 MiB). */
  maxQueuedBytes: positiveInt(),
  /** Largest file-stream request body in bytes (default 1 MiB). */
  maxRequestBytes: positiveInt(),
  /** Timeout of one HTTP request (default 30 000 ms). */
  requestTimeoutMs: positiveInt(),
  /** First retry delay (default 500 ms); doubled per attempt, with jitter. */
  retryInitialMs: positiveInt(),
  /** Longest retry delay (default 30 000 ms). */
  retryMaxMs: positiveInt(),
  /** How long one request may keep failing before the writer spools instead (default 120 000 ms). */
  retryBudgetMs: positiveInt(),
  /** How long `finish()` waits for unsent data before spooling it (default 4 000 ms). */
  finishTimeoutMs: positiveInt(),
  /** Least time between two file-stream requests, so lines batch up (default 1 000 ms; 0 sends at once). */
  sendIntervalMs: z
    .number(says(() => "sendIntervalMs must be a non-negative integer"))
    .int()
    .min(0)
    .optional(),
  /** Also chart rankscope's own keys (`…__count`, `rankscope/…`); default false. */
  internal: internalOption("charts"),
};

/** The options a `wandb` backend config may carry besides the common ones. */
export type WandbOptions = OptionsOf<typeof WANDB_OPTIONS>;

const WANDB_SCHEMA = z.object(WANDB_OPTIONS);

export const DEFAULT_BASE_URL = "https://api.wandb.ai";

/** Check a `wandb` config beyond its declared options: W&B's environment variables (a bad WANDB_MODE is a TypeError at initBackends, not a backend left out). */
export function validateWandbOptions(options: BackendOptions): void {
  resolveWandbOptions(options);
}

/** The backend's own options, checked against their declaration; a TypeError listing every problem (never echoing the API key). */
function parseWandbOptions(options: BackendOptions): WandbOptions {
  return checkOptions('backend "wandb"', WANDB_SCHEMA, options);
}

/** Timing and size limits of the sender, resolved. */
export interface SenderLimits {
  readonly maxQueuedBytes: number;
  readonly maxRequestBytes: number;
  readonly requestTimeoutMs: number;
  readonly retryInitialMs: number;
  readonly retryMaxMs: number;
  readonly retryBudgetMs: number;
  readonly finishTimeoutMs: number;
  readonly sendIntervalMs: number;
}

export const DEFAULT_LIMITS: SenderLimits = {
  maxQueuedBytes: 32 * 1024 * 1024,
  maxRequestBytes: 1024 * 1024,
  requestTimeoutMs: 30_000,
  retryInitialMs: 500,
  retryMaxMs: 30_000,
  retryBudgetMs: 120_000,
  finishTimeoutMs: 4_000,
  sendIntervalMs: 1_000,
};

/** Options after defaults and the environment; `apiKey` is the only secret and is never serialised. */
export interface ResolvedWandbOptions {
  readonly mode: WandbMode;
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  readonly entity: string | undefined;
  readonly project: string | undefined;
  readonly name: string | undefined;
  readonly group: string | undefined;
  readonly jobType: string | undefined;
  readonly tags: readonly string[] | undefined;
  readonly notes: string | undefined;
  readonly config: Readonly<Record<string, unknown>>;
  readonly runId: string | undefined;
  readonly resume: WandbResume;
  readonly limits: SenderLimits;
  /** Chart rankscope's own keys too (`internal: true`). */
  readonly internal: boolean;
}

/** The settings W&B's own environment variables can give (the one resolver: option → environment → default). */
function wandbSetting<T>(option: string, env: string, kind: SettingKind<T>, fallback: T, secret = false): Setting<T> {
  return { owner: "wandb backend", option, env, kind, fallback, secret };
}
const WANDB_MODES = ["online", "offline", "dryrun", "disabled"] as const;

/** W&B's `dryrun` is its old name for `offline`. */
function modeOf(mode: (typeof WANDB_MODES)[number]): WandbMode {
  return mode === "dryrun" ? "offline" : mode;
}

/** Strip trailing slashes so `{base}/graphql` never doubles one. */
export function normaliseBaseUrl(url: string): string {
  return url.replace(/\/+$/, "");
}

/** Resolve options against the environment (`WANDB_API_KEY`, `WANDB_BASE_URL`, `WANDB_ENTITY`, `WANDB_PROJECT`, `WANDB_MODE`). */
export function resolveWandbOptions(
  options: BackendOptions,
  env: NodeJS.ProcessEnv = process.env,
): ResolvedWandbOptions {
  const o = parseWandbOptions(options);
  const limits: SenderLimits = {
    maxQueuedBytes: o.maxQueuedBytes ?? DEFAULT_LIMITS.maxQueuedBytes,
    maxRequestBytes: o.maxRequestBytes ?? DEFAULT_LIMITS.maxRequestBytes,
    requestTimeoutMs: o.requestTimeoutMs ?? DEFAULT_LIMITS.requestTimeoutMs,
    retryInitialMs: o.retryInitialMs ?? DEFAULT_LIMITS.retryInitialMs,
    retryMaxMs: o.retryMaxMs ?? DEFAULT_LIMITS.retryMaxMs,
    retryBudgetMs: o.retryBudgetMs ?? DEFAULT_LIMITS.retryBudgetMs,
    finishTimeoutMs: o.finishTimeoutMs ?? DEFAULT_LIMITS.finishTimeoutMs,
    sendIntervalMs: o.sendIntervalMs ?? DEFAULT_LIMITS.sendIntervalMs,
  };
  return {
    mode: modeOf(resolveSetting(wandbSetting("mode", "WANDB_MODE", enumKind(WANDB_MODES), "online"), o.mode, env)),
    baseUrl: normaliseBaseUrl(
      resolveSetting(
        wandbSetting("baseUrl", "WANDB_BASE_URL", textKind(undefined, "a URL"), DEFAULT_BASE_URL),
        o.baseUrl,
        env,
      ),
    ),
    apiKey: resolveSetting(
      wandbSetting<string | undefined>("apiKey", "WANDB_API_KEY", textKind(), undefined, true),
      o.apiKey,
      env,
    ),
    entity: resolveSetting(
      wandbSetting<string | undefined>("entity", "WANDB_ENTITY", textKind(), undefined),
      o.entity,
      env,
    ),
    project: resolveSetting(
      wandbSetting<string | undefined>("project", "WANDB_PROJECT", textKind(), undefined),
      o.project,
      env,
    ),
    name: o.name,
    group: o.group,
    jobType: o.jobType,
    tags: o.tags,
    notes: o.notes,
    // The one redaction rule: a secret in the run config never reaches W&B.
    config: redactRecord(o.config ?? {}),
    runId: o.runId,
    resume: o.resume ?? "allow",
    limits,
    internal: o.internal ?? false,
  };
}

/** A W&B-safe run id from free text: characters outside `[A-Za-z0-9_.-]` become `-`. */
export function sanitiseRunId(text: string): string {
  return text.replace(/[^A-Za-z0-9_.-]+/g, "-").slice(0, 128);
}
