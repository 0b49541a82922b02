/**
 * The files a run writes once, at start, on the controller only (AReaL's): `config.yaml`, the
 * user's run config with secrets redacted, and `version.json`, which code produced the run.
 *
 * `MetricLogger.initBackends(config, { runConfig, tags, group })` calls `writeRunFiles` when any
 * of them is given (`run.json` holds the tags and group); call it yourself to write them without a logger. Nothing here throws for an operational
 * fault: an unwritable directory is reported and the job goes on.
 */
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { writeFileAtomic } from "../io/atomic-write.js";
import { join } from "node:path";
import { describeError, reportError } from "../core/diagnostics.js";
import { isRecord } from "../core/json.js";
import { packageRoot } from "../core/module-worker.js";
import { stringProblem } from "../core/string-limits.js";

// The one redaction rule lives in core (every path that stores user values uses it); re-exported here.
export { DEFAULT_SECRET_KEY_PATTERNS, REDACTED, redactSecrets } from "../core/redact.js";
import { DEFAULT_SECRET_KEY_PATTERNS, redactSecrets } from "../core/redact.js";

/** Git facts of a working directory. */
interface GitVersion {
  readonly branch: string | null;
  readonly commit: string;
  readonly dirty: boolean;
}

/** What `version.json` holds. */
export interface VersionInfo {
  readonly rankscope: { readonly version: string };
  /** The git state of the user's working directory, or null when it is not a git repository (or git is missing). */
  readonly git: GitVersion | null;
  readonly node: string;
  readonly platform: string;
  readonly cwd: string;
  readonly startedAt: string;
}

function git(args: string[], cwd: string): Promise<string | null> {
  return new Promise((resolvePromise) => {
    execFile("git", args, { cwd, timeout: 5000, windowsHide: true }, (error, stdout) => {
      resolvePromise(error === null ? stdout.trim() : null);
    });
  });
}

/** Branch, commit and dirty flag of `cwd`'s git repository; null when it is none (never throws). */
async function gitVersion(cwd: string = process.cwd()): Promise<GitVersion | null> {
  const commit = await git(["rev-parse", "HEAD"], cwd);
  if (commit === null || commit.length === 0) return null;
  const [branch, status] = await Promise.all([
    git(["rev-parse", "--abbrev-ref", "HEAD"], cwd),
    git(["status", "--porcelain", "--untracked-files=no"], cwd),
  ]);
  return {
    branch: branch === null || branch === "HEAD" ? null : branch,
    commit,
    dirty: status !== null && status.length > 0,
  };
}

let packageVersion: string | undefined;

/** This package's version, from its package.json. */
export function rankscopeVersion(): string {
  if (packageVersion === undefined) {
    try {
      const text = readFileSync(new URL("package.json", packageRoot()), "utf8");
      const pkg: unknown = JSON.parse(text);
      packageVersion = isRecord(pkg) && pkg["version"] !== undefined ? String(pkg["version"]) : "unknown";
    } catch {
      packageVersion = "unknown";
    }
  }
  return packageVersion;
}

/** The version facts of this process, for `version.json`. */
async function versionInfo(cwd: string = process.cwd()): Promise<VersionInfo> {
  return {
    rankscope: { version: rankscopeVersion() },
    git: await gitVersion(cwd),
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    cwd,
    startedAt: new Date().toISOString(),
  };
}

/** What `run.json` holds: how the user labelled the run. */
interface RunMeta {
  readonly tags: readonly string[];
  readonly group: string | null;
}

/** The name of the run directory's labels file. */
export const RUN_META_FILE = "run.json";

/** The run's config (secrets redacted), in the run directory. */
export const CONFIG_FILE = "config.yaml";

/** The package version and git state of the run, in the run directory. */
export const VERSION_FILE = "version.json";

/**
 * Check `tags` and `group` as `initBackends` takes them; undefined when neither is given. Throws a
 * TypeError saying what is valid.
 */
