/**
 * The dashboard's JSON API as a table: path → handler. Each handler gets the checked request and
 * returns the JSON to send (or sends a download itself). Run-scoped handlers have the source
 * resolve `run` first (the local source refuses a run or a `metrics.db` that resolves outside the
 * root before anything opens it; the server's refuses a run of another project). The same table
 * serves `rankscope ui` and `rankscope server`.
 */
import { CONTROLLER_LINE } from "../core/rank-identity.js";
import type { IncomingMessage, ServerResponse } from "node:http";
import { turnIfDue } from "./loop-turns.js";
import { warn } from "../core/diagnostics.js";
import { isInternalKey } from "../core/internal-keys.js";
import { storeFault } from "../store/store-file.js";
import { errorCode } from "../core/errors.js";
import { JsonPieces, sendJsonRevalidated } from "./http.js";
import type { RunLine } from "./group-bands.js";
import { answerGroups } from "./group-route.js";
import {
  type RunLineRequest,
  flagParam,
  intParam,
  keysParam,
  maxPointsParam,
  checkParamText,
  parseLines,
  parseRuns,
  requiredParam,
} from "./params.js";
import { logFiles, logQueryParam, readLogWindow } from "./log-reader.js";
import { READ_AHEAD, readAhead } from "./read-ahead.js";
import { runKeys } from "./run-keys.js";
import { parseRunQuery } from "./run-query.js";
import { HttpError } from "./security.js";
import type { DashboardSource } from "./source.js";
import { sendTraceFile } from "./trace-download.js";
import { sendReport } from "./report-route.js";
import { DEFAULT_TIMING_FLUSHES, MAX_TIMING_FLUSHES } from "../store/rank-timing.js";

/** What every handler may use. */
interface ApiContext {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly params: URLSearchParams;
  /**
   * Told each time the source refuses a run the request names (a 4xx: unknown, malformed, or
   * another project's): `entry` when it is one entry of a 200 answer (many runs or lines), not the
   * whole request, so a server counts a run asked of the wrong project however it was asked.
   */
  readonly runRefused?: (status: number, entry: boolean) => void;
}

/** Returns the JSON body, or undefined when it answered itself (a download). */
type Handler = (ctx: ApiContext) => Promise<unknown> | unknown;

/** The API over one source: the route table and the state its handlers share. */
export class DashboardApi {
  readonly routes: ReadonlyMap<string, Handler>;

  constructor(
    private readonly source: DashboardSource,
    private readonly version: string,
    /** The built web app, which `/api/report` inlines. */
    private readonly webDir: string,
  ) {
    this.routes = new Map<string, Handler>([
      ["/api/version", () => ({ rankscope: this.version, node: process.version })],
      ["/api/runs", (c) => this.runs(c)],
      ["/api/keys", (c) => this.keys(c)],
      ["/api/summary", (c) => this.summary(c)],
      ["/api/series", (c) => this.series(c)],
      ["/api/lines", (c) => this.lines(c)],
      ["/api/stream", (c) => this.stream(c)],
      ["/api/system", (c) => this.system(c)],
      ["/api/histograms", (c) => this.histograms(c)],
      ["/api/samples", (c) => this.withRun(c, async (runDir) => ({ samples: await this.source.samples(runDir) }))],
      ["/api/config", (c) => this.config(c)],
      ["/api/alerts", (c) => this.alerts(c)],
      [
        "/api/traces",
        (c) => this.withRun(c, async (runDir) => ({ files: await this.source.traceFiles(runDir) }), false),
      ],
      ["/api/trace", (c) => this.trace(c)],
      [
        "/api/logs",
        (c) => this.withRun(c, async (runDir) => ({ files: logFiles(await this.source.logFiles(runDir)) }), false),
      ],
      ["/api/log", (c) => this.log(c)],
      ["/api/report", (c) => sendReport(c, this.source, this, { version: this.version, webDir: this.webDir })],
      [
        "/api/ranks",
        (c) =>
          this.withRun(c, (runDir) =>
            this.source.ranks(runDir, {
              maxFlushes: intParam(c.params, "flushes", 1, MAX_TIMING_FLUSHES) ?? DEFAULT_TIMING_FLUSHES,
            }),
          ),
      ],
      [
        "/api/groups",
        (c) =>
          answerGroups(
            c.params,
            () => c.res.destroyed,
            this.source,
            (id, key, n) => this.groupLine(id, key, n),
          ),
      ],
    ]);
  }

