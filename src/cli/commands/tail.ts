/**
 * `rankscope tail RUN`: follow a run's metrics in the terminal. Prints the latest value of every
 * scalar key, then, by cursor, only the points written since, until the run ends (or Ctrl-C).
 */
import type { Command } from "commander";
import { CONTROLLER_RANK, GLOBAL_RANK, keys, lineLabel, runInfo, series } from "../../store/reader.js";
import { isInternalKey } from "../../core/internal-keys.js";
import { registerDrain } from "../../core/lifecycle.js";
import { stopWithNpmLauncher } from "../launcher.js";
import { sleep } from "../../core/retry.js";
import { formatValue, positiveInteger, resolveRunArg, ROOT_OPTION_HELP } from "../run-arg.js";

interface TailOptions {
  root?: string;
  interval: string;
  filter?: string;
  rank?: string;
  follow: boolean;
  internal?: boolean;
}

interface Followed {
  cursor: number | null;
}

/** The line `--rank` names: a rank number, `controller` (or −2), `global` (or −1). */
function rankOption(text: string): number {
  if (text === "controller") return CONTROLLER_RANK;
  if (text === "global") return GLOBAL_RANK;
  const rank = Number(text);
  if (!Number.isInteger(rank) || rank < CONTROLLER_RANK) {
    throw new Error(
      `--rank must be a rank number, controller (the controller's own values) or global (-1, the series reduced across ranks), got ${JSON.stringify(text)}`,
    );
  }
  return rank;
}

/** One poll: print every point of every (matching) scalar key after its cursor, by step. */
function pollOnce(
  runDir: string,
  followed: Map<string, Followed>,
  options: TailOptions,
  rank: number | undefined,
  first: boolean,
): number {
  const lines: { step: number; text: string }[] = [];
  const filter = options.filter;
  for (const k of keys(runDir, "scalar")) {
    if (filter !== undefined && !k.key.includes(filter)) continue;
    if (options.internal !== true && isInternalKey(k.key)) continue;
    const ranks = rank === undefined ? k.ranks.slice(0, 1) : k.ranks.includes(rank) ? [rank] : [];
    for (const r of ranks) {
      const id = `${k.key}\u0000${r}`;
      let f = followed.get(id);
      if (f === undefined) {
        f = { cursor: null };
        followed.set(id, f);
      }
      // The first look shows only the latest value; later ones every new point.
      const result = series(runDir, k.key, {
        rank: r,
        maxPoints: first ? 3 : Infinity,
        ...(f.cursor === null ? {} : { after: f.cursor }),
      });
      f.cursor = result.cursor;
      const points = first ? result.points.slice(-1) : result.points;
      const label = r === GLOBAL_RANK ? k.key : `${k.key} [${lineLabel(r)}]`;
      for (const p of points) lines.push({ step: p.step, text: `${label}  ${formatValue(p.value)}` });
    }
  }
  lines.sort((a, b) => a.step - b.step);
  let out = "";
  for (const l of lines) out += `step ${l.step}  ${l.text}\n`;
  if (out.length > 0) process.stdout.write(out);
  return lines.length;
}

export function registerTailCommand(program: Command): void {
  program
    .command("tail")
    .description("follow a run's metrics in the terminal: the latest values, then every new point until the run ends")
    .argument("<run>", "a run directory, or experiment/trial under --root")
    .option("--root <dir>", ROOT_OPTION_HELP)
    .option("--interval <ms>", "how often to look for new points", "1000")
    .option("--filter <text>", "only keys containing this text")
    .option(
      "--rank <n>",
      "a per-rank series instead of the global one: a rank number, or controller for the controller's own values",
    )
    .option("--no-follow", "print the latest values and exit")
    .option("--internal", "also show rankscope's own keys (…__count, rankscope/…), hidden by default")
    .action(async (run: string, options: TailOptions) => {
      const intervalMs = positiveInteger("--interval", options.interval);
      const rank = options.rank === undefined ? undefined : rankOption(options.rank);
      const runDir = resolveRunArg(run, options.root);
      const info = runInfo(runDir);
      process.stdout.write(`${info.experiment ?? "?"}/${info.trial ?? "?"} (${info.status}) ${runDir}\n`);
      const followed = new Map<string, Followed>();
      if (!options.follow) {
        pollOnce(runDir, followed, options, rank, true);
        return;
      }
      // Ctrl-C / SIGTERM stop it through the one lifecycle (from before the first line it prints):
      // the wait ends at once, then exit code 0.
      const stop = new AbortController();
      let following: Promise<void> = Promise.resolve();
      const unregister = registerDrain({
        name: "rankscope tail",
        stopsCleanlyOnSignal: true,
        drain: (context) => {
          if (context.reason === "beforeExit") return undefined;
          stop.abort();
          return following;
        },
      });
      stopWithNpmLauncher();
      pollOnce(runDir, followed, options, rank, true);
      following = follow(runDir, followed, options, rank, intervalMs, stop.signal);
      try {
        await following;
      } finally {
        unregister();
      }
    });
}

/** Poll every `intervalMs` until the run ends or `stop` is aborted. */
async function follow(
  runDir: string,
  followed: Map<string, Followed>,
  options: TailOptions,
  rank: number | undefined,
  intervalMs: number,
  stop: AbortSignal,
): Promise<void> {
  while (!stop.aborted) {
    await sleep(intervalMs, stop);
    if (stop.aborted) break;
    const status = runInfo(runDir).status;
    pollOnce(runDir, followed, options, rank, false);
    // Read once more after the status says ended, so the last flush is never missed.
    if (status !== "running" && status !== "unknown") {
      process.stdout.write(`run ${status}\n`);
      break;
    }
  }
}
