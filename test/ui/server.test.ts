/**
 * The dashboard server over a real store: the JSON API, cursors, downsampling, and its guards
 * (traversal, Host header, token, read-only).
 */
import assert from "node:assert/strict";
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { GLOBAL_RANK } from "../../src/store/read-types.js";
import { startDashboard, type Dashboard, type DashboardRun, type KeyInfo } from "../../src/ui/index.js";
import { tempDir } from "../helpers.js";
import { XSS_KEY, openRun, seedFinishedRun } from "./seed.js";

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A raw HTTP request (fetch would normalise paths and refuse some headers). */
function get(
  url: string,
  options: { path?: string; headers?: Record<string, string>; method?: string } = {},
): Promise<Answer> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: options.path ?? `${u.pathname}${u.search}`,
        method: options.method ?? "GET",
        headers: options.headers ?? {},
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

async function json<T>(base: string, path: string): Promise<T> {
  const answer = await get(base, { path });
  assert.equal(answer.status, 200, `${path}: ${answer.body}`);
  return JSON.parse(answer.body) as T;
}

describe("dashboard server", () => {
  let root: string;
  let outside: string;
  let dashboard: Dashboard;

  before(async () => {
    root = tempDir("rankscope-ui-");
    outside = tempDir("rankscope-ui-outside-");
    seedFinishedRun(root);
    // A big series: downsampled on the server with its spike kept.
    const big = openRun(root, "exp", "big");
    const n = 100_000;
    const steps = new Float64Array(n);
    const walls = new Float64Array(n);
    const values = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      steps[i] = i;
      walls[i] = 1_700_000_000_000 + i;
      values[i] = i === 54_321 ? 1000 : Math.sin(i / 100);
    }
    big.writeSeries("signal", steps, walls, values);
    big.finish();
    // Something outside the root that a symlink inside points to.
    mkdirSync(join(outside, "secret"), { recursive: true });
    writeFileSync(join(outside, "secret", "metrics.db"), "not yours");
    symlinkSync(outside, join(root, "escape"));
    mkdirSync(join(root, "exp", "base", "traces"), { recursive: true });
    symlinkSync(join(outside, "secret", "metrics.db"), join(root, "exp", "base", "traces", "leak.jsonl"));
    dashboard = await startDashboard({ root, port: 0 });
  });

  after(async () => {
    await dashboard.close();
    rmSync(root, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  });

  it("binds 127.0.0.1 without a token by default", () => {
    assert.equal(dashboard.host, "127.0.0.1");
    assert.equal(dashboard.token, undefined);
    assert.match(dashboard.url, /^http:\/\/127\.0\.0\.1:\d+\/$/);
  });

  it("lists runs with experiment, trial, status and times", async () => {
    const { runs } = await json<{ runs: DashboardRun[] }>(dashboard.url, "/api/runs");
    const base = runs.find((r) => r.id === "exp/base");
    assert.ok(base, JSON.stringify(runs));
    assert.equal(base.experiment, "exp");
    assert.equal(base.trial, "base");
    assert.equal(base.status, "finished");
    // The store's RunSummary fields, named as the store names them (no absolute runDir).
    assert.ok(base.startedAt !== null && base.endedAt !== null && base.endedAt >= base.startedAt, JSON.stringify(base));
    assert.ok(base.updatedAt !== null && base.updatedAt >= base.startedAt);
    assert.equal(base.resumeStep, 0);
    assert.equal("runDir" in base, false);
  });

  it("lists a run's keys by kind, with per-rank lines", async () => {
    const keys = await json<{
      metrics: (KeyInfo & { internal: boolean })[];
      streams: string[];
      system: string[];
      histograms: string[];
      rankNames: Record<string, string>;
    }>(dashboard.url, "/api/keys?run=exp/base");
    assert.deepEqual(keys.rankNames, { "1": "Trainer_0_r1" });
    const loss = keys.metrics.find((k) => k.key === "loss");
    // The store's KeyInfo: the global line is rank -1 (GLOBAL_RANK), beside ranks 0 and 1.
    assert.deepEqual(loss, {
      key: "loss",
      kind: "scalar",
      reduce: "mean",
      ranks: [GLOBAL_RANK, 0, 1],
      internal: false,
    });
    assert.ok(keys.metrics.some((k) => k.key === XSS_KEY));
    assert.deepEqual(keys.streams, ["probe/grad_norm"]);
    assert.deepEqual(keys.system, ["gpu/0/util"]);
    assert.deepEqual(keys.histograms, ["grad/hist"]);
  });

  it("serves a series and then only the points after its cursor", async () => {
    const live = openRun(root, "exp", "growing");
    try {
      live.write({ scalars: [0, 1, 2].map((step) => ({ key: "loss", step, wall: 1000 + step, value: step / 2 })) });
      const first = await json<{ steps: number[]; values: number[]; cursor: string }>(
        dashboard.url,
        "/api/series?run=exp/growing&key=loss",
      );
      assert.deepEqual(first.steps, [0, 1, 2]);
      assert.deepEqual(first.values, [0, 0.5, 1]);
      live.write({
        scalars: [3, 4].map((step) => ({ key: "loss", step, wall: 1000 + step, value: step === 4 ? NaN : step })),
      });
      const next = await json<{ steps: number[]; values: unknown[]; cursor: string }>(
        dashboard.url,
        `/api/series?run=exp/growing&key=loss&after=${first.cursor}`,
      );
      assert.deepEqual(next.steps, [3, 4]);
      // NaN survives the trip as the proto3-JSON string the web app turns back into NaN.
      assert.deepEqual(next.values, [3, "NaN"]);
      const none = await json<{ steps: number[] }>(
        dashboard.url,
        `/api/series?run=exp/growing&key=loss&after=${next.cursor}`,
      );
      assert.deepEqual(none.steps, []);
    } finally {
      live.close();
    }
  });

  it("serves many lines in one request, each with its own cursor or error", async () => {
    const lines = JSON.stringify([
      ["loss", null, null],
      ["loss", 1, "100"],
      ["nope", null, null],
    ]);
    const { lines: answers } = await json<{ lines: ({ steps: number[] } | { error: string; status: number })[] }>(
      dashboard.url,
      `/api/lines?run=exp/base&kind=scalar&lines=${encodeURIComponent(lines)}`,
    );
    assert.equal(answers.length, 3);
    assert.equal((answers[0] as { steps: number[] }).steps.length, 120);
    assert.deepEqual(
      (answers[1] as { steps: number[] }).steps,
      Array.from({ length: 19 }, (_, i) => 101 + i),
    );
    assert.equal((answers[2] as { status: number }).status, 404);
    for (const bad of ["not json", "[[1,null,null]]", '[["loss",-3,null]]', "{}"]) {
      const answer = await get(dashboard.url, { path: `/api/lines?run=exp/base&lines=${encodeURIComponent(bad)}` });
      assert.equal(answer.status, 400, bad);
      assert.match(
        JSON.parse(answer.body).error,
        /lines must be JSON \[\[key, rank or null, cursor or null, before or null\]/,
      );
    }
  });

  it("sends −0 as 0, NaN and ±Infinity as their strings, and doubles beyond 2^53 as JavaScript reads them back exactly", async () => {
    const odd = [-0, NaN, Infinity, -Infinity, 2 ** 60, 2 ** 53 + 2, -(2 ** 63)];
    const run = openRun(root, "exp", "values");
    run.writeSeries(
      "odd",
      Float64Array.from(odd, (_, i) => i),
      Float64Array.from(odd, (_, i) => 1_700_000_000_000 + i),
      Float64Array.from(odd),
    );
    run.finish();
    const texts = [
      (await get(dashboard.url, { path: "/api/series?run=exp/values&key=odd" })).body,
      (
        await get(dashboard.url, {
          path: `/api/lines?run=exp/values&lines=${encodeURIComponent(JSON.stringify([["odd", null, null]]))}`,
        })
      ).body,
      (
        await get(dashboard.url, {
          path: `/api/lines?lines=${encodeURIComponent(JSON.stringify([["exp/values", "odd", null, null]]))}`,
        })
      ).body,
    ];
    for (const text of texts) {
      assert.match(
        text,
        /"values":\[0,"NaN","Infinity","-Infinity",1152921504606847000,9007199254740994,-9223372036854776000\]/,
      );
      const values = [...text.matchAll(/"values":\[([^\]]*)\]/g)].flatMap((m) => JSON.parse(`[${m[1]}]`) as unknown[]);
      assert.deepEqual(
        values.map((v) => (typeof v === "string" ? Number(v) : v)),
        odd.map((v) => (Object.is(v, -0) ? 0 : v)),
      );
    }
  });

  it("serves lines, keys and alerts of many runs in one request, each run's as asking for it alone gives", async () => {
    type Line = { steps: number[] } | { error: string; status: number };
    const one = async (run: string, line: unknown[]): Promise<Line> =>
      (
        await json<{ lines: Line[] }>(
          dashboard.url,
          `/api/lines?run=${encodeURIComponent(run)}&kind=scalar&maxPoints=500&lines=${encodeURIComponent(JSON.stringify([line]))}`,
        )
      ).lines[0] ?? { error: "none", status: 0 };
    const asked: [string, string, number | null, string | null][] = [
      ["exp/base", "loss", null, null],
      ["exp/big", "signal", null, null],
      ["exp/base", "loss", 1, "100"],
      ["exp/nope", "loss", null, null],
      ["escape/secret", "loss", null, null],
      ["exp/big", "nope", null, null],
    ];
    const { lines } = await json<{ lines: Line[] }>(
      dashboard.url,
      `/api/lines?kind=scalar&maxPoints=500&lines=${encodeURIComponent(JSON.stringify(asked))}`,
    );
    assert.equal(lines.length, asked.length);
    for (const [i, [run, ...line]] of asked.entries()) {
      if (i < 3) assert.deepEqual(lines[i], await one(run, line), `line ${i}`);
      else assert.ok(lines[i] !== undefined && "error" in lines[i], `line ${i} has an error, not data`);
    }
    assert.deepEqual(
      lines.slice(3).map((l) => ("status" in l ? l.status : 200)),
      [404, 404, 404],
    );
    // Nothing of the file outside the root is read: the symlinked run is refused before any read.
    assert.doesNotMatch(JSON.stringify(lines), /not yours/);

    const runs = ["exp/base", "exp/big", "exp/nope"];
    const keys = await json<{ runs: unknown[] }>(
      dashboard.url,
      `/api/keys?runs=${encodeURIComponent(JSON.stringify(runs))}`,
    );
    assert.deepEqual(keys.runs.slice(0, 2), [
      await json(dashboard.url, "/api/keys?run=exp/base"),
      await json(dashboard.url, "/api/keys?run=exp/big"),
    ]);
    assert.equal((keys.runs[2] as { status: number }).status, 404);
    const alerts = await json<{ runs: unknown[] }>(
      dashboard.url,
      `/api/alerts?runs=${encodeURIComponent(JSON.stringify(runs.slice(0, 2)))}`,
    );
    assert.deepEqual(alerts.runs, [
      await json(dashboard.url, "/api/alerts?run=exp/base"),
      await json(dashboard.url, "/api/alerts?run=exp/big"),
    ]);

    const refused: [string, RegExp][] = [
      ["/api/keys?runs=not-json", /runs is not JSON; runs must be a JSON array of 1 to 200 run ids/],
      ["/api/keys?runs=%5B%5D", /runs must be a JSON array of 1 to 200 run ids/],
      [`/api/alerts?runs=${encodeURIComponent(JSON.stringify([1]))}`, /runs must be a JSON array/],
      [
        `/api/keys?runs=${encodeURIComponent(JSON.stringify(Array.from({ length: 201 }, (_, i) => `exp/r${i}`)))}`,
        /too many runs in one request: 201, at most 200/,
      ],
      [
        `/api/lines?lines=${encodeURIComponent(JSON.stringify([["loss", null, null]]))}`,
        /each line starts with its run/,
      ],
      [
        `/api/lines?lines=${encodeURIComponent(JSON.stringify([["", "loss", null, null]]))}`,
        /a line's run is not a non-empty string/,
      ],
    ];
    for (const [path, message] of refused) {
      const answer = await get(dashboard.url, { path });
      assert.equal(answer.status, 400, path);
      assert.match(JSON.parse(answer.body).error, message, path);
    }
  });

  it("downsamples a 100k-point series to at most maxPoints, keeping the spike", async () => {
    const data = await json<{ steps: number[]; values: number[]; downsampled: boolean }>(
      dashboard.url,
      "/api/series?run=exp/big&key=signal&maxPoints=2000",
    );
    assert.equal(data.downsampled, true);
    assert.ok(data.values.length <= 2000 && data.values.length > 500, `${data.values.length} points`);
    assert.equal(Math.max(...data.values), 1000);
    assert.ok(data.steps.includes(54_321));
    assert.equal(data.steps.at(-1), 99_999);
  });

  it("serves streams per rank with a cursor, samples, config and traces", async () => {
    const stream = await json<{ ranks: number[]; values: number[]; cursor: string }>(
      dashboard.url,
      "/api/stream?run=exp/base&key=probe/grad_norm",
    );
    assert.equal(stream.values.length, 40);
    assert.deepEqual([...new Set(stream.ranks)].sort(), [0, 1]);
    const rest = await json<{ values: number[] }>(
      dashboard.url,
      `/api/stream?run=exp/base&key=probe/grad_norm&after=${encodeURIComponent(stream.cursor)}`,
    );
    assert.equal(rest.values.length, 0);
    // The store's HistogramEntry as it is (its histogram's non-finite numbers as proto3-JSON strings).
    const { histograms } = await json<{
      histograms: { step: number; rank: number; histogram: { bucketLimits: unknown[]; bucketCounts: number[] } }[];
    }>(dashboard.url, "/api/histograms?run=exp/base&key=grad/hist");
    assert.deepEqual(
      histograms.map((h) => h.step),
      [3, 10],
    );
    assert.deepEqual(histograms[1]?.histogram.bucketLimits, [-1, 0, 1, 2, "Infinity"]);
    assert.deepEqual(histograms[1]?.histogram.bucketCounts, [1, 13, 4, 1, 1]);
    // One line at a time (rank: the store's line, -1 the global one), and the lines there are.
    const global = await json<{ histograms: { step: number; rank: number }[]; ranks: number[] }>(
      dashboard.url,
      `/api/histograms?run=exp/base&key=grad/hist&rank=${GLOBAL_RANK}`,
    );
    assert.deepEqual(global.ranks, [GLOBAL_RANK]);
    assert.deepEqual(
      global.histograms.map((h) => [h.step, h.rank]),
      [
        [3, GLOBAL_RANK],
        [10, GLOBAL_RANK],
      ],
    );
    assert.deepEqual(
      (await json<{ histograms: unknown[] }>(dashboard.url, "/api/histograms?run=exp/base&key=grad/hist&rank=0"))
        .histograms,
      [],
    );
    const { samples } = await json<{ samples: { key: string; record: { prompt: string } }[] }>(
      dashboard.url,
      "/api/samples?run=exp/base",
    );
    assert.deepEqual(
      samples.map((s) => s.record.prompt),
      ["<script>alert(2)</script>", "plain"],
    );
    const config = await json<{ params: { lr: number }; configYaml: string; version: { git: { commit: string } } }>(
      dashboard.url,
      "/api/config?run=exp/base",
    );
    assert.equal(config.params.lr, 0.001);
    assert.match(config.configYaml, /layers: 4/);
    assert.equal(config.version.git.commit, "abc123");
    const { files } = await json<{ files: { name: string }[] }>(dashboard.url, "/api/traces?run=exp/base");
    assert.ok(files.some((f) => f.name === "rank-0.jsonl"));
    const download = await get(dashboard.url, { path: "/api/trace?run=exp/base&file=rank-0.jsonl" });
    assert.equal(download.status, 200);
    assert.match(String(download.headers["content-disposition"]), /attachment; filename="rank-0.jsonl"/);
    assert.match(download.body, /"ph":"X"/);
  });

  it("refuses run and file parameters that leave the root with a 4xx", async () => {
    const attempts = [
      "/api/keys?run=../etc",
      "/api/keys?run=exp/..",
      "/api/keys?run=%2e%2e/%2e%2e",
      "/api/keys?run=/etc/passwd",
      "/api/keys?run=exp/base/../../..",
      "/api/keys?run=escape/secret",
      "/api/config?run=..%2f..%2fetc",
      "/api/trace?run=exp/base&file=../metrics.db",
      "/api/trace?run=exp/base&file=..%2F..%2F..%2Fetc%2Fpasswd",
      "/api/trace?run=exp/base&file=leak.jsonl",
      "/api/trace?run=exp/base&file=%2Fetc%2Fpasswd",
      "/..%2f..%2fpackage.json",
      "/assets/..%2f..%2f..%2fpackage.json",
      "/%2e%2e/%2e%2e/package.json",
    ];
    for (const path of attempts) {
      const answer = await get(dashboard.url, { path });
      assert.ok(
        answer.status >= 400 && answer.status < 500,
        `${path} answered ${answer.status}: ${answer.body.slice(0, 200)}`,
      );
      assert.doesNotMatch(answer.body, /not yours|"name": "rankscope"|root:/, path);
    }
  });

  it("answers errors with a message saying what is valid", async () => {
    const missing = await get(dashboard.url, { path: "/api/series?run=exp/base" });
    assert.equal(missing.status, 400);
    assert.match(JSON.parse(missing.body).error, /missing the key parameter/);
    const badKey = await get(dashboard.url, { path: "/api/series?run=exp/base&key=nope" });
    assert.equal(badKey.status, 404);
    const badMax = await get(dashboard.url, { path: "/api/series?run=exp/base&key=loss&maxPoints=-4" });
    assert.equal(badMax.status, 400);
    assert.match(JSON.parse(badMax.body).error, /maxPoints must be an integer/);
    const tooMany = await get(dashboard.url, { path: "/api/series?run=exp/base&key=loss&maxPoints=5000" });
    assert.equal(tooMany.status, 400);
    assert.match(JSON.parse(tooMany.body).error, /maxPoints must be an integer from 3 to 2000, got "5000"/);
  });

  it("is read-only and sends a strict content security policy", async () => {
    const post = await get(dashboard.url, { path: "/api/runs", method: "POST" });
    assert.equal(post.status, 405);
    const ok = await get(dashboard.url, { path: "/api/runs" });
    assert.match(String(ok.headers["content-security-policy"]), /script-src 'self'/);
    assert.equal(ok.headers["x-content-type-options"], "nosniff");
  });

  it("on loopback, answers only requests addressed to a loopback host (DNS rebinding)", async () => {
    const rebound = await get(dashboard.url, { path: "/api/runs", headers: { Host: "attacker.example:7007" } });
    assert.equal(rebound.status, 403);
    const local = await get(dashboard.url, { path: "/api/runs", headers: { Host: `localhost:${dashboard.port}` } });
    assert.equal(local.status, 200);
  });

  it("off the default local bind, requires the token on every request (401 without it)", async () => {
    // 127.0.0.2 is still this machine, but it is not the default bind, so a token is required.
    const exposed = await startDashboard({ root, host: "127.0.0.2", port: 0 });
    try {
      assert.ok(exposed.token !== undefined && exposed.token.length >= 20);
      assert.ok(exposed.url.includes(`?token=${exposed.token}`));
      const base = `http://127.0.0.2:${exposed.port}/`;
      for (const path of [
        "/",
        "/api/runs",
        "/api/series?run=exp/base&key=loss",
        "/api/trace?run=exp/base&file=rank-0.jsonl",
      ]) {
        assert.equal((await get(base, { path })).status, 401, path);
        assert.equal(
          (await get(base, { path, headers: { Authorization: "Bearer wrong-token-000000000000" } })).status,
          401,
          path,
        );
      }
      assert.equal(
        (await get(base, { path: "/api/runs", headers: { Authorization: `Bearer ${exposed.token}` } })).status,
        200,
      );
      const withQuery = await get(base, { path: `/api/runs?token=${exposed.token}` });
      assert.equal(withQuery.status, 200);
      const cookie = String(withQuery.headers["set-cookie"]).split(";")[0] ?? "";
      assert.match(cookie, /^rankscope_token_\d+=/);
      assert.equal((await get(base, { path: "/api/runs", headers: { Cookie: cookie } })).status, 200);
    } finally {
      await exposed.close();
    }
    const given = await startDashboard({ root, host: "127.0.0.2", port: 0, token: "a-token-of-my-own" });
    try {
      assert.equal(given.token, "a-token-of-my-own");
      assert.equal(
        (await get(`http://127.0.0.2:${given.port}/`, { path: "/api/runs?token=a-token-of-my-own" })).status,
        200,
      );
    } finally {
      await given.close();
    }
  });

  it("refuses a root that is not a directory, with a message", async () => {
    await assert.rejects(startDashboard({ root: join(root, "nope"), port: 0 }), /is not a directory; pass --root DIR/);
  });
});
