/**
 * `rankscope report [RUN...] -o report.html`: one self-contained HTML file of runs — the
 * dashboard, frozen (src/ui/report.ts, docs/report.md). Runs are run directories or
 * experiment/trial under --root; with --filter (the runs list's filter syntax), the runs of the
 * root it matches. Runs of different roots go in one report as long as their ids differ.
 */
import type { Command } from "commander";
import { readFileSync, realpathSync, writeFileSync } from "node:fs";
import { basename, dirname } from "node:path";
import { rankscopeVersion } from "../../run/run-files.js";
import { DashboardApi } from "../../ui/routes.js";
import { collectReport, reportHtml, withNotes, REPORT_HISTOGRAMS, REPORT_POINTS_PER_LINE } from "../../ui/report.js";
import { resolveSetting } from "../../core/settings.js";
import { describeError } from "../../core/diagnostics.js";
import { SYNC_SETTINGS } from "../../sync/settings.js";
import type { ReportData } from "../../ui/report-data.js";
import { createStoreSource } from "../../ui/store-source.js";
import { defaultWebDir } from "../../ui/web-dir.js";
import { filterQuery, runsSearch } from "../../ui/runs-filter.js";
import { parseRunQuery } from "../../ui/run-query.js";
import { isRecord } from "../../core/json.js";
import { MAX_REPORT_RUNS } from "../../ui/report-route.js";
import { defaultRoot, positiveInteger, resolveRunArg, ROOT_OPTION_HELP } from "../run-arg.js";

interface ReportCliOptions {
  out: string;
  server?: string;
  token?: string;
  root?: string;
  filter?: string;
  keys?: string;
  title?: string;
  notes?: string;
  view?: string;
  combine?: string[];
  points: string;
  histograms: string;
  ranks: boolean;
  internal?: boolean;
}

/** The runs named on the command line, by the root they are under: `experiment/trial` ids. */
function runsByRoot(runs: readonly string[], root: string): Map<string, string[]> {
  const byRoot = new Map<string, string[]>();
  for (const run of runs) {
    const dir = realpathSync(resolveRunArg(run, root));
    const runRoot = dirname(dirname(dir));
    byRoot.set(runRoot, [...(byRoot.get(runRoot) ?? []), `${basename(dirname(dir))}/${basename(dir)}`]);
  }
  return byRoot;
}

/** One report of several roots' reports: their runs in order, one view naming them all. */
function merged(parts: readonly ReportData[]): ReportData {
  const [first, ...rest] = parts;
  if (first === undefined) throw new Error("no runs to report");
  const ids = parts.flatMap((p) => p.made.runs.map((r) => r.id));
  const twice = ids.filter((id, i) => ids.indexOf(id) !== i);
  if (twice.length > 0)
    throw new Error(`runs of different roots share an id (${twice.join(", ")}); report them separately`);
  const hash = new URLSearchParams(first.hash);
  hash.delete("run");
  for (const id of ids) hash.append("run", id);
  return rest.reduce<ReportData>(
    (all, p) => ({
      ...all,
      made: { ...all.made, runs: [...all.made.runs, ...p.made.runs] },
      runs: [...all.runs, ...p.runs],
      perRun: { ...all.perRun, ...p.perRun },
    }),
    { ...first, hash: hash.toString() },
  );
}

/** The ids of the runs under `root` that `filter` (the runs list's filter syntax) matches. */
async function filteredRuns(root: string, filter: string): Promise<string[]> {
  const source = createStoreSource(root);
  try {
    await source.index.update();
    const all = await source.listRuns({ summary: true });
    const summaryKeys = new Set(all.runs.flatMap((r) => Object.keys(r.summary ?? {})));
    const paramKeys = new Set(all.runs.flatMap((r) => Object.keys(r.params)));
    const query = parseRunQuery(runsSearch({ ...filterQuery(filter, summaryKeys, paramKeys), limit: 1000 }));
    return (await source.listRuns(query)).runs.map((r) => r.id);
  } finally {
    await source.close?.();
  }
}