export function validateRunMeta(options: { tags?: unknown; group?: unknown }): RunMeta | undefined {
  const { tags, group } = options;
  if (tags === undefined && group === undefined) return undefined;
  const isTag = (t: unknown): t is string =>
    typeof t === "string" && t.length > 0 && stringProblem(t, 256) === undefined;
  let tagList: readonly string[] = [];
  if (tags !== undefined) {
    if (!Array.isArray(tags) || tags.length > 100 || !tags.every(isTag)) {
      throw new TypeError(
        `tags must be an array of at most 100 non-empty strings (up to 256 characters each, no NUL or lone surrogate), e.g. ["baseline", "lr-sweep"]; got ${JSON.stringify(tags)}`,
      );
    }
    tagList = tags;
  }
  let groupName: string | null = null;
  if (group !== undefined && group !== null) {
    if (typeof group !== "string" || group.length === 0 || stringProblem(group, 256) !== undefined) {
      throw new TypeError(
        `group must be a non-empty string of up to 256 characters (no NUL or lone surrogate), e.g. "sweep-3"; got ${JSON.stringify(group)}`,
      );
    }
    groupName = group;
  }
  return { tags: [...new Set(tagList)], group: groupName };
}

/** Options of `writeRunFiles`. */
export interface RunFilesOptions {
  /** The user's run config, written to `config.yaml` with secrets redacted. Omit to write only `version.json`. */
  config?: unknown;
  /** Tags and group, written to `run.json` (see `validateRunMeta`). */
  meta?: RunMeta;
  /** Where to read git facts (default: `process.cwd()`). */
  cwd?: string;
  /** Extra key patterns to redact, besides `DEFAULT_SECRET_KEY_PATTERNS`. */
  secretKeys?: readonly RegExp[];
}

/** What `writeRunFiles` wrote (absolute paths) and the content it wrote. */
export interface RunFiles {
  readonly configPath: string | null;
  readonly versionPath: string | null;
  /** The config as written to `config.yaml` (secrets redacted); undefined when none was given. */
  readonly config: unknown;
  /** The content of `version.json`. */
  readonly version: VersionInfo;
  /** `run.json`, when tags or a group were given. */
  readonly metaPath?: string | null;
}

/**
 * Write `config.yaml` (when a config is given) and `version.json` into `runDir`, creating it.
 * A write failure is reported (`runFiles.write`) and the path returned as null.
 */
export async function writeRunFiles(runDir: string, options: RunFilesOptions = {}): Promise<RunFiles> {
  const patterns = [...DEFAULT_SECRET_KEY_PATTERNS, ...(options.secretKeys ?? [])];
  const write = async (name: string, text: string): Promise<string | null> => {
    const path = join(runDir, name);
    try {
      // Atomic: the dashboard may read config.yaml while a resumed run rewrites it.
      await writeFileAtomic(path, text);
      return path;
    } catch (error) {
      reportError(
        `runFiles.write:${name}`,
        `could not write ${path}: ${describeError(error)}; the run goes on without it`,
      );
      return null;
    }
  };
  let configPath: string | null = null;
  const config = options.config === undefined ? undefined : redactSecrets(options.config, patterns);
  if (options.config !== undefined) {
    // yaml loads only when a config is written, keeping `import "rankscope"` light.
    const { stringify } = await import("yaml");
    configPath = await write(CONFIG_FILE, stringify(config ?? null));
  }
  const metaPath =
    options.meta === undefined ? undefined : await write(RUN_META_FILE, `${JSON.stringify(options.meta, null, 2)}\n`);
  const version = await versionInfo(options.cwd);
  const versionPath = await write(VERSION_FILE, `${JSON.stringify(version, null, 2)}\n`);
  return { configPath, versionPath, config, version, ...(metaPath === undefined ? {} : { metaPath }) };
}

/** The key under which the run's hyperparameters carry `version.json`'s content. */
export const VERSION_INFO_KEY = "version_info";

/**
 * The run's hyperparameters as backends log them (W&B config, TensorBoard hparams, the store):
 * the redacted run config's keys (a config that is not a plain object goes under `config`) and
 * the version info under `version_info`.
 */
export function runHyperparams(files: Pick<RunFiles, "config" | "version">): Record<string, unknown> {
  const config = files.config;
  const base: Record<string, unknown> = config === undefined ? {} : isRecord(config) ? { ...config } : { config };
  base[VERSION_INFO_KEY] = files.version;
  return base;
}
