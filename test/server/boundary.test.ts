/**
 * The team server's boundary as an attacker and a careless job meet it (issue 38): strings past
 * the limits leave only their own part out of a batch, named and counted on both sides; a
 * malformed query parameter is a 400 naming it, never a 500; tokens expire and rotate; failed
 * authentication is limited per address; the bytes being inflated are bounded across requests.
 * Each refusal is counted by reason (`rankscope_server_rejected_total`).
 */
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { get as httpGet } from "node:http";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { gzipSync } from "node:zlib";
import { DEFAULT_AUTH_FAILURES_PER_MINUTE } from "../../src/server/server.js";
import { createToken, listTokens } from "../../src/server/tokens.js";
import { RunSync } from "../../src/sync/run-sync.js";
import { WIRE_VERSION, encodeBatch, type Batch, type BatchHeader } from "../../src/sync/wire.js";
import { REPO_ROOT, tempDir, waitFor } from "../helpers.js";
import { freePort } from "../transport/support.js";
import { openRun } from "../ui/seed.js";
import { postgresForSuite, postgresMissing } from "./postgres.js";
import { assertRunEqual, serverWithTokens } from "./support.js";

const skip = postgresMissing() ?? false;

function batchOf(header: Partial<BatchHeader> & { run: string }, columns: Batch["columns"] = []): Buffer {
  return gzipSync(
    encodeBatch({ header: { v: WIRE_VERSION, series: [], records: [], files: [], ...header }, columns, fileBytes: [] }),
  );
}

async function call(
  url: string,
  path: string,
  token: string | undefined,
  init: { method?: string; body?: Buffer; headers?: Record<string, string> } = {},
): Promise<{ status: number; text: string; headers: Headers }> {
  const answer = await fetch(`${url}${path}`, {
    method: init.method ?? "GET",
    headers: {
      ...(token !== undefined ? { Authorization: `Bearer ${token}` } : {}),
      ...(init.body !== undefined ? { "Content-Encoding": "gzip" } : {}),
      ...init.headers,
    },
    ...(init.body !== undefined ? { body: new Uint8Array(init.body) } : {}),
  });
  return { status: answer.status, text: await answer.text(), headers: answer.headers };
}

/** The sum of a metric's samples whose line starts with `name` on `/metrics`. */
async function metric(url: string, name: string): Promise<number> {
  const text = (await call(url, "/metrics", undefined)).text;
  let total = 0;
  for (const line of text.split("\n"))
    if (line.startsWith(name)) total += Number(line.slice(line.lastIndexOf(" ") + 1));
  return total;
}

/** A run's scalar keys as the dashboard lists them. */
async function keysOf(url: string, token: string, run: string): Promise<string[]> {
  const answer = await call(url, `/api/keys?run=${encodeURIComponent(run)}`, token);
  assert.equal(answer.status, 200, answer.text);
  return (JSON.parse(answer.text) as { metrics: { key: string }[] }).metrics.map((k) => k.key);
}

const one = (x: number): Batch["columns"][number] => ({
  steps: Float64Array.of(x),
  walls: Float64Array.of(1),
  values: Float64Array.of(x),
});

