/**
 * The app inside a report (`rankscope report`, docs/report.md): the answers the API gave when the
 * report was written, carried in the page (`report-data.ts`), answer the app's requests instead of
 * the network. Each endpoint the app asks is answered as the server would, from that data: a
 * line's points in the window asked, the runs a runs query names, a key's histograms of a line.
 * Nothing is fetched: a request the data cannot answer is a 404 saying so.
 */
import { isInternalKey } from "../../core/internal-keys.js";
import { isRecord } from "../../core/json.js";
import {
  REPORT_DATA_ID,
  decodeColumn,
  type ReportData,
  type ReportLine,
  type ReportRun,
  type ReportStream,
} from "../report-data.js";

/** A frozen answer: the JSON text the server would send, or its refusal. */
export interface FrozenAnswer {
  readonly status: number;
  readonly text: string;
}

function isReportData(value: unknown): value is ReportData {
  return (
    isRecord(value) &&
    isRecord(value["made"]) &&
    typeof value["hash"] === "string" &&
    isRecord(value["version"]) &&
    Array.isArray(value["runs"]) &&
    isRecord(value["perRun"])
  );
}

/** The page's report data, decoded once; null on a page that is not a report. */
let loaded: Promise<ReportData> | null | undefined;

async function decode(base64: string): Promise<ReportData> {
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  const parsed: unknown = JSON.parse(await new Response(stream).text());
  if (!isReportData(parsed)) throw new Error("this report's data is damaged (not what rankscope report writes)");
  return parsed;
}

/** The report this page carries, or null when it is the dashboard itself. */
export function reportData(): Promise<ReportData> | null {
  if (loaded === undefined) {
    const node = typeof document === "undefined" ? null : document.getElementById(REPORT_DATA_ID);
    loaded = node === null ? null : decode((node.textContent ?? "").trim());
  }
  return loaded;
}

const ok = (value: unknown): FrozenAnswer => ({ status: 200, text: JSON.stringify(value) });
const missing = (what: string): FrozenAnswer => ({
  status: 404,
  text: JSON.stringify({ error: `${what} is not in this report` }),
});

/** The points of `line` after `after` (a cursor: a step) and before `before` (a step), as `/api/lines` answers them. */
function lineAnswer(line: ReportLine, after: unknown, before: unknown): Record<string, unknown> {
  const steps = decodeColumn(line.steps);
  const times = decodeColumn(line.times);
  const from = typeof after === "string" && after !== "" ? Number(after) : -Infinity;
  const to = typeof before === "number" || typeof before === "string" ? Number(before) : Infinity;
  const kept: { steps: Array<number | string>; times: Array<number | string>; values: unknown[] } = {
    steps: [],
    times: [],
    values: [],
  };
  steps.forEach((step, i) => {
    const s = Number(step);
    if (s <= from || s >= to) return;
    kept.steps.push(step);
    kept.times.push(times[i] ?? NaN);
    kept.values.push(line.values[i]);
  });
  const last = kept.steps[kept.steps.length - 1];
  const cursor = last !== undefined ? String(last) : typeof after === "string" ? after : null;
  return { ...kept, cursor, downsampled: line.downsampled };
}

/** A stream key's raw values, of one rank when `rank` is given (a per-rank line). */
function streamAnswer(key: string, stream: ReportStream, rank: unknown): Record<string, unknown> {
  const ranks = decodeColumn(stream.ranks);
  const steps = decodeColumn(stream.steps);
  const times = decodeColumn(stream.times);
  const keep = ranks.map((r) => rank === null || rank === undefined || Number(r) === Number(rank));
  const pick = <T>(column: readonly T[]): T[] => column.filter((_, i) => keep[i] === true);
  return {
    key,
    ranks: pick(ranks),
    steps: pick(steps),
    times: pick(times),
    values: pick(stream.values),
    cursor: null,
  };
}

/** One line `[run, key, rank, after, before]` of `kind` from the report's data, or why it has none. */
function lineOf(data: ReportData, kind: string, [run, key, rank, after, before]: unknown[]): unknown {
  const kept = data.perRun[String(run)];
  const name = String(key);
  const notHere = { error: `${kind} line ${name} of ${String(run)} is not in this report`, status: 404 };
  if (kind === "stream") {
    const stream = kept?.streams[name];
    return stream === undefined ? notHere : streamAnswer(name, stream, rank);
  }
  const line = kind === "system" ? kept?.system[name] : kept?.lines[name]?.[rank === null ? "g" : String(rank)];
  return line === undefined ? notHere : lineAnswer(line, after, before);
}

/** `/api/lines`: each line `[run?, key, rank, after, before?]` of a kind (scalar, stream, system) from the report's data. */
function lines(data: ReportData, params: URLSearchParams): FrozenAnswer {
  const kind = params.get("kind") ?? "scalar";
  const run = params.get("run");
  const asked: unknown = JSON.parse(params.get("lines") ?? "[]");
  if (!Array.isArray(asked)) return { status: 400, text: JSON.stringify({ error: "lines must be a JSON array" }) };
  const answers = asked.map((entry: unknown) => {
    const parts: unknown[] = Array.isArray(entry) ? entry : [];
    return lineOf(data, kind, run === null ? parts : [run, ...parts]);
  });
  return ok({ lines: answers });
}

