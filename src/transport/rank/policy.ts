/**
 * What a rank's own side allows requests from the wire to make it do. Authentication
 * (`protocol/seal.ts`) proves a message comes from the run; this bounds what even an authenticated
 * message can do, because every rank and agent of a run holds the same secret: a rank imports only
 * modules it was given at its own start, and per-rank backend configs received over NATS cannot
 * send data (and the rank's secrets, such as `WANDB_API_KEY`) to a destination the rank did not
 * allow, nor write files outside the run directory.
 *
 * Ranks on a worker's MessagePort or a child's IPC channel are inside the trust boundary: the
 * channel is private to the process that started them, which configured them (`trustInit`).
 */
import { isAbsolute, relative, resolve, sep } from "node:path";
import { pathToFileURL } from "node:url";
import type { ValidatedBackend } from "../../pipeline/config.js";
import { reportIgnored } from "../protocol/messages.js";

/** What a rank's own side allows (its assignment, `joinRun` options or environment; never the wire). */
export interface RankPolicy {
  /** The modules (file URLs) a `start` request may ask this rank to import. */
  readonly modules: readonly string[];
  /** Per-rank backend configs come over a channel inside the trust boundary: taken as they are. */
  readonly trustInit: boolean;
  /** URL origins (`https://wandb.example.com:8080`) per-rank backends configured from the wire may send data to. */
  readonly destinations: readonly string[];
}

/** A request refused by the rank's own policy (counted as `refused`). */
class RefusedRequestError extends Error {
  override name = "RefusedRequestError";
}

/** The file URL of a module given as a path or URL (how `start` requests and policies name modules). */
export function moduleUrl(module: string | URL): string {
  if (module instanceof URL) return module.href;
  if (module.startsWith("file:")) return new URL(module).href;
  return pathToFileURL(isAbsolute(module) ? module : resolve(process.cwd(), module)).href;
}

/** The origin of a destination URL, normalised (`https://Host:443/x` → `https://host`); undefined when it is not a URL. */
export function originOf(url: string): string | undefined {
  try {
    const origin = new URL(url).origin;
    return origin === "null" ? undefined : origin;
  } catch {
    return undefined;
  }
}

/** Refuse (count, report, throw) a request the rank's policy does not allow. */
function refuse(what: string): never {
  reportIgnored("refused", what);
  throw new RefusedRequestError(what);
}

/** The module a `start` request names, if this rank was allowed it at its start; refused otherwise. */
export function allowedModule(policy: RankPolicy, requested: string, rankName: string): string {
  let url: string | undefined;
  try {
    url = moduleUrl(requested);
  } catch {
    url = undefined;
  }
  if (url !== undefined && policy.modules.includes(url)) return url;
  const allowed =
    policy.modules.length === 0 ? "none (pass joinRun({ modules }) to allow one)" : policy.modules.join(", ");
  return refuse(
    `rank ${rankName} was asked to import ${JSON.stringify(requested.slice(0, 200))}, which it was not given at its start (allowed: ${allowed})`,
  );
}

/**
 * Check per-rank backend configs received from the wire against the rank's policy: a destination
 * option (`destinationOptions`: wandb's `baseUrl`, otlp's `url`, …) must name an allowed origin, a
 * path option (`pathOptions`: jsonl's `file`, tensorboard's `dir`) must stay inside the run
 * directory, which must itself be an absolute path without `..`. Throws `RefusedRequestError`
 * (counted) naming the option and how to allow it.
 */
export function checkWireBackends(
  validated: readonly ValidatedBackend[],
  runDir: string,
  policy: RankPolicy,
  rankName: string,
): void {
  if (policy.trustInit) return;
  if (!isAbsolute(runDir) || resolve(runDir) !== runDir.replace(/[/\\]+$/, "")) {
    refuse(
      `rank ${rankName} was sent run directory ${JSON.stringify(runDir.slice(0, 200))}; over NATS it must be an absolute path without "." or ".." segments`,
    );
  }
  for (const backend of validated) {
    for (const option of backend.registration.destinationOptions ?? []) {
      const value = backend.options[option];
      if (value === undefined) continue;
      const origin = typeof value === "string" ? originOf(value) : undefined;
      if (origin !== undefined && policy.destinations.includes(origin)) continue;
      refuse(
        `rank ${rankName} was sent backend "${backend.name}" with ${option} ${JSON.stringify(String(value).slice(0, 200))}, a destination this rank does not allow; ` +
          `set it on the rank's own side (its environment, such as WANDB_BASE_URL), or allow it there with joinRun({ allowedDestinations }) or RANKSCOPE_ALLOWED_DESTINATIONS`,
      );
    }
    for (const option of backend.registration.pathOptions ?? []) {
      const value = backend.options[option];
      if (value === undefined) continue;
      const inside =
        typeof value === "string" &&
        !isAbsolute(value) &&
        relative(runDir, resolve(runDir, value)).split(sep)[0] !== "..";
      if (!inside)
        refuse(
          `rank ${rankName} was sent backend "${backend.name}" with ${option} ${JSON.stringify(String(value).slice(0, 200))}; from the wire a rank writes only inside the run directory (a relative path without "..")`,
        );
    }
  }
}
