/**
 * `rankscope import mlflow http://…` against a strict local stand-in for an MLflow tracking
 * server's REST API, answering as MLflow's REST API reference documents (MLflow itself is not
 * available on this machine kind): `POST experiments/search`, `POST runs/search` and `GET
 * metrics/get-history`, each paged by `next_page_token`, refusing any other endpoint, method,
 * parameter or field, and `max_results` beyond the documented 25,000. Values come as MLflow's
 * JSON gives them (NaN and ±Infinity as strings, int64 as numbers or digit strings). Every value
 * with its step and timestamp, the params and the tags arrive; importing twice changes nothing.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { isRecord } from "../../src/core/json.js";
import { closeStores, config, series } from "../../src/store/reader.js";
import { builtCli, tempDir, within } from "../helpers.js";

const CLI = builtCli();
const PAGE = 3;

const EXPERIMENTS = [
  { experiment_id: "0", name: "Default", lifecycle_stage: "active" },
  { experiment_id: "17", name: "ppo", lifecycle_stage: "active" },
];
/** run id → metric key → [step, timestamp, value as MLflow's JSON writes it]. */
const HISTORY: Record<string, Record<string, [number | string, number | string, number | string][]>> = {
  aaaa1111bbbb2222: {
    "train/loss": [
      [0, 1721450907221, 2.5],
      [1, 1721450907231, "NaN"],
      [2, 1721450907241, "Infinity"],
      [3, 1721450907251, "-Infinity"],
      [4, 1721450907261, 0.30000000000000004],
      [5, 1721450907271, 5e-324],
      [6, 1721450907281, -1.7976931348623157e308],
    ],
    acc: [
      ["10", "1721450908000", 0.5],
      ["20", "1721450909000", 0.75],
    ],
  },
  cccc3333dddd4444: { reward: [[7, 1700000000000, 1]] },
};
const RUNS = [
  {
    info: {
      run_id: "aaaa1111bbbb2222",
      run_name: "brave-fox",
      experiment_id: "17",
      status: "FINISHED",
      start_time: 1721450907221,
    },
    data: {
      metrics: [
        { key: "train/loss", value: -1.7976931348623157e308, timestamp: 1721450907281, step: 6 },
        { key: "acc", value: 0.75, timestamp: 1721450909000, step: 20 },
      ],
      params: [{ key: "lr", value: "0.0003" }],
      tags: [{ key: "mlflow.runName", value: "brave-fox" }],
    },
  },
  {
    info: {
      run_id: "cccc3333dddd4444",
      run_name: "",
      experiment_id: "0",
      status: "FINISHED",
      start_time: 1700000000000,
    },
    data: { metrics: [{ key: "reward", value: 1, timestamp: 1700000000000, step: 7 }] },
  },
];

/** Refuse with MLflow's error shape. */
function refuse(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ error_code: "INVALID_PARAMETER_VALUE", message }));
}

/** One page of `items` at `token` (an offset), with the next page's token. */
function page<T>(items: readonly T[], token: unknown): { items: T[]; next?: string } {
  const at = typeof token === "string" ? Number(token) : 0;
  const next = at + PAGE < items.length ? String(at + PAGE) : undefined;
  return { items: items.slice(at, at + PAGE), ...(next === undefined ? {} : { next }) };
}

function only(fields: readonly string[], allowed: readonly string[]): string | null {
  const bad = fields.find((f) => !allowed.includes(f));
  return bad === undefined ? null : `unknown field ${bad}`;
}