/** `/api/runs`: the report's runs the query names (by id, text, tag, group or status), a page of them. */
function runs(data: ReportData, params: URLSearchParams): FrozenAnswer {
  const ids = params.getAll("run");
  const words = params.getAll("q").map((q) => q.toLowerCase());
  const tags = params.getAll("tag");
  const statuses = params.getAll("status");
  const group = params.get("group");
  const internal = params.get("internal") === "1";
  const matching = data.runs.filter((r) => {
    if (!isRecord(r)) return false;
    const runTags = Array.isArray(r["tags"]) ? r["tags"].map(String) : [];
    const text = [r["id"], r["group"], ...runTags].map((t) => String(t ?? "").toLowerCase()).join("\n");
    return (
      (ids.length === 0 || ids.includes(String(r["id"]))) &&
      words.every((w) => text.includes(w)) &&
      tags.every((t) => runTags.includes(t)) &&
      (statuses.length === 0 || statuses.includes(String(r["status"]))) &&
      (group === null || r["group"] === group)
    );
  });
  const offset = Number(params.get("offset") ?? 0);
  const limit = Number(params.get("limit") ?? matching.length);
  const page = matching.slice(offset, offset + limit).map((r) => {
    if (!isRecord(r) || params.get("summary") !== "1") return r;
    const summary = isRecord(r["summary"]) ? r["summary"] : {};
    return {
      ...r,
      summary: Object.fromEntries(Object.entries(summary).filter(([k]) => internal || !isInternalKey(k))),
    };
  });
  return ok({ runs: page, total: matching.length });
}

/** `/api/groups`: the bands of the grouping the report was written with (another grouping is not in it). */
function groups(data: ReportData, params: URLSearchParams): FrozenAnswer {
  const by = params.getAll("by");
  const kept = data.groups;
  if (kept === undefined || by.join("\u0000") !== kept.by.join("\u0000"))
    return missing(`grouping by ${by.join(", ")} (group the view before exporting it)`);
  const answer = kept.byKey[params.get("key") ?? ""];
  return answer === undefined ? missing(`key ${JSON.stringify(params.get("key"))}`) : ok(answer);
}

/** `/api/summary?run=[&keys=][&internal=1]`. */
function summary(run: ReportRun, params: URLSearchParams): FrozenAnswer {
  const only = params.get("keys");
  const keys = only === null ? null : new Set(only.split(","));
  const internal = params.get("internal") === "1";
  return ok(
    Object.fromEntries(
      Object.entries(run.summary).filter(([k]) => (keys !== null ? keys.has(k) : internal || !isInternalKey(k))),
    ),
  );
}

/** `/api/histograms?run=&key=[&limit=][&rank=]`. */
function histograms(run: ReportRun, params: URLSearchParams): FrozenAnswer {
  const key = params.get("key") ?? "";
  const kept = run.histograms[key];
  if (kept === undefined) return missing(`histogram ${JSON.stringify(key)}`);
  const rank = params.get("rank");
  if (rank === null) return ok(kept.latest);
  const answer = kept.byRank[rank];
  if (!isRecord(answer) || !Array.isArray(answer["histograms"])) return ok({ histograms: [], ranks: [] });
  const limit = Number(params.get("limit") ?? 20);
  return ok({ ...answer, histograms: answer["histograms"].slice(-limit) });
}

/** One run's answer to a run-scoped endpoint. */
function ofRun(path: string, run: ReportRun, params: URLSearchParams): FrozenAnswer {
  if (path === "keys") return ok(run.keys);
  if (path === "summary") return summary(run, params);
  if (path === "alerts") return ok({ alerts: run.alerts });
  if (path === "samples") return ok({ samples: run.samples });
  if (path === "config") return ok(run.config);
  if (path === "ranks") return run.ranks === null ? missing("the Ranks view") : ok(run.ranks);
  if (path === "histograms") return histograms(run, params);
  if (path === "traces" || path === "logs") return ok({ files: [] });
  return missing(`/api/${path}`);
}

/** Many runs' answers at once (`runs=[…]`), as the server gives them. */
function perRun(data: ReportData, path: string, params: URLSearchParams): FrozenAnswer {
  const ids: unknown = JSON.parse(params.get("runs") ?? "[]");
  const answers = (Array.isArray(ids) ? ids : []).map((id: unknown) => {
    const run = data.perRun[String(id)];
    if (run === undefined) return { error: `run ${JSON.stringify(id)} is not in this report`, status: 404 };
    const answer = ofRun(path, run, params);
    const value: unknown = JSON.parse(answer.text);
    return answer.status === 200 ? value : { ...(isRecord(value) ? value : {}), status: answer.status };
  });
  return ok({ runs: answers });
}

/** The answer to `api/<path>?<params>` from the report's data. */
export function frozenAnswer(data: ReportData, path: string, params: URLSearchParams): FrozenAnswer {
  if (path === "version") return ok(data.version);
  if (path === "runs") return runs(data, params);
  if (path === "lines") return lines(data, params);
  if (path === "groups") return groups(data, params);
  if (params.has("runs")) return perRun(data, path, params);
  const id = params.get("run") ?? "";
  const run = data.perRun[id];
  if (run === undefined) return missing(`run ${JSON.stringify(id)}`);
  return ofRun(path, run, params);
}
