/**
 * A report (docs/report.md): one HTML file that is the dashboard, frozen. The built web app's
 * script and style are inlined, and the answers its API would give for the report's runs are
 * carried in the page (`report-data.ts`: gzip, then base64), where `web/frozen.ts` answers the
 * app's requests from them. Answers are read from a `DashboardSource` through the API's own
 * handlers (`DashboardApi`), so a report of a local root and one exported from a team server are
 * the same file. Lines are the store's downsampling (min, max and last per bucket) to a budget of
 * points per line; the page's Content-Security-Policy forbids every request.
 */
import { readFileSync, readdirSync } from "node:fs";
import { IncomingMessage, ServerResponse } from "node:http";
import { Socket } from "node:net";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { GLOBAL_RANK } from "../store/read-types.js";
import { isInternalKey } from "../core/internal-keys.js";
import { isRecord, stringifyNonFinite } from "../core/json.js";
import { redactSecrets } from "../core/redact.js";
import { HttpError } from "./security.js";
import type { DashboardSource, KeyInfo, LabelledRun } from "./source.js";
import {
  REPORT_DATA_ID,
  encodeColumn,
  jsonNumber,
  type ReportData,
  type ReportHistograms,
  type ReportLine,
  type ReportRun,
} from "./report-data.js";
import { escapeHtml, markdownHtml } from "./report-markdown.js";
import { searchMatcher } from "./search-text.js";

/** Points kept per line by default: a chart of the default width draws about as many (the dashboard asks 1.5 per pixel). */
export const REPORT_POINTS_PER_LINE = 600;
/** Histograms kept per line of a key by default (the Histograms tab's heatmap). */
export const REPORT_HISTOGRAMS = 50;

/** What goes into a report. */
export interface ReportOptions {
  /** The runs, by id (`experiment/trial`), in the order shown. */
  readonly runs: readonly string[];
  /** Only keys this search matches (a case-insensitive regex, as the dashboard's search box) are kept; the Metrics search is set to it. */
  readonly keys?: string;
  /** The dashboard URL fragment the report opens on (runs, tab, smoothing, …); runs are added. */
  readonly view?: string;
  readonly title?: string;
  /** Markdown shown under the title. */
  readonly notes?: string;
  /** Per-rank lines too (default true, as the dashboard). */
  readonly perRank?: boolean;
  /** rankscope's own keys too (default false). */
  readonly internal?: boolean;
  readonly pointsPerLine?: number;
  readonly histograms?: number;
  /** The built web app (dist/ui/web). */
  readonly webDir: string;
  readonly version: string;
  /** The time written into the report (default now). */
  readonly now?: number;
}

/** What a request is to the API's handlers (`DashboardApi.handle` of routes.ts). */
export interface ApiRequest {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly params: URLSearchParams;
}

/** The API's handlers (a `DashboardApi`), named here so this file need not import routes.ts (which imports it). */
export interface ApiHandle {
  handle(path: string, request: ApiRequest): Promise<unknown>;
}

/** One API answer through the API's own handler, as the server would answer `path?params`. */
async function answer(api: ApiHandle, path: string, params: Record<string, string>): Promise<unknown> {
  const req = new IncomingMessage(new Socket());
  const res = new ServerResponse(req);
  try {
    return await api.handle(`/api/${path}`, { req, res, params: new URLSearchParams(params) });
  } catch (error) {
    // A run without per-rank timings, samples or histograms: the report has none of them.
    if (error instanceof HttpError && error.status === 404) return null;
    throw error;
  }
}

/** A line as the report keeps it. */
function reportLine(data: { steps: number[]; times: number[]; values: number[]; downsampled: boolean }): ReportLine {
  return {
    steps: encodeColumn(data.steps),
    times: encodeColumn(data.times),
    values: data.values.map(jsonNumber),
    downsampled: data.downsampled,
  };
}

