/**
 * MLflow runs from a tracking server's REST API (`/api/2.0/mlflow/…`, as MLflow's REST API
 * reference documents it): `POST experiments/search` and `POST runs/search` (paged by
 * `next_page_token`) list the runs with their params, tags and each metric's latest value; `GET
 * metrics/get-history` (paged, `max_results` ≤ 25,000) gives every value of a metric with its step
 * and timestamp. Every request has a deadline; a failed one is an error naming it. A run is read
 * whole before it is written, so its fingerprint (what makes a second import change nothing) is a
 * SHA-256 of what the server answered.
 */
import { createHash } from "node:crypto";
import { isRecord, parseNumber } from "../core/json.js";
import { GLOBAL_RANK } from "../store/schema.js";
import { ImportError, type ImportRun } from "./import-run.js";

/** Per request. */
const REQUEST_DEADLINE_MS = 60_000;
const HISTORY_PAGE = 25_000;

/** One metric value as the server gives it. */
interface MetricPoint {
  readonly step: number;
  readonly timestamp: number;
  readonly value: number;
}

/** One run as read from the server. */
export interface MlflowRestRun {
  readonly runId: string;
  readonly runName: string;
  readonly experimentName: string;
  readonly params: Record<string, string>;
  readonly tags: Record<string, string>;
  readonly metrics: Map<string, MetricPoint[]>;
  readonly fingerprint: string;
}

/** A JSON answer of the server, or an Error naming the request. */
async function call(base: string, path: string, body?: Record<string, unknown>): Promise<Record<string, unknown>> {
  const url = new URL(`api/2.0/mlflow/${path}`, base.endsWith("/") ? base : `${base}/`);
  const where = `${body === undefined ? "GET" : "POST"} ${url.pathname}${url.search}`;
  let answer: Response;
  try {
    answer = await fetch(url, {
      method: body === undefined ? "GET" : "POST",
      ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
      signal: AbortSignal.timeout(REQUEST_DEADLINE_MS),
    });
  } catch (error) {
    throw new Error(`${where}: no answer within ${REQUEST_DEADLINE_MS / 1000} s or no connection: ${String(error)}`, {
      cause: error,
    });
  }
  const text = await answer.text();
  if (!answer.ok) throw new Error(`${where}: HTTP ${answer.status}: ${text.slice(0, 300)}`);
  const parsed: unknown = JSON.parse(text);
  if (!isRecord(parsed)) throw new Error(`${where}: the answer is not a JSON object`);
  return parsed;
}

function list(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function field(value: unknown, name: string): unknown {
  return isRecord(value) ? value[name] : undefined;
}

/** An int64 as MLflow's JSON gives it: a number, or its digits as a string. */
function int64(value: unknown): number {
  if (typeof value === "number") return value;
  if (typeof value === "string" && /^-?\d+$/.test(value)) return Number(value);
  return 0;
}

/** `[{key, value}]` as an object. */
function keyValues(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of list(value)) {
    const key = field(kv, "key");
    const v = field(kv, "value");
    if (typeof key === "string") out[key] = typeof v === "string" ? v : String(v);
  }
  return out;
}

/** Every page of a paged POST, concatenated. */
async function pages(base: string, path: string, body: Record<string, unknown>, items: string): Promise<unknown[]> {
  const out: unknown[] = [];
  let token: string | undefined;
  do {
    const answer = await call(base, path, { ...body, ...(token === undefined ? {} : { page_token: token }) });
    out.push(...list(answer[items]));
    const next = answer["next_page_token"];
    token = typeof next === "string" && next !== "" ? next : undefined;
  } while (token !== undefined);
  return out;
}

/** Every value of one metric of a run. */
async function history(base: string, runId: string, key: string): Promise<MetricPoint[]> {
  const out: MetricPoint[] = [];
  let token: string | undefined;
  do {
    const query = new URLSearchParams({ run_id: runId, metric_key: key, max_results: String(HISTORY_PAGE) });
    if (token !== undefined) query.set("page_token", token);
    const answer = await call(base, `metrics/get-history?${query.toString()}`);
    for (const m of list(answer["metrics"]))
      out.push({
        step: int64(field(m, "step")),
        timestamp: int64(field(m, "timestamp")),
        value: parseNumber(field(m, "value")),
      });
    const next = answer["next_page_token"];
    token = typeof next === "string" && next !== "" ? next : undefined;
  } while (token !== undefined);
  return out;
}

/** Every run of the server (or of the experiments named), read whole. */
export async function readMlflowServer(base: string, experimentNames?: readonly string[]): Promise<MlflowRestRun[]> {
  const experiments = await pages(base, "experiments/search", { max_results: 1000 }, "experiments");
  const runs: MlflowRestRun[] = [];
  for (const experiment of experiments) {
    const id = field(experiment, "experiment_id");
    const name = field(experiment, "name");
    if (typeof id !== "string" || typeof name !== "string") continue;
    if (experimentNames !== undefined && !experimentNames.includes(name)) continue;
    for (const run of await pages(base, "runs/search", { experiment_ids: [id], max_results: 1000 }, "runs")) {
      const info = field(run, "info");
      const data = field(run, "data");
      const runId = field(info, "run_id");
      if (typeof runId !== "string") continue;
      const metrics = new Map<string, MetricPoint[]>();
      for (const latest of list(field(data, "metrics"))) {
        const key = field(latest, "key");
        if (typeof key === "string" && !metrics.has(key)) metrics.set(key, await history(base, runId, key));
      }
      const runName = field(info, "run_name");
      const read = {
        runId,
        runName: typeof runName === "string" ? runName : "",
        experimentName: name,
        params: keyValues(field(data, "params")),
        tags: keyValues(field(data, "tags")),
      };
      const hash = createHash("sha256").update(
        JSON.stringify([read, [...metrics].map(([k, v]) => [k, v.map((p) => [p.step, p.timestamp, String(p.value)])])]),
      );
      runs.push({ ...read, metrics, fingerprint: hash.digest("hex") });
    }
  }
  return runs;
}

/** Write one run read from the server into `run`. */
export function importMlflowRestRun(source: MlflowRestRun, base: string, run: ImportRun): void {
  if (Object.keys(source.params).length > 0 || Object.keys(source.tags).length > 0)
    run.hyperparams({ ...source.params, ...(Object.keys(source.tags).length > 0 ? { tags: source.tags } : {}) });
  for (const [key, points] of source.metrics) {
    for (const [i, p] of points.entries()) {
      if (!Number.isFinite(p.step) || !Number.isFinite(p.timestamp))
        throw new ImportError(
          `${base} run ${source.runId}`,
          `metric ${key} value ${i + 1}`,
          "has no step or timestamp",
        );
      run.scalar(key, GLOBAL_RANK, p.step, p.timestamp, p.value);
    }
  }
}
