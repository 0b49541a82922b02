/**
 * The team server over a real PostgreSQL, as a client and an attacker meet it: migrations safe
 * from two servers at once; tokens (none 401, another project's 403, a read token writing 403,
 * only a hash stored, the trusted-proxy header off by default); malformed, oversized and
 * injected batches refused or stored verbatim with nothing else changed, each refusal counted;
 * `/healthz`, `/readyz`, `/metrics`; no stack traces in answers; the runs list filtered and paged
 * on the server.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { get as httpsGet } from "node:https";
import { join } from "node:path";
import { describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import pg from "pg";
import { MIGRATIONS, migrate } from "../../src/server/schema.js";
import { startTeamServer } from "../../src/server/server.js";
import { createToken, tokenHash } from "../../src/server/tokens.js";
import { RunSync } from "../../src/sync/run-sync.js";
import { WIRE_VERSION, encodeBatch, type Batch, type BatchHeader, type TimingHeader } from "../../src/sync/wire.js";
import { REPO_ROOT, tempDir, waitFor, within } from "../helpers.js";
import { freePort } from "../transport/support.js";
import { openRun } from "../ui/seed.js";
import { postgresForSuite, postgresMissing } from "./postgres.js";
import { assertRunEqual, serverWithTokens } from "./support.js";

const skip = postgresMissing() ?? false;

/** A batch of one scalar series, gzipped. */
function batchOf(
  header: Partial<BatchHeader> & { run: string },
  columns: Batch["columns"] = [],
  fileBytes: Buffer[] = [],
): Buffer {
  return gzipSync(
    encodeBatch({ header: { v: WIRE_VERSION, series: [], records: [], files: [], ...header }, columns, fileBytes }),
  );
}

function scalarBatch(run: string, key: string, steps: number[]): Buffer {
  const s = Float64Array.from(steps);
  return batchOf(
    {
      run,
      series: [
        {
          kind: "scalar",
          key,
          reduce: "mean",
          rank: -1,
          after: null,
          cursor: steps[steps.length - 1] ?? 0,
          n: steps.length,
        },
      ],
    },
    [{ steps: s, walls: s.map((x) => 1_700_000_000_000 + x), values: s.map((x) => x / 10) }],
  );
}

/** Per-rank timings of one flush of two ranks, with `change` applied: what a sync sends (docs/stragglers.md). */
function timingsOf(change: Partial<TimingHeader>): TimingHeader {
  const report = {
    step: 0,
    ranks: 2,
    tracer: "train_step",
    medianStepMs: 50,
    skew: 1,
    medianWaitMs: 0,
    slowest: [],
    chronic: [],
  };
  return {
    ranks: [
      [0, "r0", "h"],
      [1, "r1", "h"],
    ],
    steps: [0],
    walls: [1_700_000_000_000],
    reports: [JSON.stringify(report)],
    stepMs: [50, 51],
    latenessMs: [0, 1],
    waitMs: [0, 0],
    ...change,
  };
}

async function post(
  url: string,
  token: string | undefined,
  body: Buffer | string,
  extra: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  const answer = await fetch(`${url}/api/ingest/v1/batch${extra["query"] ?? ""}`, {
    method: "POST",
    headers: {
      ...(token !== undefined ? { Authorization: `Bearer ${token}` } : {}),
      "Content-Encoding": extra["encoding"] ?? "gzip",
    },
    body: typeof body === "string" ? body : new Uint8Array(body),
  });
  return { status: answer.status, text: await answer.text() };
}

async function get(
  url: string,
  path: string,
  token?: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; headers: Headers }> {
  const answer = await fetch(`${url}${path}`, {
    headers: { ...(token !== undefined ? { Authorization: `Bearer ${token}` } : {}), ...headers },
  });
  return { status: answer.status, text: await answer.text(), headers: answer.headers };
}

async function metric(url: string, name: string): Promise<number> {
  const text = (await get(url, "/metrics")).text;
  let total = 0;
  for (const line of text.split("\n"))
    if (line.startsWith(name)) total += Number(line.slice(line.lastIndexOf(" ") + 1));
  return total;
}