/** The lines of one key of a run: its global line, and its ranks' when asked for (or when it has no global line). */
async function keyLines(
  source: DashboardSource,
  handle: string,
  info: KeyInfo,
  options: ReportOptions,
): Promise<Record<string, ReportLine>> {
  const maxPoints = options.pointsPerLine ?? REPORT_POINTS_PER_LINE;
  const global = info.ranks.includes(GLOBAL_RANK);
  const lines: Record<string, ReportLine> = {};
  if (global) lines["g"] = reportLine(await source.series(handle, info.key, { maxPoints }));
  if (options.perRank !== false || !global)
    for (const rank of info.ranks.filter((r) => r !== GLOBAL_RANK))
      lines[String(rank)] = reportLine(await source.series(handle, info.key, { rank, maxPoints }));
  return lines;
}

/** The config answer with secrets redacted again (params, version info, config.yaml's text). */
function redactedConfig(config: unknown): unknown {
  if (!isRecord(config)) return config;
  let yaml = config["configYaml"];
  if (typeof yaml === "string") {
    try {
      const parsed: unknown = parseYaml(yaml);
      const redacted = redactSecrets(parsed);
      if (JSON.stringify(redacted) !== JSON.stringify(parsed)) yaml = stringifyYaml(redacted);
    } catch {
      yaml = null; // text that is not YAML could hide anything: left out
    }
  }
  return {
    ...config,
    params: redactSecrets(config["params"]),
    version: redactSecrets(config["version"]),
    configYaml: yaml,
  };
}

/** A key's histograms: the newest of any line, and each line's newest `limit`. */
async function keyHistograms(api: ApiHandle, id: string, key: string, limit: number): Promise<ReportHistograms> {
  const latest = await answer(api, "histograms", { run: id, key, limit: "1" });
  const ranks = isRecord(latest) && Array.isArray(latest["ranks"]) ? latest["ranks"] : [];
  const byRank: Record<string, unknown> = {};
  for (const rank of ranks)
    byRank[String(rank)] = await answer(api, "histograms", { run: id, key, limit: String(limit), rank: String(rank) });
  return { latest, byRank };
}

/** Everything the report keeps of one run. */
async function collectRun(
  source: DashboardSource,
  api: ApiHandle,
  id: string,
  options: ReportOptions,
): Promise<ReportRun> {
  const handle = await source.resolveRun(id, true);
  const wanted = searchMatcher(options.keys ?? "");
  // The view's combined charts draw their keys whatever the key filter says.
  const combined = new Set(
    new URLSearchParams(options.view ?? "").getAll("combine").flatMap((c) => c.split(/[;,]/).map((k) => k.trim())),
  );
  const keys = await answer(api, "keys", { run: id });
  const metrics = (await source.keys(handle)).filter(
    (k) => combined.has(k.key) || ((options.internal === true || !isInternalKey(k.key)) && wanted.test(k.key)),
  );
  const lines: ReportRun["lines"] = {};
  for (const info of metrics) lines[info.key] = await keyLines(source, handle, info, options);
  const maxPoints = options.pointsPerLine ?? REPORT_POINTS_PER_LINE;
  const listed = (name: string): string[] =>
    isRecord(keys) && Array.isArray(keys[name]) ? keys[name].map(String).filter((k) => wanted.test(k)) : [];
  const system: ReportRun["system"] = {};
  for (const key of listed("system")) system[key] = reportLine(await source.system(handle, key, { maxPoints }));
  const streams: ReportRun["streams"] = {};
  for (const key of listed("streams")) {
    // As the dashboard asks a stream card's: the budget shared by the ranks.
    const data = await source.stream(handle, key, { maxPoints });
    streams[key] = {
      ranks: encodeColumn(data.ranks),
      steps: encodeColumn(data.steps),
      times: encodeColumn(data.times),
      values: data.values.map(jsonNumber),
    };
  }
  const histogramKeys = isRecord(keys) && Array.isArray(keys["histograms"]) ? keys["histograms"].map(String) : [];
  const histograms: Record<string, ReportHistograms> = {};
  for (const key of histogramKeys.filter((k) => wanted.test(k)))
    histograms[key] = await keyHistograms(api, id, key, options.histograms ?? REPORT_HISTOGRAMS);
  const summary = await answer(api, "summary", { run: id, internal: "1" });
  const alerts = await answer(api, "alerts", { run: id });
  const samples = await answer(api, "samples", { run: id });
  const kept = new Set(metrics.map((m) => m.key));
  return {
    keys: isRecord(keys)
      ? {
          ...keys,
          metrics: Array.isArray(keys["metrics"])
            ? keys["metrics"].filter((m) => isRecord(m) && kept.has(String(m["key"])))
            : [],
          streams: Object.keys(streams),
          system: Object.keys(system),
          histograms: Object.keys(histograms),
        }
      : keys,
    summary: isRecord(summary) ? Object.fromEntries(Object.entries(summary).map(([k, v]) => [k, numberOf(v)])) : {},
    lines,
    system,
    streams,
    alerts: isRecord(alerts) && Array.isArray(alerts["alerts"]) ? alerts["alerts"] : [],
    samples: isRecord(samples) && Array.isArray(samples["samples"]) ? samples["samples"] : [],
    config: redactedConfig(await answer(api, "config", { run: id })),
    ranks: await answer(api, "ranks", { run: id }),
    histograms,
  };
}

