/**
 * How a spooled run ends on the server, as `rankscope wandb sync` sends it: the completion and
 * summary its spool holds, or, for a run of its own whose process was killed before its end (no
 * completion spooled), what W&B's own `wandb sync` sends for an offline run without an exit
 * record (wandb-core's `runsync`: "no exit record encountered, using exit code 1 (failed)"): the
 * summary of its lines' latest values, the run files its end would have uploaded, exit code 1.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { jsonText } from "../../../core/json.js";
import { CONFIG_FILE, VERSION_FILE } from "../../../run/run-files.js";
import { SUMMARY_FILE } from "../client/api.js";
import { parseHistoryObject } from "../client/history.js";
import { spooledFiles, type SpooledClient, type SpooledRun } from "../spool/spool.js";

/** The exit code `wandb sync` gives a run whose log has no exit record (wandb-core's `runsync`): failed. */
export const UNFINISHED_EXIT_CODE = 1;

const summaries = new WeakMap<SpooledClient, string | undefined>();

/**
 * A client's summary: the last one spooled, with the latest value of every key of the lines after
 * it — all of its lines when it spooled none (a process killed before its end): the latest value
 * of every key, as the SDK's summary (and the writer's, `RunSummary`) holds them. A spool that
 * starts after lines the server has and holds no summary gives none (its lines alone would drop
 * the keys of the earlier ones; a writer spools its summary when it starts spooling).
 */
export function summaryOf(client: SpooledClient): string | undefined {
  if (client.linesAfterSummary === 0) return client.summary;
  if (client.summary === undefined && client.absoluteOffsets && client.firstOffset > 0) return undefined;
  if (summaries.has(client)) return summaries.get(client);
  const latest = new Map<string, unknown>();
  const take = (text: string): void => {
    for (const [key, value] of Object.entries(parseHistoryObject(text))) latest.set(key, value);
  };
  if (client.summary !== undefined) take(client.summary);
  for (const line of client.lines.slice(client.lines.length - client.linesAfterSummary)) take(line);
  const text = `{${[...latest].map(([key, value]) => `${JSON.stringify(key)}:${jsonText(value, "token")}`).join(",")}}`;
  summaries.set(client, text);
  return text;
}

/**
 * How the run ends: the completion a client spooled, or, for a run of its own whose spool holds
 * none (its process was killed), exit code 1 as `wandb sync` gives it. Undefined for a shared run
 * whose primary spooled no completion (its clients finish apart; the primary completes it).
 */
export function completionOf(
  spool: SpooledRun,
): { clientId: string | null; exitcode: number; unfinished: boolean } | undefined {
  let completion: { clientId: string | null; exitcode: number; unfinished: boolean } | undefined;
  for (const client of spool.clients)
    if (client.exitcode !== undefined)
      completion = { clientId: client.clientId, exitcode: client.exitcode, unfinished: false };
  if (completion !== undefined || spool.info.shared || spool.clients.every((c) => c.lines.length === 0))
    return completion;
  return { clientId: null, exitcode: UNFINISHED_EXIT_CODE, unfinished: true };
}

/** The completion as `sync.json` records it: its exit code and how many lines the spool had then. */
export function completionKey(spool: SpooledRun, exitcode: number): string {
  return `${exitcode}@${spool.clients.reduce((n, c) => n + c.firstOffset + c.lines.length, 0)}`;
}

/**
 * The run files to upload: the spool's, and for a run that did not reach its end, those its end
 * would have uploaded: `config.yaml` and `version.json` from the run directory (when there) and
 * `wandb-summary.json` from its lines.
 */
export function runFiles(spool: SpooledRun): Map<string, string> {
  const files = new Map<string, string>();
  for (const name of spooledFiles(spool.dir))
    files.set(name, readFileSync(join(spool.dir, "files", ...name.split("/")), "utf8"));
  if (completionOf(spool)?.unfinished !== true) return files;
  const runDir = dirname(dirname(spool.dir));
  for (const name of [CONFIG_FILE, VERSION_FILE]) {
    const path = join(runDir, name);
    if (existsSync(path)) files.set(name, readFileSync(path, "utf8"));
  }
  const summary = spool.clients.map(summaryOf).find((text) => text !== undefined);
  if (summary !== undefined) files.set(SUMMARY_FILE, summary);
  return files;
}