async function counts(pool: pg.Pool): Promise<string> {
  const r = await pool.query(
    "SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM keys) AS keys, (SELECT count(*) FROM chunks) AS chunks, (SELECT count(*) FROM records) AS records, (SELECT count(*) FROM rank_timing) AS timings, (SELECT count(*) FROM rank_timing_lists) AS rank_lists, (SELECT count(*) FROM tokens) AS tokens, (SELECT count(*) FROM projects) AS projects",
  );
  return JSON.stringify(r.rows[0]);
}

describe("team server", { skip }, () => {
  const postgres = postgresForSuite();

  it("migrates once when two servers start on one database at the same time", async () => {
    const db = await postgres.server.createDatabase("two_servers");
    const [a, b] = await Promise.all([
      startTeamServer({ db, port: 0, log: false }),
      startTeamServer({ db, port: 0, log: false }),
    ]);
    try {
      const r = await a.pool.query<{ version: number }>("SELECT version FROM schema_migrations");
      assert.deepEqual(
        r.rows.map((x) => x.version),
        MIGRATIONS.map((m) => m.version),
      );
      assert.deepEqual(await migrate(b.pool), [], "nothing left to apply");
      // A database migrated by a newer server is refused, saying what to do.
      await a.pool.query("INSERT INTO schema_migrations (version, name) VALUES (999, 'from the future')");
      await assert.rejects(migrate(a.pool), /newer than this rankscope server's .* upgrade the server/);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("asks for a token: none 401, another project's 403, a read token writing 403; only hashes stored", async () => {
    const { server, write, read } = await serverWithTokens(postgres.server);
    try {
      const other = await createToken(server.pool, "other", "write");
      const stored = await server.pool.query<{ hash: Buffer }>("SELECT hash FROM tokens");
      assert.ok(stored.rows.some((r) => r.hash.equals(tokenHash(write))));
      assert.ok(!(await counts(server.pool)).includes(write.slice(4, 20)));
      const dump = await server.pool.query<{ t: string }>("SELECT row_to_json(t)::text AS t FROM tokens t");
      for (const row of dump.rows)
        for (const token of [write, read, other])
          assert.ok(!row.t.includes(token.slice(4)), "no token in the tokens table");

      const body = scalarBatch("exp/a", "loss", [0, 1, 2]);
      assert.equal((await post(server.url, undefined, body)).status, 401);
      assert.equal((await post(server.url, "rsk_not-a-real-token-at-all", body)).status, 401);
      assert.equal((await get(server.url, "/api/runs")).status, 401);
      const readWrites = await post(server.url, read, body);
      assert.equal(readWrites.status, 403);
      assert.match(readWrites.text, /read token .* needs a write token/);
      assert.equal((await post(server.url, write, body)).status, 200);
      // The other project's token neither sees this run nor may name this project.
      const theirs = JSON.parse((await get(server.url, "/api/runs", other)).text) as { runs: unknown[] };
      assert.deepEqual(theirs.runs, []);
      const runRefusals = 'rankscope_server_rejected_total{reason="run"}';
      assert.equal(await metric(server.url, runRefusals), 0);
      assert.equal((await get(server.url, "/api/keys?run=exp/a", other)).status, 404);
      assert.equal(await metric(server.url, runRefusals), 1);
      // Nor through the many-runs forms: each of this project's runs is a 404 to them, and the same
      // requests with this project's token give the run's answers.
      const many = `?runs=${encodeURIComponent(JSON.stringify(["exp/a"]))}`;
      const manyLines = `?kind=scalar&lines=${encodeURIComponent(JSON.stringify([["exp/a", "loss", null, null]]))}`;
      for (const path of [`/api/keys${many}`, `/api/alerts${many}`, `/api/lines${manyLines}`]) {
        const theirView = await get(server.url, path, other);
        assert.equal(theirView.status, 200, path);
        assert.doesNotMatch(theirView.text, /"steps"|"metrics"|"alerts"/, path);
        assert.match(theirView.text, /"status":404/, path);
        assert.doesNotMatch((await get(server.url, path, read)).text, /"status":404/, path);
      }
      // Each run refused inside a 200 answer is counted as the whole request refused above was.
      assert.equal(await metric(server.url, runRefusals), 4);
      const ours = JSON.parse((await get(server.url, `/api/lines${manyLines}`, read)).text) as {
        lines: { values: number[] }[];
      };
      assert.deepEqual(ours.lines[0]?.values, [0, 0.1, 0.2]);
      assert.equal((await get(server.url, "/api/runs?project=proj", other)).status, 403);
      assert.equal((await post(server.url, other, body, { query: "?project=proj" })).status, 403);
      const mine = JSON.parse((await get(server.url, "/api/runs", read)).text) as { runs: { id: string }[] };
      assert.deepEqual(
        mine.runs.map((r) => r.id),
        ["exp/a"],
      );
      // The dashboard: the page asks for the token, then keeps it in a cookie.
      const login = await get(server.url, "/");
      assert.equal(login.status, 401);
      assert.match(login.text, /<form method="get" action="\/">/);
      const opened = await fetch(`${server.url}/api/version?token=${encodeURIComponent(read)}`);
      const cookie = opened.headers.get("set-cookie") ?? "";
      assert.match(cookie, /rankscope_server_token=.*HttpOnly; SameSite=Strict/);
      assert.equal((await get(server.url, "/api/runs", undefined, { Cookie: cookie.split(";")[0] ?? "" })).status, 200);
      // The proxy header means nothing unless configured.
      assert.equal((await get(server.url, "/api/runs", undefined, { "X-Forwarded-User": "mallory" })).status, 401);
      assert.ok((await metric(server.url, 'rankscope_server_rejected_total{reason="auth"}')) >= 7);
    } finally {
      await server.close();
    }
  });

  it("trusts a reverse proxy's user header only when configured, for reading one project", async () => {
    const { server, write, db } = await serverWithTokens(postgres.server);
    const proxied = await startTeamServer({
      db,
      port: 0,
      log: false,
      proxy: { header: "x-forwarded-user", project: "proj" },
    });
    try {
      assert.equal((await post(server.url, write, scalarBatch("exp/p", "loss", [1]))).status, 200);
      const seen = await get(proxied.url, "/api/runs", undefined, { "X-Forwarded-User": "alice@example.org" });
      assert.equal(seen.status, 200);
      assert.equal((JSON.parse(seen.text) as { runs: unknown[] }).runs.length, 1);
      assert.equal((await post(proxied.url, undefined, scalarBatch("exp/p", "loss", [2]), {})).status, 401);
      assert.equal((await get(proxied.url, "/api/runs")).status, 401);
    } finally {
      await Promise.all([server.close(), proxied.close()]);
    }
  });

  it("refuses malformed and oversized batches with a 4xx saying why, stores nothing of them, counts each", async () => {
    const { server, write } = await serverWithTokens(postgres.server, {
      ingestLimits: { maxBodyBytes: 64 * 1024, maxBatchBytes: 256 * 1024 },
    });
    try {
      assert.equal((await post(server.url, write, scalarBatch("exp/ok", "loss", [0]))).status, 200);
      const before = await counts(server.pool);
      const good = encodeBatch({
        header: {
          v: WIRE_VERSION,
          run: "exp/x",
          series: [{ kind: "scalar", key: "k", reduce: null, rank: -1, after: null, cursor: 1, n: 2 }],
          records: [],
          files: [],
        },
        columns: [{ steps: Float64Array.of(0, 1), walls: Float64Array.of(1, 2), values: Float64Array.of(3, 4) }],
        fileBytes: [],
      });
      const cases: [string, Buffer | string, Record<string, string>, number, RegExp][] = [
        ["not gzip", "plain text", {}, 400, /not valid gzip/],
        ["not a batch", gzipSync("hello"), {}, 400, /does not start with RSB1/],
        [
          "header not JSON",
          gzipSync(Buffer.concat([good.subarray(0, 8), Buffer.from("{oops"), good.subarray(13)])),
          {},
          400,
          /header is not JSON/,
        ],
        ["truncated columns", gzipSync(good.subarray(0, good.length - 8)), {}, 400, /header announces/],
        ["wrong version", batchOf({ run: "exp/x", v: 7 }), {}, 400, /v must be 1/],
        ["bad run name", batchOf({ run: "../etc" }), {}, 400, /run must be experiment\/trial/],
        [
          "NaN step",
          batchOf(
            {
              run: "exp/x",
              series: [{ kind: "scalar", key: "k", reduce: null, rank: -1, after: null, cursor: 0, n: 1 }],
            },
            [{ steps: Float64Array.of(NaN), walls: Float64Array.of(1), values: Float64Array.of(1) }],
          ),
          {},
          400,
          /not a finite number/,
        ],
        [
          "steps out of order",
          batchOf(
            {
              run: "exp/x",
              series: [{ kind: "scalar", key: "k", reduce: null, rank: -1, after: null, cursor: 1, n: 2 }],
            },
            [{ steps: Float64Array.of(2, 1), walls: Float64Array.of(1, 2), values: Float64Array.of(1, 2) }],
          ),
          {},
          400,
          /increase strictly/,
        ],
        [
          "unknown kind",
          batchOf(
            {
              run: "exp/x",
              series: [{ kind: "evil" as "scalar", key: "k", reduce: null, rank: -1, after: null, cursor: 0, n: 1 }],
            },
            [{ steps: Float64Array.of(0), walls: Float64Array.of(1), values: Float64Array.of(1) }],
          ),
          {},
          400,
          /kind must be one of/,
        ],
        [
          "timings: a matrix short of ranks × flushes",
          batchOf({ run: "exp/x", timings: timingsOf({ stepMs: [1] }) }),
          {},
          400,
          /timings.stepMs holds 1 values; ranks × flushes is 2/,
        ],
        [
          "timings: a report that is not one",
          batchOf({ run: "exp/x", timings: timingsOf({ reports: ["[1, 2]"] }) }),
          {},
          400,
          /timings.reports\[0\] is not a straggler report/,
        ],
        [
          "timings: a rank named twice",
          batchOf({
            run: "exp/x",
            timings: timingsOf({
              ranks: [
                [0, "r0", "h"],
                [1, "r0", "h"],
              ],
            }),
          }),
          {},
          400,
          /names a rank twice/,
        ],
        [
          "timings: a value that is not a number",
          batchOf({ run: "exp/x", timings: timingsOf({ waitMs: ["1; DROP TABLE runs" as unknown as number, 2] }) }),
          {},
          400,
          /timings.waitMs\[0\] must be a finite number/,
        ],
        ["over the body limit", Buffer.alloc(100 * 1024, 1), {}, 413, /at most 65536/],
        ["a zip bomb", gzipSync(Buffer.alloc(10 * 1024 * 1024)), {}, 413, /inflates to more than/],
        ["another encoding", gzipSync("x"), { encoding: "br" }, 415, /gzip or identity/],
      ];
      for (const [what, body, extra, status, message] of cases) {
        const answer = await post(server.url, write, body, extra);
        assert.equal(answer.status, status, `${what}: ${answer.text}`);
        assert.match(answer.text, message, what);
        assert.doesNotMatch(answer.text, /at .*\.(ts|js):\d+/, `${what}: no stack trace`);
      }
      assert.equal(await counts(server.pool), before, "nothing of a refused batch is stored");
      assert.equal(await metric(server.url, 'rankscope_server_rejected_total{reason="malformed"}'), 13);
      assert.equal(await metric(server.url, 'rankscope_server_rejected_total{reason="size"}'), 3);
    } finally {
      await server.close();
    }
  });

  it("stores injection attempts in names, keys, params and filters as text, and nothing else changes", async () => {
    const { server, write, read } = await serverWithTokens(postgres.server);
    try {
      const evil = "x'); DROP TABLE runs; --";
      const root = tempDir("rankscope-server-evil-");
      const w = openRun(root, "exp'; DELETE FROM chunks; --", `trial" OR 1=1 --`);
      w.write({
        scalars: [
          { key: evil, step: 0, wall: 1, value: 1 },
          { key: "robert'); DROP TABLE keys;--", step: 0, wall: 1, value: 2 },
        ],
        hyperparams: { [evil]: evil, lr: 0.1 },
      });
      w.finish();
      const runDir = w.options.runDir;
      await new RunSync({ runDir, url: server.url, token: write }).pass(true);
      await assertRunEqual(server, runDir);
      const before = await counts(server.pool);
      for (const query of [
        `q=${encodeURIComponent("' OR '1'='1")}`,
        `tag=${encodeURIComponent("a'}; DROP TABLE runs; --")}`,
        `group=${encodeURIComponent("' OR 1=1 --")}`,
        `param=${encodeURIComponent(`${evil}=${evil}`)}`,
        `param=${encodeURIComponent("lr) OR (1=1>=0")}`,
        `sort=${encodeURIComponent("name; DROP TABLE runs")}`,
      ]) {
        const answer = await get(server.url, `/api/runs?${query}`, read);
        assert.ok(answer.status === 200 || answer.status === 400, `${query}: ${answer.status} ${answer.text}`);
        if (answer.status === 200 && !query.startsWith("param=x"))
          assert.deepEqual((JSON.parse(answer.text) as { runs: unknown[] }).runs, [], query);
      }
      // The hyperparameter named like an injection matches as plain text.
      const hit = JSON.parse(
        (await get(server.url, `/api/runs?param=${encodeURIComponent(`${evil}=${evil}`)}`, read)).text,
      ) as { runs: { id: string }[] };
      assert.deepEqual(
        hit.runs.map((r) => r.id),
        [`exp'; DELETE FROM chunks; --/trial" OR 1=1 --`],
      );
      assert.equal(await counts(server.pool), before);
      const tables = await server.pool.query(
        "SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public'",
      );
      assert.equal(tables.rows[0].n, 13, "the schema's tables (alerts and per-rank timings included), none dropped");
    } finally {
      await server.close();
    }
  });

  it("limits requests per client: past the burst a 429 with Retry-After, counted; another client is not held back", async () => {
    const { server, read, write } = await serverWithTokens(postgres.server, { rateLimit: 2 });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) statuses.push((await get(server.url, "/api/runs", read)).status);
      assert.deepEqual(statuses.slice(0, 4), [200, 200, 200, 200], "a burst of twice the rate");
      assert.ok(statuses.slice(4).includes(429), JSON.stringify(statuses));
      const limited = await get(server.url, "/api/runs", read);
      assert.equal(limited.status, 429);
      assert.match(limited.headers.get("retry-after") ?? "", /^\d+$/);
      assert.equal((await get(server.url, "/api/runs", write)).status, 200, "another token has its own bucket");
      assert.ok((await metric(server.url, 'rankscope_server_rejected_total{reason="rate"}')) >= 2);
    } finally {
      await server.close();
    }
  });

  it("answers /healthz, /readyz and /metrics, and filters and pages the runs list on the server", async () => {
    const { server, write, read } = await serverWithTokens(postgres.server);
    try {
      assert.equal((await get(server.url, "/healthz")).status, 200);
      assert.equal((await get(server.url, "/readyz")).status, 200);
      const root = tempDir("rankscope-server-runs-");
      for (const [trial, lr, tags] of [
        ["a", 0.1, ["base"]],
        ["b", 0.01, ["base", "sweep"]],
        ["c", 0.001, ["sweep"]],
      ] as const) {
        const w = openRun(root, "sweep", trial);
        w.write({ scalars: [{ key: "loss", step: 0, wall: 1, value: lr }], hyperparams: { lr, tags } });
        w.finish();
        const { writeFileSync } = await import("node:fs");
        writeFileSync(`${w.options.runDir}/run.json`, JSON.stringify({ tags, group: lr > 0.005 ? "big" : "small" }));
        await new RunSync({ runDir: w.options.runDir, url: server.url, token: write }).pass(true);
      }
      const runs = async (query: string): Promise<{ ids: string[]; total: number }> => {
        const page = JSON.parse((await get(server.url, `/api/runs?${query}`, read)).text) as {
          runs: { id: string }[];
          total: number;
        };
        return { ids: page.runs.map((r) => r.id).sort(), total: page.total };
      };
      assert.deepEqual(await runs("tag=sweep"), { ids: ["sweep/b", "sweep/c"], total: 2 });
      assert.deepEqual(await runs("group=big"), { ids: ["sweep/a", "sweep/b"], total: 2 });
      assert.deepEqual(await runs(`param=${encodeURIComponent("lr<0.05")}`), { ids: ["sweep/b", "sweep/c"], total: 2 });
      assert.deepEqual(await runs("q=SWEEP/C"), { ids: ["sweep/c"], total: 1 });
      assert.deepEqual(await runs("sort=name&limit=2&offset=1"), { ids: ["sweep/b", "sweep/c"], total: 3 });
      // The Ranks view of a run that traced nothing: there, and empty (a run with timings: test/sync/timings.test.ts).
      const ranksView = JSON.parse((await get(server.url, "/api/ranks?run=sweep/a", read)).text) as {
        available: boolean;
        rows: unknown[];
      };
      assert.deepEqual([ranksView.available, ranksView.rows], [true, []]);
      assert.equal((await get(server.url, "/api/ranks?run=sweep/zz", read)).status, 404);
      assert.equal((await get(server.url, "/api/runs?param=lr~1", read)).status, 400);
      assert.equal((await get(server.url, "/api/runs?limit=5000", read)).status, 400);
      const text = (await get(server.url, "/metrics")).text;
      assert.match(text, /rankscope_server_ingest_points_total 3/);
      assert.match(text, /rankscope_server_db_pool_connections\{pool="read",state="total"\}/);
      assert.match(text, /rankscope_server_sync_lag_seconds_count [1-9]/);
    } finally {
      await server.close();
    }
  });

  it("serves HTTPS with --tls-cert/--tls-key and stops cleanly on SIGTERM (exit 0), logging without secrets", async () => {
    const db = await postgres.server.createDatabase("tls");
    const dir = tempDir("rankscope-server-tls-");
    const cert = join(dir, "cert.pem");
    const key = join(dir, "key.pem");
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        key,
        "-out",
        cert,
        "-days",
        "1",
        "-subj",
        "/CN=127.0.0.1",
      ],
      { stdio: "ignore" },
    );
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [join(REPO_ROOT, "dist/cli/main.js"), "server", "--port", String(port), "--tls-cert", cert, "--tls-key", key],
      {
        env: { ...process.env, RANKSCOPE_DB_URL: db },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let out = "";
    child.stdout?.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr?.on("data", (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    const healthz = (): Promise<number> =>
      new Promise((resolve) => {
        const req = httpsGet({ host: "127.0.0.1", port, path: "/healthz", rejectUnauthorized: false }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on("error", () => resolve(0));
      });
    try {
      await waitFor(async () => (await healthz()) === 200, {
        timeoutMs: 60_000,
        what: `the HTTPS server to answer (${out.slice(-300)})`,
      });
      assert.equal(
        (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => null))?.status,
        undefined,
        "no plain HTTP on the TLS port",
      );
      child.kill("SIGTERM");
      assert.equal(await within(exited, { timeoutMs: 30_000, what: "the server to stop on SIGTERM" }), 0);
      assert.match(out, /"msg":"stopped"/);
      assert.doesNotMatch(
        out,
        new RegExp(db.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")),
        "the database URL is never logged",
      );
    } finally {
      child.kill("SIGKILL");
    }
  });
});