function numberOf(value: unknown): number | string {
  return typeof value === "number" ? jsonNumber(value) : String(value);
}

/** A grouped view's bands (`/api/groups` for each key the runs share), grouped as the view says. */
async function groupsOf(
  api: ApiHandle,
  by: readonly string[],
  perRun: Record<string, ReportRun>,
  options: ReportOptions,
): Promise<ReportData["groups"]> {
  if (by.length === 0) return undefined;
  const keys = [...new Set(Object.values(perRun).flatMap((run) => Object.keys(run.lines)))];
  const byKey: Record<string, unknown> = {};
  for (const key of keys) {
    const params = new URLSearchParams({ key, maxPoints: String(options.pointsPerLine ?? REPORT_POINTS_PER_LINE) });
    for (const field of by) params.append("by", field);
    for (const run of options.runs) params.append("run", run);
    const req = new IncomingMessage(new Socket());
    byKey[key] = await api.handle("/api/groups", { req, res: new ServerResponse(req), params });
  }
  return { by, byKey };
}

/** The view the report opens on: `view` with the report's runs, and its key filter as the search. */
function openingView(options: ReportOptions): string {
  const params = new URLSearchParams(options.view ?? "");
  params.delete("run");
  for (const run of options.runs) params.append("run", run);
  if (!params.has("tab")) params.set("tab", "metrics");
  if (options.keys !== undefined && options.keys !== "") params.set("q", options.keys);
  if (options.perRank === false) params.set("ranks", "0");
  if (options.internal === true) params.set("internal", "1");
  return params.toString();
}

/** The report's data: the API's answers for its runs, read from `source`. */
export async function collectReport(
  source: DashboardSource,
  api: ApiHandle,
  options: ReportOptions,
): Promise<ReportData> {
  if (options.runs.length === 0) throw new HttpError(400, "a report needs at least one run");
  const page = await source.listRuns({ ids: options.runs, summary: true, internal: true, limit: options.runs.length });
  const byId = new Map<string, LabelledRun>(page.runs.map((r) => [r.id, r]));
  const missing = options.runs.filter((id) => !byId.has(id));
  if (missing.length > 0) throw new HttpError(404, `no such run: ${missing.join(", ")}`);
  const runs = options.runs.flatMap((id) => byId.get(id) ?? []);
  const perRun: Record<string, ReportRun> = {};
  for (const id of options.runs) perRun[id] = await collectRun(source, api, id, options);
  const hash = openingView(options);
  const groups = await groupsOf(api, new URLSearchParams(hash).getAll("groupby"), perRun, options);
  return {
    made: {
      at: options.now ?? Date.now(),
      rankscope: options.version,
      title: options.title ?? `rankscope report: ${options.runs.join(", ")}`,
      runs: runs.map((r) => ({ id: r.id, status: r.status, started: r.startedAt ?? null })),
      pointsPerLine: options.pointsPerLine ?? REPORT_POINTS_PER_LINE,
    },
    hash,
    ...(groups !== undefined ? { groups } : {}),
    version: { rankscope: options.version, node: process.version },
    runs: runs.map((r) => ({ ...r, params: redactSecrets(r.params) })),
    perRun,
  };
}