  /** Answer an API path: the handler's JSON, or a 404 listing the endpoints. */
  async handle(path: string, ctx: ApiContext): Promise<unknown> {
    const handler = this.routes.get(path);
    if (handler === undefined) {
      const names = [...this.routes.keys()].map((p) => p.slice("/api/".length)).join(", ");
      throw new HttpError(404, `no such API endpoint ${path}; the endpoints under /api/ are ${names}`);
    }
    checkParamText(ctx.params);
    return handler(ctx);
  }

  /**
   * Have the source resolve the request's run, and run `read`; a store SQLite cannot read
   * (damaged, not a database) becomes a 500 naming the run and the fault.
   */
  private withRun<T>(
    ctx: Pick<ApiContext, "params" | "runRefused">,
    read: (runDir: string) => Promise<T> | T,
    needsStore = true,
  ): Promise<T> {
    return this.inRun(ctx, ctx.params.get("run"), read, needsStore, false);
  }

  /** `withRun` for a run named otherwise (a line's, one of `runs`). */
  private async inRun<T>(
    ctx: Pick<ApiContext, "runRefused">,
    run: string | null,
    read: (runDir: string) => Promise<T> | T,
    needsStore: boolean,
    entry: boolean,
  ): Promise<T> {
    let runDir: string;
    try {
      runDir = await this.source.resolveRun(run, needsStore);
    } catch (error) {
      if (error instanceof HttpError) ctx.runRefused?.(error.status, entry);
      throw error;
    }
    try {
      return await read(runDir);
    } catch (error) {
      if (error instanceof HttpError) throw error;
      if (!errorCode(error).startsWith("SQLITE_")) throw error;
      const message = `run ${JSON.stringify(run)}: ${storeFault(error)}`;
      warn(`ui.store:${runDir}`, `dashboard: ${message}`);
      throw new HttpError(500, message);
    }
  }

  /** A run's global line of `key` for a group, or null when it has none. */
  private async groupLine(id: string, key: string, maxPoints: number): Promise<RunLine | null> {
    const params = new URLSearchParams({ run: id });
    try {
      return await this.withRun({ params }, async (handle) => {
        const data = await this.source.series(handle, key, { maxPoints });
        return data.values.length === 0 ? null : { steps: data.steps, values: data.values };
      });
    } catch (error) {
      if (error instanceof HttpError && error.status === 404) return null;
      throw error;
    }
  }

  /** `/api/runs`: one page of the runs matching the query, with an ETag so an unchanged page costs a 304. */
  private async runs(ctx: ApiContext): Promise<undefined> {
    const page = await this.source.listRuns(parseRunQuery(ctx.params));
    await sendJsonRevalidated(ctx.req, ctx.res, page);
    return undefined;
  }

  /**
   * Each of `runs` (a JSON array) through `read`, in order: a run's answer, or `{error, status}`
   * for a run that has none (one missing run must not blank the others). A few runs are read at
   * once (a team server's reads wait on the database), with a turn of the event loop between.
   */
  private async perRun(ctx: ApiContext, read: (runDir: string) => Promise<unknown>): Promise<{ runs: unknown[] }> {
    const runs = parseRuns(ctx.params.get("runs"));
    const answers = await readAhead(
      runs.length,
      (i) => this.inRun(ctx, runs[i] ?? null, read, true, true),
      () => ctx.res.destroyed,
      this.source.concurrentRuns ?? READ_AHEAD,
    );
    return { runs: answers.map((a) => (a.ok ? a.value : { error: a.error.message, status: a.error.status })) };
  }

  /** `/api/keys?run=`: a run's keys and lines; `?runs=[…]`: many runs' in one answer (`{runs: […]}`). */
  private keys(ctx: ApiContext): Promise<unknown> {
    if (ctx.params.has("runs")) return this.perRun(ctx, (runDir) => runKeys(this.source, runDir));
    return this.withRun(ctx, (runDir) => runKeys(this.source, runDir));
  }