/** How long a server has to answer a request of this command. */
const SERVER_DEADLINE_MS = 300_000;

/** GET `path` of the server with the token; the answer's body, or an Error with the server's message. */
async function serverGet(url: string, token: string | undefined, path: string): Promise<string> {
  const response = await fetch(new URL(path, url.endsWith("/") ? url : `${url}/`), {
    headers: token === undefined ? {} : { Authorization: `Bearer ${token}` },
    signal: AbortSignal.timeout(SERVER_DEADLINE_MS),
  }).catch((error: unknown) => {
    // "fetch failed" alone names neither the server nor why: say both (refused, unknown host, deadline).
    const cause = error instanceof Error && error.cause instanceof Error ? error.cause.message : describeError(error);
    throw new Error(`could not reach the server at ${url} for ${path.split("?")[0] ?? path}: ${cause}`);
  });
  const text = await response.text();
  if (!response.ok) {
    let message = text.slice(0, 500);
    try {
      const body: unknown = JSON.parse(text);
      if (isRecord(body) && typeof body["error"] === "string") message = body["error"];
    } catch {
      // the text as it came
    }
    throw new Error(`${url} answered ${response.status} to ${path.split("?")[0] ?? path}: ${message}`);
  }
  return text;
}

/**
 * The report of runs on a server (`rankscope server`, or a `rankscope ui`), written by the server
 * (`/api/report`) with the token's read access: runs named by id, or those `--filter` matches.
 */
async function serverReport(url: string, runs: string[], options: ReportCliOptions): Promise<string> {
  const token = resolveSetting<string | undefined>(
    { ...SYNC_SETTINGS.serverToken, owner: "rankscope report", option: "--token" },
    options.token,
  );
  let ids = runs;
  if (ids.length === 0 && options.filter !== undefined) {
    const search = runsSearch({ ...filterQuery(options.filter), limit: MAX_REPORT_RUNS });
    const page: unknown = JSON.parse(await serverGet(url, token, `api/runs?${search.toString()}`));
    ids =
      isRecord(page) && Array.isArray(page["runs"]) ? page["runs"].map((r) => String(isRecord(r) ? r["id"] : "")) : [];
  }
  if (ids.length === 0) throw new Error(`no run to report on ${url}: name runs (experiment/trial) or give --filter`);
  const view = new URLSearchParams(viewFragment(options) ?? "");
  view.delete("run");
  for (const id of ids) view.append("run", id);
  if (options.keys !== undefined) view.set("q", options.keys);
  if (!options.ranks) view.set("ranks", "0");
  if (options.internal === true) view.set("internal", "1");
  const query = new URLSearchParams({ view: view.toString(), points: options.points, histograms: options.histograms });
  if (options.title !== undefined) query.set("title", options.title);
  return serverGet(url, token, `api/report?${query.toString()}`);
}

