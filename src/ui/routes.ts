/**
 * The dashboard's JSON API as a table: path → handler. Each handler gets the checked request and
 * returns the JSON to send (or sends a download itself). Run-scoped handlers have the source
 * resolve `run` first (the local source refuses a run or a `metrics.db` that resolves outside the
 * root before anything opens it; the server's refuses a run of another project). The same table
 * serves `rankscope ui` and `rankscope server`.
 */
import { CONTROLLER_LINE, lineDisplayLabel } from "../core/rank-identity.js";
import type { IncomingMessage, ServerResponse } from "node:http";
import { pipeline } from "node:stream/promises";
import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { turnIfDue } from "./loop-turns.js";
import { createGzip } from "node:zlib";
import { warn } from "../core/diagnostics.js";
import { isInternalKey } from "../core/internal-keys.js";
import { storeFault } from "../store/store-file.js";
import { errorCode } from "../core/errors.js";
import { GZIP_LEVEL, JsonPieces, SECURITY_HEADERS, acceptsGzip, sendJsonRevalidated } from "./http.js";
import {
  type GroupValue,
  type RunLine,
  compareGroupValues,
  fieldLabel,
  groupBand,
  parseGroupField,
} from "./group-bands.js";
import {
  MAX_BATCH_POINTS,
  type RunLineRequest,
  flagParam,
  intParam,
  maxPointsParam,
  checkParamText,
  parseLines,
  parseRuns,
  requiredParam,
} from "./params.js";
import { LOG_MAX_LINES, LOG_MAX_WINDOW, readLogWindow } from "./log-reader.js";
import { MAX_RUN_IDS, parseRunQuery } from "./run-query.js";
import { HttpError } from "./security.js";
import type { DashboardSource, LabelledRun, TraceFileEntry } from "./source.js";
import { DEFAULT_TIMING_FLUSHES, MAX_TIMING_FLUSHES } from "../store/rank-timing.js";

/** Most fields one `/api/groups` request groups by. */
const MAX_GROUP_FIELDS = 5;

/** A header parameter value in RFC 5987's `attr-char`s: UTF-8, percent-encoded. */
function rfc5987(text: string): string {
  return encodeURIComponent(text).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** `keys` of `/api/summary`: `a,b,c`, or a JSON array for keys that hold commas; undefined when absent. */
function keysParam(raw: string | null): Set<string> | undefined {
  if (raw === null || raw === "") return undefined;
  if (!raw.startsWith("[")) return new Set(raw.split(","));
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    parsed = undefined;
  }
  const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((k) => typeof k === "string");
  if (!isStrings(parsed))
    throw new HttpError(
      400,
      `keys must be key,key,… or a JSON array of strings, got ${JSON.stringify(raw.slice(0, 100))}`,
    );
  return new Set(parsed);
}

/** The text logs first (merged.log: every process; main.log: the controller's), then any other file of `logs/`. */
function logFiles(files: TraceFileEntry[]): TraceFileEntry[] {
  const order = (name: string): number => (name === "merged.log" ? 0 : name === "main.log" ? 1 : 2);
  return [...files].sort((a, b) => order(a.name) - order(b.name) || (a.name < b.name ? -1 : 1));
}

/**
 * How many reads of one request run at once, unless the source says (`concurrentRuns`): a team
 * server's wait on the database; the local store's do not overlap.
 */
const READ_AHEAD = 4;

/** One read's outcome: its value, or the HTTP error that says why there is none. */
type ReadOutcome = { ok: true; value: unknown } | { ok: false; error: HttpError };

/**
 * `n` reads, at most `inFlight` at once, giving the event loop a turn between starts where one is
 * due (`turnIfDue`: reads that wait on I/O, as a team server's, start together); each `HttpError` kept as that read's outcome (any other error fails the
 * request). Stops starting reads once `gone()` (the client left).
 */