describe("team server boundary", { skip }, () => {
  const postgres = postgresForSuite();

  it("a series with a key past the limits keeps only itself out: the rest of the run lands, the refused part named and counted on both sides", async () => {
    const { server, write, read } = await serverWithTokens(postgres.server);
    try {
      const long = "k".repeat(1_500);
      // The server's side: a batch of three series, the middle one's key too long.
      const answer = await call(server.url, "/api/ingest/v1/batch", write, {
        method: "POST",
        body: batchOf(
          {
            run: "exp/direct",
            series: [
              { kind: "scalar", key: "a", reduce: "mean", rank: -1, after: null, cursor: 0, n: 1 },
              { kind: "scalar", key: long, reduce: "mean", rank: -1, after: null, cursor: 1, n: 1 },
              { kind: "scalar", key: "b\u0000", reduce: "mean", rank: -1, after: null, cursor: 2, n: 1 },
              { kind: "scalar", key: "c", reduce: "mean", rank: -1, after: null, cursor: 3, n: 1 },
            ],
            meta: undefined,
          },
          [one(0), one(1), one(2), one(3)],
        ),
      });
      assert.equal(answer.status, 200, answer.text);
      const body = JSON.parse(answer.text) as { points: number; refused: { part: string; reason: string }[] };
      assert.equal(body.points, 2);
      assert.deepEqual(
        body.refused.map((r) => r.part),
        ["series[1]", "series[2]"],
      );
      assert.match(body.refused[0]?.reason ?? "", /series\[1\]\.key is longer than 1000 characters/);
      assert.match(body.refused[1]?.reason ?? "", /NUL/);
      assert.deepEqual(await keysOf(server.url, read, "exp/direct"), ["a", "c"]);
      assert.equal(await metric(server.url, 'rankscope_server_rejected_total{reason="string"}'), 2);

      // The job's side: a store holding such a key (written before the bound, or by another
      // writer), a tag and a hyperparameter past the limits; the sync sends the rest, names and counts them.
      const root = tempDir("rankscope-boundary-");
      const w = openRun(root, "exp", "job");
      w.write({
        scalars: [
          { key: "loss", step: 0, wall: 1, value: 1, reduce: "mean" },
          { key: long, step: 0, wall: 1, value: 2, reduce: "mean" },
          { key: "lr", step: 0, wall: 1, value: 3, reduce: "mean" },
        ],
        hyperparams: { lr: 0.1, bad: "x\u0000y" },
      });
      w.finish();
      const sync = new RunSync({ runDir: w.options.runDir, url: server.url, token: write });
      const result = await sync.pass(true);
      assert.equal(result.points, 2);
      assert.equal(sync.totals.refused, 2, sync.refusedParts.join("\n"));
      assert.match(sync.refusedParts.join("\n"), /scalar series "kkkk.*longer than 1000 characters/);
      assert.match(sync.refusedParts.join("\n"), /hyperparameter "bad".*NUL/);
      const runs = JSON.parse((await call(server.url, "/api/runs", read)).text) as { runs: { id: string }[] };
      assert.ok(runs.runs.some((r) => r.id === "exp/job"));
      assert.deepEqual(await keysOf(server.url, read, "exp/job"), ["loss", "lr"]);
      // A second pass neither resends nor counts the refused series again.
      await sync.pass(true);
      assert.equal(sync.totals.refused, 2);
    } finally {
      await server.close();
    }
  });

  it("a malformed query parameter is a 400 naming it, counted; no input makes a 500", async () => {
    // No rate limit in the way: every request reaches its route.
    const { server, write, read } = await serverWithTokens(postgres.server, { rateLimit: 1_000_000 });
    try {
      const root = tempDir("rankscope-boundary-q-");
      const w = openRun(root, "exp", "q");
      w.write({ scalars: [{ key: "loss", step: 0, wall: 1, value: 1, reduce: "mean" }], hyperparams: { lr: 0.1 } });
      w.finish();
      await new RunSync({ runDir: w.options.runDir, url: server.url, token: write }).pass(true);
      const nul = "a\u0000b";
      // The cases: a NUL in each parameter names that parameter.
      const named: [string, string, string][] = [
        ["/api/runs", "q", nul],
        ["/api/runs", "tag", nul],
        ["/api/runs", "group", nul],
        ["/api/runs", "param", `lr=${nul}`],
        ["/api/runs", "metric", `${nul}<1`],
        ["/api/runs", "sort", nul],
        ["/api/keys", "run", nul],
        ["/api/series", "key", nul],
        ["/api/series", "after", nul],
        ["/api/lines", "lines", JSON.stringify([[nul, null, null]])],
        ["/api/lines", "lines", JSON.stringify([["loss", null, nul]])],
        ["/api/lines", "lines", JSON.stringify([["loss", null, null, nul]])],
        ["/api/lines", "lines", '[["\\ud800", null, null]]'],
        ["/api/keys", "runs", JSON.stringify([nul])],
        ["/api/groups", "by", `param:${nul}`],
        ["/api/log", "file", nul],
        ["/api/log", "level", nul],
        ["/api/trace", "file", nul],
        ["/api/histograms", "key", nul],
      ];
      const rejectedBefore = await metric(server.url, 'rankscope_server_rejected_total{reason="malformed"}');
      for (const [path, name, value] of named) {
        const params = new URLSearchParams({ run: "exp/q", key: "loss", lines: "[]", [name]: value });
        if (path === "/api/lines" && name === "lines") params.delete("key");
        if (name === "runs") params.delete("run");
        const answer = await call(server.url, `${path}?${params}`, read);
        assert.equal(answer.status, 400, `${path} ${name}: ${answer.status} ${answer.text}`);
        assert.match(answer.text, new RegExp(`\\b${name}\\b`), `${path} ${name}: the answer names the parameter`);
      }
      assert.equal(
        await metric(server.url, 'rankscope_server_rejected_total{reason="malformed"}'),
        rejectedBefore + named.length,
      );
      // Any other odd value of any parameter of any endpoint: never a 500.
      const odd = [nul, "-1", "1e400", "[", '[["",null,null]]', "9".repeat(400), "../x", "😀"];
      const paths = [
        "/api/runs",
        "/api/keys",
        "/api/summary",
        "/api/series",
        "/api/lines",
        "/api/stream",
        "/api/system",
        "/api/histograms",
        "/api/samples",
        "/api/config",
        "/api/alerts",
        "/api/log",
        "/api/logs",
        "/api/traces",
        "/api/trace",
        "/api/ranks",
        "/api/groups",
      ];
      const names = [
        "run",
        "runs",
        "key",
        "keys",
        "rank",
        "after",
        "before",
        "maxPoints",
        "lines",
        "kind",
        "q",
        "tag",
        "group",
        "param",
        "metric",
        "sort",
        "order",
        "limit",
        "offset",
        "cursor",
        "by",
        "file",
        "level",
        "component",
        "flushes",
        "internal",
        "ids",
      ];
      for (const path of paths)
        for (const name of names)
          for (const value of odd) {
            const params = new URLSearchParams({ run: "exp/q", key: "loss" });
            params.set(name, value);
            const answer = await call(server.url, `${path}?${params}`, read);
            assert.ok(answer.status < 500, `${path}?${name}=${JSON.stringify(value)}: ${answer.status} ${answer.text}`);
          }
      assert.equal(await metric(server.url, "rankscope_server_errors_total"), 0);
    } finally {
      await server.close();
    }
  });

  it("tokens expire (401 after, counted, shown by token list) and rotate: the job's sync goes on with the old token in its grace, then the new one continues it", async () => {
    const { server, db, write } = await serverWithTokens(postgres.server);
    try {
      const soon = await createToken(server.pool, "proj", "read", "short", new Date(Date.now() + 1_500));
      assert.equal((await call(server.url, "/api/runs", soon)).status, 200, "valid before it expires");
      await waitFor(async () => (await call(server.url, "/api/runs", soon)).status === 401, {
        timeoutMs: 30_000,
        what: "the token to expire",
      });
      const expired = await call(server.url, "/api/runs", soon);
      assert.match(expired.text, /expired/);
      assert.ok((await metric(server.url, 'rankscope_server_rejected_total{reason="token_expired"}')) >= 2);
      assert.deepEqual(
        (await listTokens(server.pool, "proj")).map((t) => [t.label, t.state, t.expiresAt === null]),
        [
          [null, "valid", true],
          [null, "valid", true],
          ["short", "expired", false],
        ],
      );

      // The CLI: token create --expires 30d, shown by token list.
      const cli = (...args: string[]): string =>
        execFileSync(process.execPath, [join(REPO_ROOT, "dist/cli/main.js"), "server", "token", ...args], {
          env: { ...process.env, RANKSCOPE_DB_URL: db },
          encoding: "utf8",
        });
      const made = cli("create", "--project", "proj", "--scope", "write", "--label", "ci", "--expires", "30d").trim();
      assert.match(made, /^rsk_/);
      const listed = cli("list", "--project", "proj");
      const line = listed.split("\n").find((l) => l.endsWith("\tci")) ?? "";
      const until = Date.parse(line.split("\t")[5] ?? "");
      assert.ok(Math.abs(until - (Date.now() + 30 * 86_400_000)) < 3_600_000, line);
      assert.throws(() => cli("create", "--project", "proj", "--expires", "soon"), /30d, 12h/);

      // Rotation: a job syncing with the old token keeps going in the grace; the new one continues.
      const root = tempDir("rankscope-boundary-rotate-");
      const w = openRun(root, "exp", "rot");
      w.write({ scalars: [{ key: "loss", step: 0, wall: 1, value: 1, reduce: "mean" }] });
      const runDir = w.options.runDir;
      const job = new RunSync({ runDir, url: server.url, token: write });
      assert.equal((await job.pass(true)).points, 1);
      const next = cli("rotate", "--token", write, "--grace", "2s").trim();
      assert.match(next, /^rsk_/);
      w.write({ scalars: [{ key: "loss", step: 1, wall: 2, value: 2, reduce: "mean" }] });
      assert.equal((await job.pass(true)).points, 1, "the old token still syncs in its grace");
      await waitFor(async () => (await call(server.url, "/api/runs", write)).status === 401, {
        timeoutMs: 30_000,
        what: "the rotated token's grace to end",
      });
      w.write({ scalars: [{ key: "loss", step: 2, wall: 3, value: 3, reduce: "mean" }] });
      w.finish();
      const successor = new RunSync({ runDir, url: server.url, token: next });
      assert.equal((await successor.pass(true)).points, 1, "the new token continues where the old one stopped");
      await assertRunEqual(server, runDir);
      const rows = await listTokens(server.pool, "proj");
      assert.equal(rows.filter((t) => t.scope === "write" && t.state === "valid").length, 2, "ci and the successor");
    } finally {
      await server.close();
    }
  });

  it("limits failed authentication per address (429, counted) and refuses a token that cannot exist without asking the database", async () => {
    const { server, read } = await serverWithTokens(postgres.server);
    try {
      const lookups = (): Promise<number> => metric(server.url, "rankscope_server_token_lookups_total");
      assert.equal((await call(server.url, "/api/runs", read)).status, 200);
      const before = await lookups();
      // The attack: 900 requests from one address, each with a fresh bogus token.
      const statuses = new Map<number, number>();
      for (let i = 0; i < 900; i++) {
        const bogus = `rsk_${randomBytes(32).toString("base64url")}${randomBytes(6).toString("base64url")}`;
        const status = (await call(server.url, "/api/runs", bogus)).status;
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
      // The burst, and what the bucket refilled while the loop ran (a minute's worth at most).
      const failed = statuses.get(401) ?? 0;
      const limited = statuses.get(429) ?? 0;
      assert.equal(failed + limited, 900, JSON.stringify([...statuses]));
      assert.ok(
        failed >= DEFAULT_AUTH_FAILURES_PER_MINUTE && failed < 2 * DEFAULT_AUTH_FAILURES_PER_MINUTE,
        `${failed} × 401`,
      );
      assert.equal(await lookups(), before, "no bogus token reached the database");
      assert.equal(await metric(server.url, 'rankscope_server_rejected_total{reason="token_format"}'), failed);
      // Past the failures' bound (auth_rate), or the address's request rate (a bogus token has no bucket of its own).
      assert.equal(
        (await metric(server.url, 'rankscope_server_rejected_total{reason="auth_rate"}')) +
          (await metric(server.url, 'rankscope_server_rejected_total{reason="rate"}')),
        limited,
      );
      assert.ok((await metric(server.url, 'rankscope_server_rejected_total{reason="auth_rate"}')) > 0);
      // Held, whatever token it presents. A failure comes back every 2 s (30 a minute), and the
      // metric reads above can outlast that on a loaded machine: bogus tokens take back what came
      // back (until one gets 429), then the valid token must be refused too (a few tries, in case
      // one more came back between the two requests).
      let held = await call(server.url, "/api/runs", read);
      for (let attempt = 0; attempt < 5 && held.status !== 429; attempt++) {
        for (let i = 0; i < 40; i++) {
          const bogus = `rsk_${randomBytes(32).toString("base64url")}${randomBytes(6).toString("base64url")}`;
          if ((await call(server.url, "/api/runs", bogus)).status === 429) break;
        }
        held = await call(server.url, "/api/runs", read);
      }
      assert.equal(held.status, 429, "the address is held, whatever token it presents");
      assert.match(held.headers.get("retry-after") ?? "", /^\d+$/);
      // Another address is not held back.
      const other = await new Promise<number>((resolve, reject) => {
        const url = new URL(`${server.url}/api/runs`);
        httpGet(
          {
            host: url.hostname,
            port: url.port,
            path: url.pathname,
            localAddress: "127.0.0.2",
            headers: { Authorization: `Bearer ${read}` },
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        ).on("error", reject);
      });
      assert.equal(other, 200);
      // A token of the old format (no check digits) is looked up only while one such is valid: none here.
      const server2 = await serverWithTokens(postgres.server);
      try {
        const oldLookups = await metric(server2.server.url, "rankscope_server_token_lookups_total");
        for (let i = 0; i < 5; i++)
          assert.equal(
            (await call(server2.server.url, "/api/runs", `rsk_${randomBytes(32).toString("base64url")}`)).status,
            401,
          );
        assert.ok(
          (await metric(server2.server.url, "rankscope_server_token_lookups_total")) <= oldLookups + 1,
          "one query: is any token of the old format still valid?",
        );
      } finally {
        await server2.server.close();
      }
    } finally {
      await server.close();
    }
  });

  it("bounds the bytes inflated across requests: eight concurrent gzip bombs get 503 with Retry-After past the bound, counted, and the memory comes back", async () => {
    const db = await postgres.server.createDatabase("bombs");
    const env = { ...process.env, RANKSCOPE_DB_URL: db };
    const main = join(REPO_ROOT, "dist/cli/main.js");
    const write = execFileSync(
      process.execPath,
      [main, "server", "token", "create", "--project", "p", "--scope", "write"],
      {
        env,
        encoding: "utf8",
      },
    ).trim();
    const port = await freePort();
    const child = spawn(process.execPath, [main, "server", "--port", String(port)], { env, stdio: "ignore" });
    const url = `http://127.0.0.1:${port}`;
    /** The server's resident memory now, or at its peak, in MiB (Linux /proc). */
    const memory = (field: "VmRSS" | "VmHWM"): number => {
      const line = readFileSync(`/proc/${child.pid}/status`, "utf8")
        .split("\n")
        .find((l) => l.startsWith(`${field}:`));
      return Number(/(\d+) kB/.exec(line ?? "")?.[1] ?? NaN) / 1024;
    };
    try {
      await waitFor(async () => (await fetch(`${url}/healthz`).catch(() => null))?.status === 200, {
        timeoutMs: 60_000,
        what: "the server to answer",
      });
      const base = memory("VmRSS");
      // Each inflates to 120 MiB (under the 128 MiB a request may), about 120 KB gzipped.
      const raw = Buffer.alloc(120 * 1024 * 1024);
      raw.writeUInt32LE(0x31425352, 0);
      raw.writeUInt32LE(100 * 1024 * 1024, 4);
      const bomb = gzipSync(raw);
      const answers = await Promise.all(
        Array.from({ length: 8 }, () => call(url, "/api/ingest/v1/batch", write, { method: "POST", body: bomb })),
      );
      const busy = answers.filter((a) => a.status === 503);
      assert.ok(busy.length > 0, answers.map((a) => a.status).join(" "));
      for (const a of busy) {
        assert.match(a.text, /inflating 268435456 bytes of batches at once/);
        assert.match(a.headers.get("retry-after") ?? "", /^\d+$/);
      }
      assert.ok(
        answers.every((a) => a.status === 503 || a.status === 400),
        answers.map((a) => a.status).join(" "),
      );
      assert.equal(await metric(url, 'rankscope_server_rejected_total{reason="inflate_busy"}'), busy.length);
      assert.equal(await metric(url, "rankscope_server_inflating_bytes"), 0);
      // Eight requests of 120 MiB held at once took 1.3 GB; the bound keeps it to a fraction.
      assert.ok(memory("VmHWM") < base + 600, `peak ${memory("VmHWM")} MiB, ${base} MiB at rest`);
      await waitFor(() => memory("VmRSS") < base + 100, {
        timeoutMs: 30_000,
        what: `the memory to come back (${memory("VmRSS")} MiB now, ${base} MiB before)`,
      });
    } finally {
      child.kill("SIGKILL");
    }
  });
});
