/**
 * `/api/report?view=FRAGMENT[&title=][&points=][&histograms=]`: the dashboard's "Export report"
 * (and `rankscope report --server`) — the report
 * (`report.ts`, docs/report.md) of the view the fragment names (its runs, tab, search, smoothing,
 * x-axis, per-rank lines, …), sent as a download.
 */
import { sendBody } from "./http.js";
import { MAX_BATCH_POINTS, intParam } from "./params.js";
import { collectReport, reportHtml, type ApiHandle, type ApiRequest } from "./report.js";
import { HttpError } from "./security.js";
import type { DashboardSource } from "./source.js";

/** Runs one report may hold (each is read whole, to its points per line). */
export const MAX_REPORT_RUNS = 50;

export async function sendReport(
  ctx: ApiRequest,
  source: DashboardSource,
  api: ApiHandle,
  options: { version: string; webDir: string },
): Promise<undefined> {
  const view = ctx.params.get("view") ?? "";
  const fragment = new URLSearchParams(view);
  const runs = [...new Set(fragment.getAll("run"))];
  if (runs.length === 0) throw new HttpError(400, "select the runs to report first (view names no run)");
  if (runs.length > MAX_REPORT_RUNS)
    throw new HttpError(400, `a report holds at most ${MAX_REPORT_RUNS} runs; the view names ${runs.length}`);
  const title = ctx.params.get("title") ?? undefined;
  const points = intParam(ctx.params, "points", 1, MAX_BATCH_POINTS);
  const histograms = intParam(ctx.params, "histograms", 1, 500);
  const data = await collectReport(source, api, {
    runs,
    view,
    keys: fragment.get("q") ?? undefined,
    perRank: fragment.get("ranks") !== "0",
    internal: fragment.get("internal") === "1",
    ...(title !== undefined ? { title } : {}),
    ...(points !== undefined ? { pointsPerLine: points } : {}),
    ...(histograms !== undefined ? { histograms } : {}),
    webDir: options.webDir,
    version: options.version,
  });
  const html = Buffer.from(reportHtml(data, { webDir: options.webDir }));
  await sendBody(
    ctx.req,
    ctx.res,
    200,
    {
      "Content-Type": "text/html; charset=utf-8",
      "Content-Disposition": 'attachment; filename="rankscope-report.html"',
      "Cache-Control": "no-store",
    },
    html,
  );
  return undefined;
}