async function readAhead(
  n: number,
  read: (i: number) => Promise<unknown>,
  gone: () => boolean,
  inFlight = READ_AHEAD,
): Promise<ReadOutcome[]> {
  const outcomes: ReadOutcome[] = new Array<ReadOutcome>(n);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < n && !gone(); i = next++) {
      await turnIfDue();
      try {
        outcomes[i] = { ok: true, value: await read(i) };
      } catch (error) {
        if (!(error instanceof HttpError)) throw error;
        outcomes[i] = { ok: false, error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, n) }, worker));
  return gone() ? [] : outcomes;
}

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
      [
        "/api/ranks",
        (c) =>
          this.withRun(c, (runDir) =>
            this.source.ranks(runDir, {
              maxFlushes: intParam(c.params, "flushes", 1, MAX_TIMING_FLUSHES) ?? DEFAULT_TIMING_FLUSHES,
            }),
          ),
      ],
      ["/api/groups", (c) => this.groups(c)],
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

  /**
   * `/api/groups?key=&by=…&run=…[&maxPoints=]`: the runs named (`run`, repeatable) grouped by the
   * fields `by` names (repeatable: `param:NAME`, `group`, `experiment`, `status`), and for each
   * group the mean, standard deviation, min and max of the key's global line across its runs,
   * aligned by step (group-bands.ts). Lines are read one run at a time with a turn of the event
   * loop between, each run's at most `MAX_BATCH_POINTS / runs` points.
   */
  private async groups(ctx: ApiContext): Promise<unknown> {
    const key = requiredParam(ctx.params, "key");
    const maxPoints = maxPointsParam(ctx.params);
    const by = ctx.params.getAll("by").filter((b) => b !== "");
    if (by.length === 0 || by.length > MAX_GROUP_FIELDS)
      throw new HttpError(
        400,
        `by must be given 1 to ${MAX_GROUP_FIELDS} times: param:NAME, group, experiment or status`,
      );
    const fields = by.map((raw) => {
      const field = parseGroupField(raw);
      if (field === null || raw.length > 200)
        throw new HttpError(
          400,
          `by must be param:NAME, group, experiment or status, got ${JSON.stringify(raw.slice(0, 80))}`,
        );
      return field;
    });
    const ids = [...new Set(ctx.params.getAll("run").filter((r) => r !== ""))];
    if (ids.length === 0 || ids.length > MAX_RUN_IDS)
      throw new HttpError(400, `run must be given 1 to ${MAX_RUN_IDS} times (experiment/trial as /api/runs lists it)`);
    const perRun = Math.max(3, Math.min(maxPoints, Math.floor(MAX_BATCH_POINTS / ids.length)));
    const { runs } = await this.source.listRuns({ ids, sort: { field: "name" } });
    const groups = new Map<string, { values: GroupValue[]; runs: LabelledRun[] }>();
    for (const run of runs) {
      const values = fields.map((f): GroupValue =>
        f.kind === "param"
          ? (run.params[f.name] ?? null)
          : f.kind === "group"
            ? run.group
            : f.kind === "experiment"
              ? run.experiment
              : run.status,
      );
      const id = JSON.stringify(values);
      const group = groups.get(id) ?? { values, runs: [] };
      group.runs.push(run);
      groups.set(id, group);
    }
    const found = new Set(runs.map((r) => r.id));
    const missing = ids.filter((id) => !found.has(id));
    const out = [];
    for (const group of [...groups.values()].sort((a, b) => compareGroupValues(a.values, b.values))) {
      const lines: RunLine[] = [];
      const members: string[] = [];
      for (const run of group.runs) {
        if (ctx.res.destroyed) return { key, groups: [], missing: [] };
        await yieldToEventLoop();
        const line = await this.groupLine(run.id, key, perRun);
        if (line === null) missing.push(run.id);
        else {
          lines.push(line);
          members.push(run.id);
        }
      }
      if (members.length === 0) continue;
      const label = fields
        .map(
          (f, i) =>
            `${fieldLabel(f)}=${group.values[i] === null || group.values[i] === undefined ? "–" : String(group.values[i])}`,
        )
        .join(" · ");
      out.push({ values: group.values, label, runs: members, ...groupBand(lines, maxPoints) });
    }
    return { key, by, groups: out, missing };
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
    if (ctx.params.has("runs")) return this.perRun(ctx, (runDir) => this.runKeys(runDir));
    return this.withRun(ctx, (runDir) => this.runKeys(runDir));
  }

  /** A run's keys, and every line's label. */
  private async runKeys(runDir: string): Promise<unknown> {
    const [metrics, streams, system, histograms, rankNames] = await Promise.all([
      this.source.keys(runDir),
      this.source.streamKeys(runDir),
      this.source.systemKeys(runDir),
      this.source.histogramKeys?.(runDir) ?? [],
      this.source.rankNames?.(runDir) ?? {},
    ]);
    // Every line's label, by the one naming rule (docs/DESIGN.md, "Identity").
    const rankLabels: Record<string, string> = {};
    for (const line of [...Object.keys(rankNames).map(Number), ...metrics.flatMap((k) => k.ranks)]) {
      if (Number.isInteger(line)) rankLabels[String(line)] = lineDisplayLabel(line, rankNames[String(line)]);
    }
    return {
      metrics: metrics.map((k) => ({ ...k, internal: isInternalKey(k.key) })),
      streams,
      system,
      histograms,
      rankNames,
      rankLabels,
    };
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
    const after = intParam(p, "after", 0, Number.MAX_SAFE_INTEGER);
    const before = intParam(p, "before", 0, Number.MAX_SAFE_INTEGER);
    if (after !== undefined && before !== undefined)
      throw new HttpError(400, "give after (newer lines) or before (older lines), not both");
    const maxBytes = intParam(p, "maxBytes", 1024, LOG_MAX_WINDOW);
    const limit = intParam(p, "limit", 1, LOG_MAX_LINES);
    const level = p.get("level") ?? undefined;
    const component = p.get("component") ?? undefined;
    if (component !== undefined && component.length > 200)
      throw new HttpError(400, "component must be at most 200 characters");
    const query = {
      ...(after !== undefined ? { after } : {}),
      ...(before !== undefined ? { before } : {}),
      ...(maxBytes !== undefined ? { maxBytes } : {}),
      ...(limit !== undefined ? { limit } : {}),
      ...(level !== undefined ? { level } : {}),
      ...(component !== undefined ? { component } : {}),
    };
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
        const name = file.name;
        // Trace JSON compresses ~10×; streamed through gzip, so a large file never sits in memory.
        const gzip = acceptsGzip(ctx.req);
        ctx.res.writeHead(200, {
          ...SECURITY_HEADERS,
          "Content-Type": "application/octet-stream",
          "Content-Disposition": `attachment; filename="${name.replace(/[^\x20-\x7e]|"/g, "_")}"; filename*=UTF-8''${rfc5987(name)}`,
          ...(gzip ? { "Content-Encoding": "gzip" } : { "Content-Length": file.size }),
          Vary: "Accept-Encoding",
          "Cache-Control": "no-store",
        });
        if (ctx.req.method === "HEAD") {
          ctx.res.end();
          return undefined;
        }
        const fail = (): void => {
          ctx.res.destroy();
        };
        if (gzip) pipeline(file.open(), createGzip({ level: GZIP_LEVEL }), ctx.res).catch(fail);
        else pipeline(file.open(), ctx.res).catch(fail);
        return undefined;
      },
      false,
    );
  }
}