  /**
   * `/api/alerts?run=[&after=seq][&limit=n]`: the run's alert events in order (at most 1000, the
   * newest); `?runs=[…]`: many runs' in one answer (`{runs: [{alerts}, …]}`).
   */
  private alerts(ctx: ApiContext): Promise<unknown> {
    const after = intParam(ctx.params, "after", 0, Number.MAX_SAFE_INTEGER);
    const limit = intParam(ctx.params, "limit", 1, 1000) ?? 1000;
    const read = async (runDir: string): Promise<unknown> => ({
      alerts: await this.source.alerts(runDir, { ...(after === undefined ? {} : { after }), limit }),
    });
    return ctx.params.has("runs") ? this.perRun(ctx, read) : this.withRun(ctx, read);
  }

  /** `/api/summary?run=[&keys=a,b][&internal=1]`: the last value of each scalar key. */
  private summary(ctx: ApiContext): Promise<unknown> {
    const internal = flagParam(ctx.params, "internal");
    const only = keysParam(ctx.params.get("keys"));
    return this.withRun(ctx, async (runDir) => {
      const all = (await this.source.lastValues?.(runDir)) ?? {};
      const out: Record<string, number> = {};
      for (const [key, value] of Object.entries(all)) {
        if (only !== undefined ? !only.has(key) : !internal && isInternalKey(key)) continue;
        out[key] = value;
      }
      return out;
    });
  }

  private series(ctx: ApiContext): Promise<unknown> {
    const key = requiredParam(ctx.params, "key");
    // A line: r for rank r, -1 the global line, -2 the controller's own (docs/DESIGN.md, "Identity").
    const rank = intParam(ctx.params, "rank", CONTROLLER_LINE, 1_000_000);
    const maxPoints = maxPointsParam(ctx.params);
    const after = ctx.params.get("after") ?? undefined;
    const before = ctx.params.get("before") ?? undefined;
    return this.withRun(ctx, (runDir) =>
      this.source.series(runDir, key, {
        ...(rank !== undefined ? { rank } : {}),
        ...(after !== undefined ? { after } : {}),
        ...(before !== undefined ? { before } : {}),
        maxPoints,
      }),
    );
  }

  private stream(ctx: ApiContext): Promise<unknown> {
    const key = requiredParam(ctx.params, "key");
    const maxPoints = maxPointsParam(ctx.params);
    const after = ctx.params.get("after") ?? undefined;
    const rank = intParam(ctx.params, "rank", CONTROLLER_LINE, 1_000_000);
    return this.withRun(ctx, (runDir) =>
      this.source.stream(runDir, key, {
        ...(after !== undefined ? { after } : {}),
        ...(rank !== undefined ? { rank } : {}),
        maxPoints,
      }),
    );
  }

  private system(ctx: ApiContext): Promise<unknown> {
    const key = requiredParam(ctx.params, "key");
    const maxPoints = maxPointsParam(ctx.params);
    const after = ctx.params.get("after") ?? undefined;
    return this.withRun(ctx, (runDir) =>
      this.source.system(runDir, key, { ...(after !== undefined ? { after } : {}), maxPoints }),
    );
  }