const requests: string[] = [];

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? "/", "http://x");
  requests.push(`${req.method ?? ""} ${url.pathname}`);
  let text = "";
  for await (const chunk of req) text += String(chunk);
  const send = (body: unknown): void => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  if (url.pathname === "/api/2.0/mlflow/experiments/search" || url.pathname === "/api/2.0/mlflow/runs/search") {
    if (req.method !== "POST") return refuse(res, 405, "POST only");
    if (req.headers["content-type"] !== "application/json") return refuse(res, 400, "a JSON body");
    const body: unknown = JSON.parse(text);
    if (!isRecord(body)) return refuse(res, 400, "a JSON object");
    const fields = Object.keys(body);
    const get = (name: string): unknown => body[name];
    const max = get("max_results");
    if (max !== undefined && (typeof max !== "number" || !Number.isInteger(max) || max > 50_000))
      return refuse(res, 400, "max_results");
    if (url.pathname.endsWith("experiments/search")) {
      const bad = only(fields, ["max_results", "page_token", "filter", "order_by", "view_type"]);
      if (bad !== null) return refuse(res, 400, bad);
      const p = page(EXPERIMENTS, get("page_token"));
      return send({ experiments: p.items, ...(p.next === undefined ? {} : { next_page_token: p.next }) });
    }
    const bad = only(fields, ["experiment_ids", "filter", "run_view_type", "max_results", "order_by", "page_token"]);
    if (bad !== null) return refuse(res, 400, bad);
    const ids = get("experiment_ids");
    if (!Array.isArray(ids) || ids.some((i) => typeof i !== "string"))
      return refuse(res, 400, "experiment_ids: strings");
    const p = page(
      RUNS.filter((r) => ids.includes(r.info.experiment_id)),
      get("page_token"),
    );
    return send({ runs: p.items, ...(p.next === undefined ? {} : { next_page_token: p.next }) });
  }
  if (url.pathname === "/api/2.0/mlflow/metrics/get-history") {
    if (req.method !== "GET") return refuse(res, 405, "GET only");
    const bad = only([...url.searchParams.keys()], ["run_id", "run_uuid", "metric_key", "page_token", "max_results"]);
    if (bad !== null) return refuse(res, 400, bad);
    const runId = url.searchParams.get("run_id");
    const key = url.searchParams.get("metric_key");
    const max = Number(url.searchParams.get("max_results") ?? "25000");
    if (!Number.isInteger(max) || max > 25_000) return refuse(res, 400, "max_results must be at most 25000");
    const points = HISTORY[runId ?? ""]?.[key ?? ""];
    if (points === undefined) return refuse(res, 404, "RESOURCE_DOES_NOT_EXIST");
    const p = page(points, url.searchParams.get("page_token") ?? undefined);
    return send({
      metrics: p.items.map(([step, timestamp, value]) => ({ key, value, timestamp, step })),
      ...(p.next === undefined ? {} : { next_page_token: p.next }),
    });
  }
  refuse(res, 404, `ENDPOINT_NOT_FOUND ${url.pathname}`);
}

function cli(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [CLI, ...args], { timeout: 120_000 });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += String(d)));
  child.stderr.on("data", (d: Buffer) => (stderr += String(d)));
  return within(new Promise((resolve) => child.on("close", (code) => resolve({ code, stdout, stderr }))), {
    timeoutMs: 130_000,
    what: "rankscope import mlflow to exit",
  });
}

describe("rankscope import mlflow (tracking server REST API)", () => {
  const server = createServer((req, res) => void handle(req, res).catch((e: unknown) => refuse(res, 500, String(e))));
  let url = "";
  before(async () => {
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const address = server.address();
    if (address === null || typeof address === "string") throw new Error("the stand-in server has no port");
    url = `http://127.0.0.1:${address.port}`;
  });
  after(() => server.close());

  test("every metric value with its step and timestamp, params and tags arrive, through every page; importing twice changes nothing", async () => {
    const root = tempDir();
    const r = await cli(["import", "mlflow", url, "--root", root]);
    assert.equal(r.code, 0, r.stderr);
    const run = join(root, "ppo", "brave-fox-aaaa1111");
    for (const [key, points] of Object.entries(HISTORY["aaaa1111bbbb2222"] ?? {}))
      assert.deepEqual(
        series(run, key, { maxPoints: Infinity }).points.map((p) => [p.step, p.wall, String(p.value)]),
        points.map(([s, t, v]) => [Number(s), Number(t), String(typeof v === "string" ? Number(v) : v)]),
        key,
      );
    assert.deepEqual(config(run), { lr: "0.0003", tags: { "mlflow.runName": "brave-fox" } });
    assert.deepEqual(
      series(join(root, "Default", "cccc3333dddd4444"), "reward").points.map((p) => [p.step, p.wall, p.value]),
      [[7, 1700000000000, 1]],
    );
    assert.ok(
      requests.filter((q) => q.endsWith("get-history")).length >= 5,
      "the 7-value history was read a page at a time",
    );
    closeStores();
    const again = await cli(["import", "mlflow", url, "--root", root]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout.match(/already imported/g)?.length, 2, again.stdout);
  });
});