/** The view fragment the report opens on: `--view`'s (a URL's fragment, or the fragment), with a `combine` parameter per `--combine`. */
function viewFragment(options: ReportCliOptions): string | undefined {
  const combine = options.combine ?? [];
  if (options.view === undefined && combine.length === 0) return undefined;
  const view = new URLSearchParams(options.view?.replace(/^[^#]*#/, "") ?? "");
  for (const keys of combine) view.append("combine", keys);
  return view.toString();
}

async function writeReport(runs: string[], options: ReportCliOptions): Promise<void> {
  const server = resolveSetting<string | undefined>(
    { ...SYNC_SETTINGS.server, owner: "rankscope report", option: "--server", env: "RANKSCOPE_REPORT_SERVER" },
    options.server,
  );
  const notes = options.notes === undefined ? undefined : readFileSync(options.notes, "utf8");
  if (server !== undefined) {
    const html = await serverReport(server, runs, options);
    finish(options.out, notes === undefined ? html : withNotes(html, notes), runs.length);
    return;
  }
  const root = options.root ?? defaultRoot();
  const named = runs.length > 0 ? runs : options.filter !== undefined ? await filteredRuns(root, options.filter) : [];
  if (named.length === 0)
    throw new Error(
      options.filter !== undefined
        ? `no run under ${root} matches --filter ${JSON.stringify(options.filter)}`
        : "name the runs to report (run directories or experiment/trial under --root), or give --filter",
    );
  const webDir = defaultWebDir();
  const version = rankscopeVersion();
  const parts: ReportData[] = [];
  for (const [runRoot, ids] of runsByRoot(named, root)) {
    const source = createStoreSource(runRoot);
    try {
      await source.index.update();
      parts.push(
        await collectReport(source, new DashboardApi(source, version, webDir), {
          runs: ids,
          webDir,
          version,
          pointsPerLine: positiveInteger("--points", options.points),
          histograms: positiveInteger("--histograms", options.histograms),
          perRank: options.ranks,
          ...(options.keys !== undefined ? { keys: options.keys } : {}),
          ...(options.title !== undefined ? { title: options.title } : {}),
          ...(viewFragment(options) !== undefined ? { view: viewFragment(options) } : {}),
          ...(options.internal === true ? { internal: true } : {}),
        }),
      );
    } finally {
      await source.close?.();
    }
  }
  const html = reportHtml(merged(parts), { webDir, ...(notes !== undefined ? { notes } : {}) });
  finish(
    options.out,
    html,
    parts.reduce((n, p) => n + p.made.runs.length, 0),
  );
}

/** Write the report and say so. */
function finish(out: string, html: string, runCount: number): void {
  writeFileSync(out, html);
  const runs = runCount > 0 ? `, ${runCount} run${runCount === 1 ? "" : "s"}` : "";
  process.stderr.write(
    `wrote ${out} (${(Buffer.byteLength(html) / 1e6).toFixed(2)} MB${runs}); it opens offline in any browser\n`,
  );
}

export function registerReportCommand(program: Command): void {
  program
    .command("report")
    .description(
      "write one self-contained HTML file of runs (charts, runs table, histograms, samples, ranks, alerts) that opens offline",
    )
    .argument("[runs...]", "run directories, or experiment/trial under --root")
    .requiredOption("-o, --out <file>", "the HTML file to write")
    .option("--root <dir>", ROOT_OPTION_HELP)
    .option(
      "--server <url>",
      "report runs of a team server (rankscope server) or a dashboard instead: runs are experiment/trial there (default: $RANKSCOPE_REPORT_SERVER)",
    )
    .option("--token <token>", "a read token for --server (default: $RANKSCOPE_SERVER_TOKEN)")
    .option(
      "--filter <text>",
      "report the runs of --root this matches (the runs list's filter: text, tag:x, group:x, status:x, lr<0.01)",
    )
    .option("--keys <regex>", "only keys this matches (case-insensitive, as the dashboard's search)")
    .option("--title <text>", "the report's title (default: its runs)")
    .option("--notes <file.md>", "Markdown shown under the title")
    .option(
      "--view <fragment>",
      "the dashboard view to open on: a dashboard URL or its #fragment (tab, smoothing, x-axis, …)",
    )
    .option(
      "--combine <keys>",
      "a chart of several metric keys in the Metrics view (`train/loss,val/loss`); repeat for more charts",
      (keys: string, all: string[] = []) => [...all, keys],
    )
    .option(
      "--points <n>",
      "points kept per line (the store's downsampling: min, max, last per bucket)",
      String(REPORT_POINTS_PER_LINE),
    )
    .option("--histograms <n>", "histograms kept per line of a histogram key", String(REPORT_HISTOGRAMS))
    .option("--no-ranks", "leave out per-rank lines (keys with a global line show it alone)")
    .option("--internal", "also keep rankscope's own keys (…__count, rankscope/…)")
    .action((runs: string[], options: ReportCliOptions) => writeReport(runs, options));
}
