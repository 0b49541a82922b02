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
import { collectReport, reportHtml, REPORT_HISTOGRAMS, REPORT_POINTS_PER_LINE } from "../../ui/report.js";
import type { ReportData } from "../../ui/report-data.js";
import { createStoreSource } from "../../ui/store-source.js";
import { defaultWebDir } from "../../ui/web-dir.js";
import { filterQuery, runsSearch } from "../../ui/runs-filter.js";
import { parseRunQuery } from "../../ui/run-query.js";
import { defaultRoot, positiveInteger, resolveRunArg, ROOT_OPTION_HELP } from "../run-arg.js";

interface ReportCliOptions {
  out: string;
  root?: string;
  filter?: string;
  keys?: string;
  title?: string;
  notes?: string;
  view?: string;
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

async function writeReport(runs: string[], options: ReportCliOptions): Promise<void> {
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
          ...(options.view !== undefined ? { view: options.view.replace(/^[^#]*#/, "") } : {}),
          ...(options.internal === true ? { internal: true } : {}),
        }),
      );
    } finally {
      await source.close?.();
    }
  }
  const notes = options.notes === undefined ? undefined : readFileSync(options.notes, "utf8");
  const html = reportHtml(merged(parts), { webDir, ...(notes !== undefined ? { notes } : {}) });
  writeFileSync(options.out, html);
  const runCount = parts.reduce((n, p) => n + p.made.runs.length, 0);
  process.stderr.write(
    `wrote ${options.out} (${(Buffer.byteLength(html) / 1e6).toFixed(2)} MB, ${runCount} run${runCount === 1 ? "" : "s"}); it opens offline in any browser\n`,
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
      "--points <n>",
      "points kept per line (the store's downsampling: min, max, last per bucket)",
      String(REPORT_POINTS_PER_LINE),
    )
    .option("--histograms <n>", "histograms kept per line of a histogram key", String(REPORT_HISTOGRAMS))
    .option("--no-ranks", "leave out per-rank lines (keys with a global line show it alone)")
    .option("--internal", "also keep rankscope's own keys (…__count, rankscope/…)")
    .action((runs: string[], options: ReportCliOptions) => writeReport(runs, options));
}