/** The page forbids every request: scripts and styles are the page's own, images data: URLs. */
const CSP =
  "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'";

/** The built app's one script and one stylesheet (Vite's `assets/index-*.js|css`). */
function builtAssets(webDir: string): { script: string; style: string; icon: string } {
  const assets = join(webDir, "assets");
  let names: string[];
  try {
    names = readdirSync(assets);
  } catch {
    throw new Error(`the web app is not built (no ${assets}); run npm run build`);
  }
  const one = (ext: string): string => {
    const found = names.filter((n) => n.endsWith(ext));
    if (found.length !== 1) throw new Error(`expected one ${ext} file in ${assets}, found ${found.length}`);
    return readFileSync(join(assets, found[0] ?? ""), "utf8");
  };
  const icon = readFileSync(join(webDir, "favicon.svg")).toString("base64");
  return { script: one(".js"), style: one(".css"), icon };
}

/** What the report says it is made of, at its top. */
function header(data: ReportData, notes: string | undefined): string {
  const when = new Date(data.made.at)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, " UTC");
  const runs = data.made.runs.map((r) => `<code>${escapeHtml(r.id)}</code> (${escapeHtml(r.status)})`).join(", ");
  return [
    '<section id="report-header">',
    `<h1>${escapeHtml(data.made.title)}</h1>`,
    `<p class="muted" id="report-made">Written ${when} by rankscope ${escapeHtml(data.made.rankscope)} from ${data.made.runs.length} run${data.made.runs.length === 1 ? "" : "s"}: ${runs}. Lines keep at most ${data.made.pointsPerLine} points each (min, max and last per bucket). This file makes no network request.</p>`,
    notesHtml(notes),
    "</section>",
  ].join("\n");
}

/** The notes as the header shows them. */
function notesHtml(notes: string | undefined): string {
  return notes === undefined || notes.trim() === "" ? "" : `<div id="report-notes">${markdownHtml(notes)}</div>`;
}

/** A report (`reportHtml`'s, or a server's) with `notes` added under its header. */
export function withNotes(html: string, notes: string): string {
  return html.replace(
    /(<section id="report-header">[\s\S]*?)(<\/section>)/,
    (_m, head: string, end: string) => `${head}${notesHtml(notes)}\n${end}`,
  );
}

/** Text for inside a `<script>` or `<style>` element (no early end tag). */
function rawText(text: string, tag: "script" | "style"): string {
  return text.replace(new RegExp(`</(${tag})`, "gi"), "<\\/$1");
}

/** The report as one HTML file. */
export function reportHtml(data: ReportData, options: { webDir: string; notes?: string }): string {
  const { script, style, icon } = builtAssets(options.webDir);
  const index = readFileSync(join(options.webDir, "index.html"), "utf8");
  const packed = gzipSync(Buffer.from(stringifyNonFinite(data) ?? "{}"), { level: 9 }).toString("base64");
  const page = index
    .replace(
      /<title>[^<]*<\/title>/,
      () =>
        `<meta http-equiv="Content-Security-Policy" content="${CSP}" />\n    <title>${escapeHtml(data.made.title)}</title>`,
    )
    .replace(
      /<link rel="icon"[^>]*>/,
      () => `<link rel="icon" href="data:image/svg+xml;base64,${icon}" type="image/svg+xml" />`,
    )
    .replace(
      /<script type="module"[^>]*><\/script>/,
      () => `<script type="module">${rawText(script, "script")}</script>`,
    )
    .replace(/<link rel="stylesheet"[^>]*>/, () => `<style>${rawText(style, "style")}</style>`)
    .replace(/<body>/, () => `<body class="report">\n${header(data, options.notes)}`)
    .replace(
      /<\/body>/,
      () => `<script type="application/octet-stream" id="${REPORT_DATA_ID}">${packed}</script>\n</body>`,
    );
  if (/\s(src|href)="\.?\/?(assets|favicon)/.test(page.replace(/<script type="module">[\s\S]*?<\/script>/, "")))
    throw new Error("the built index.html links a file the report could not inline");
  return page;
}