  /**
   * Many lines in one request: of one run (`run=`), or each line naming its run (no `run`: an
   * overlay of many runs in one request). A few lines are read at once (a team server's reads
   * wait on the database) and each is serialised as soon as its turn comes, giving the event loop
   * a turn in between where one is due (`turnIfDue`), so a request for many long series never
   * holds the server from answering others for longer than a few ms and one line's read, and a
   * poll of many short lines is not sent to the back of a busy server's queue once per line.
   */
  private async lines(ctx: ApiContext): Promise<unknown> {
    const kind = ctx.params.get("kind") ?? "scalar";
    if (kind !== "scalar" && kind !== "stream" && kind !== "system")
      throw new HttpError(400, `kind must be scalar, stream or system, got ${JSON.stringify(kind)}`);
    const maxPoints = maxPointsParam(ctx.params);
    const run = ctx.params.get("run");
    const lines: RunLineRequest[] =
      run === null
        ? parseLines(ctx.params.get("lines"), maxPoints, true)
        : parseLines(ctx.params.get("lines"), maxPoints).map((l) => [run, ...l] as const);
    const readLine = ([lineRun, key, rank, after, before]: RunLineRequest): Promise<unknown> =>
      this.inRun(
        ctx,
        lineRun,
        (runDir) => {
          const query = { ...(after !== null ? { after } : {}), maxPoints };
          if (before !== null && kind === "stream")
            throw new HttpError(400, "before applies to scalar and system lines, not to streams");
          const window = before !== null ? { ...query, before } : query;
          if (kind === "scalar")
            return this.source.series(runDir, key, { ...window, ...(rank !== null ? { rank } : {}) });
          if (kind === "stream")
            return this.source.stream(runDir, key, { ...query, ...(rank !== null ? { rank } : {}) });
          return this.source.system(runDir, key, window);
        },
        true,
        true,
      );
    const answers = await readAhead(
      lines.length,
      (i) => readLine(lines[i] ?? ["", "", null, null, null]),
      () => ctx.res.destroyed,
    );
    // Each line is serialised on its own, so no one call serialises megabytes.
    const out = new JsonPieces().raw('{"lines":[');
    for (const [i, answer] of answers.entries()) {
      if (i > 0) {
        await turnIfDue();
        out.raw(",");
      }
      out.value(answer.ok ? answer.value : { error: answer.error.message, status: answer.error.status });
    }
    return out.raw("]}");
  }

  /**
   * `/api/histograms?run=&key=[&limit=][&rank=]`: one line's histograms when `rank` (the store's
   * line: -1 the global one) is given, so a heatmap never adds a step's global histogram to its
   * ranks'; `ranks` lists the lines there are.
   */
  private histograms(ctx: ApiContext): Promise<unknown> {
    const key = requiredParam(ctx.params, "key");
    const limit = intParam(ctx.params, "limit", 1, 500) ?? 20;
    // A line as the store keeps it: -1 global, other negative lines (the controller's, a worker's) included.
    const rank = intParam(ctx.params, "rank", Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    return this.withRun(ctx, async (runDir) => {
      const histograms =
        this.source.histograms === undefined ? [] : await this.source.histograms(runDir, key, limit, rank);
      const ranks =
        (await this.source.histogramRanks?.(runDir, key)) ??
        [...new Set(histograms.map((h) => h.rank))].sort((a, b) => a - b);
      return { histograms, ranks };
    });
  }

  private config(ctx: ApiContext): Promise<unknown> {
    return this.withRun(ctx, async (runDir) => {
      const details = await this.source.runDetails(runDir);
      const versionText = details.versionJson;
      let versionInfo: unknown = null;
      if (versionText !== null) {
        try {
          versionInfo = JSON.parse(versionText);
        } catch {
          versionInfo = versionText;
        }
      }
      const params = await this.source.config(runDir);
      return { params, configYaml: details.configYaml, version: versionInfo, tags: details.tags, group: details.group };
    });
  }

  /**
   * `/api/log?run=&file=[&after=|&before=][&maxBytes=][&limit=][&level=][&component=]`: one window
   * of a text log in `logs/` (log-reader.ts), never the whole file: the tail, the bytes before
   * `before`, or those after `after` (byte offsets from an earlier answer's `start` and `end`).
   */
  private log(ctx: ApiContext): Promise<unknown> {
    const p = ctx.params;
    const query = logQueryParam(p);
    return this.withRun(
      ctx,
      async (runDir) => readLogWindow(await this.source.logFile(runDir, p.get("file")), query),
      false,
    );
  }

  /** `/api/trace?run=&file=`: a trace file as a download. */
  private trace(ctx: ApiContext): Promise<undefined> {
    return this.withRun(
      ctx,
      async (runDir) => {
        const file = await this.source.traceFile(runDir, ctx.params.get("file"));
        sendTraceFile(ctx.req, ctx.res, file);
        return undefined;
      },
      false,
    );
  }
}
