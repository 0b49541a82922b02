/**
 * The packages only some features need: optional peer dependencies of rankscope (package.json's
 * `peerDependencies` with `peerDependenciesMeta.optional`), so `npm install rankscope` does not bring
 * them. Each is loaded here, synchronously, when a module of its feature is first evaluated (never
 * by `import "rankscope"`); a missing one is an error naming the `npm install` line that adds it.
 *
 * The line carries the same ranges as package.json (`test/core/optional-packages.test.ts` compares
 * them), so npm resolves versions rankscope was tested with.
 */
import { createRequire } from "node:module";
import { errorCode } from "./errors.js";

/** What each optional feature needs: the packages and the ranges of package.json's peerDependencies. */
export const OPTIONAL_FEATURES = {
  otlp: {
    what: "the otlp backend (rankscope/otlp)",
    packages: {
      "@opentelemetry/api": "~1.9.1",
      "@opentelemetry/exporter-metrics-otlp-proto": "^0.223.0",
      "@opentelemetry/resources": "^2.12.1",
      "@opentelemetry/sdk-metrics": "^2.12.1",
      "@opentelemetry/semantic-conventions": "^1.45.0",
    },
  },
  server: {
    what: "the team server (rankscope server)",
    packages: { pg: "^8.23.1", "pg-copy-streams": "^7.0.0", "prom-client": "^15.1.3" },
  },
  nats: {
    what: "ranks over NATS (rankscope/nats, rankscope/host, joinRun with a NATS URL)",
    packages: { "@nats-io/transport-node": "~3.3.1" },
  },
  prometheus: {
    what: "the prometheus and prometheus_remote_write backends (rankscope/prometheus)",
    packages: { "prom-client": "^15.1.3" },
  },
  sqlite: {
    what: "the store (the store backend, rankscope/store, rankscope ui) on Node.js 20, where better-sqlite3 13 (rankscope's own, optional dependency better-sqlite3-napi) does not run,",
    packages: { "better-sqlite3": "^12.11.1" },
  },
} as const;

export type OptionalFeature = keyof typeof OPTIONAL_FEATURES;

/** The `npm install` line that adds every package of `feature`, with package.json's ranges. */
export function installLine(feature: OptionalFeature): string {
  const packages: Readonly<Record<string, string>> = OPTIONAL_FEATURES[feature].packages;
  return `npm install ${Object.entries(packages)
    .map(([name, range]) => `${name}@${range}`)
    .join(" ")}`;
}

/** A package an optional feature needs is not installed. */
export class MissingPackageError extends Error {
  override readonly name = "MissingPackageError";
  readonly code = "RANKSCOPE_MISSING_PACKAGE";
  constructor(
    readonly feature: OptionalFeature,
    readonly packageName: string,
  ) {
    super(
      `${OPTIONAL_FEATURES[feature].what} needs ${packageName}, which is not installed ` +
        `(an optional peer dependency of rankscope). Install it with: ${installLine(feature)}`,
    );
  }
}

const require = createRequire(import.meta.url);

/**
 * `require(name)` of one of `feature`'s packages, typed as the caller names it
 * (`requireOptional<typeof import("pg")>("server", "pg")`); a missing package throws
 * `MissingPackageError`. Only a failure to find `name` itself is turned into it: a package that is
 * there but broken (one of its own dependencies missing) throws its own error. `require`, not
 * `import()`: no top-level await in the modules that use it (a CommonJS user may `require()` them on
 * Node 22+), and every one of these packages is CommonJS where Node resolves it, so this is the
 * instance an `import` would give.
 */
export function requireOptional<T>(feature: OptionalFeature, name: string): T {
  if (!(name in OPTIONAL_FEATURES[feature].packages)) throw new TypeError(`${name} is not a package of ${feature}`);
  try {
    return require(name);
  } catch (error) {
    if (isNotFound(error, name)) throw new MissingPackageError(feature, name);
    throw error;
  }
}

function isNotFound(error: unknown, name: string): boolean {
  const code = errorCode(error);
  if (code !== "MODULE_NOT_FOUND" && code !== "ERR_MODULE_NOT_FOUND") return false;
  const message = error instanceof Error ? error.message : "";
  // "Cannot find module 'pg'" (require); a missing dependency of the package names another module.
  return message.includes(`'${name}'`);
}
