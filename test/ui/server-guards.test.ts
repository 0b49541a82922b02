/**
 * The dashboard server's guards over real run directories and real store files: hostile but valid
 * run names, symlinks that point out of the root, a broken link, a damaged metrics.db, the token
 * kept out of logs, the caps on one request, and gzip.
 */
import assert from "node:assert/strict";
import { mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { gunzipSync } from "node:zlib";
import { resolveRunLocation } from "../../src/run/run-dir.js";
import { startDashboard, type Dashboard } from "../../src/ui/server.js";
import { MAX_BATCH_LINES, MAX_BATCH_POINTS } from "../../src/ui/params.js";
import { redactedRequestPath } from "../../src/ui/http.js";
import { createStoreSource } from "../../src/ui/store-source.js";
import { collectDiagnostics, tempDir } from "../helpers.js";
import { openRun, seedFinishedRun } from "./seed.js";

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  text: string;
}

/** A raw HTTP request; the body is kept as bytes (it may be gzipped). */
function get(base: string, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, method: "GET", headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const body = Buffer.concat(chunks);
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text: body.toString("utf8") });
      });
    });
    req.on("error", reject);
    req.end();
  });
}

async function json<T>(base: string, path: string): Promise<T> {
  const answer = await get(base, path);
  assert.equal(answer.status, 200, `${path}: ${answer.text}`);
  return JSON.parse(answer.text) as T;
}

/** The names W&B and AReaL users give runs, each one folder. */
const HOSTILE_NAMES = [
  "café",
  "lr=3e-4,bs=256",
  "2026-11-24T00:45:00",
  "ablation (v2)",
  "run+1",
  "实验1",
  "tri\u202Eal",
];

const SECRET = "root:x:0:0:the-outside-secret";

describe("dashboard server guards", () => {
  let root: string;
  let outside: string;
  let dashboard: Dashboard;

  before(async () => {
    root = tempDir("rankscope-ui-guards-");
    outside = tempDir("rankscope-ui-outside-");
    seedFinishedRun(root);
    for (const trial of HOSTILE_NAMES) {
      const w = openRun(root, "hostile", trial);
      w.write({ scalars: [0, 1, 2].map((step) => ({ key: "loss", step, wall: 1000 + step, value: step + 1 })) });
      w.finish();
    }
    // Outside the root: a "passwd", a config, a version file, and a real store.
    mkdirSync(join(outside, "etc"), { recursive: true });
    writeFileSync(join(outside, "etc", "passwd"), `${SECRET}\n`);
    writeFileSync(join(outside, "config.yaml"), `secret: ${SECRET}\n`);
    writeFileSync(join(outside, "version.json"), JSON.stringify({ secret: SECRET }));
    const foreign = openRun(outside, "far", "away");
    foreign.write({ scalars: [{ key: "stolen", step: 0, wall: 1, value: 42 }] });
    foreign.finish();
    // Runs inside the root whose files link out.
    const linked = join(root, "links", "traces-etc");
    mkdirSync(linked, { recursive: true });
    seedFinishedRun(root, "links", "files-out");
    rmSync(join(root, "links", "files-out", "config.yaml"));
    rmSync(join(root, "links", "files-out", "version.json"));
    symlinkSync(join(outside, "config.yaml"), join(root, "links", "files-out", "config.yaml"));
    symlinkSync(join(outside, "version.json"), join(root, "links", "files-out", "version.json"));
    seedFinishedRun(root, "links", "traces-etc");
    rmSync(join(linked, "traces"), { recursive: true });
    symlinkSync(join(outside, "etc"), join(linked, "traces"));
    mkdirSync(join(root, "links", "db-out"), { recursive: true });
    symlinkSync(join(outside, "far", "away", "metrics.db"), join(root, "links", "db-out", "metrics.db"));
    // A broken link beside a good trace file.
    symlinkSync(join(outside, "gone.jsonl"), join(root, "exp", "base", "traces", "broken.jsonl"));
    // A damaged store.
    mkdirSync(join(root, "exp", "damaged"), { recursive: true });
    writeFileSync(join(root, "exp", "damaged", "metrics.db"), Buffer.alloc(8192, 0x5a));
    dashboard = await startDashboard({ root, port: 0 });
  });

  after(async () => {
    await dashboard.close();
    rmSync(root, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  });

  it("accepts any one-folder name from the API, and refuses paths with a message", () => {
    for (const trial of HOSTILE_NAMES)
      assert.equal(resolveRunLocation({ root, experiment: "hostile", trial }, {}).trial, trial);
    for (const bad of ["a/b", "..", ".", "", "x\u0000y", "a\\b", "line\nbreak"]) {
      assert.throws(
        () => resolveRunLocation({ root, experiment: "e", trial: bad }, {}),
        /trial .* must be one folder name/,
        JSON.stringify(bad),
      );
    }
  });

  it("lists and opens runs with hostile names (the run parameter URL-encoded as UTF-8)", async () => {
    const { runs } = await json<{ runs: { id: string; trial: string }[] }>(dashboard.url, "/api/runs");
    for (const trial of HOSTILE_NAMES) {
      const id = `hostile/${trial}`;
      assert.ok(
        runs.some((r) => r.id === id && r.trial === trial),
        `${id} not listed: ${JSON.stringify(runs.map((r) => r.id))}`,
      );
      const run = encodeURIComponent(id);
      const keys = await json<{ metrics: { key: string }[] }>(dashboard.url, `/api/keys?run=${run}`);
      assert.deepEqual(
        keys.metrics.map((k) => k.key),
        ["loss"],
        id,
      );
      const series = await json<{ values: number[] }>(dashboard.url, `/api/series?run=${run}&key=loss`);
      assert.deepEqual(series.values, [1, 2, 3], id);
    }
    // A trace file with such a name downloads, its name in the header as RFC 5987 UTF-8.
    const traces = join(root, "hostile", "实验1", "traces");
    mkdirSync(traces, { recursive: true });
    writeFileSync(join(traces, "rank 0 (é).jsonl"), "[\n");
    const { files } = await json<{ files: { name: string }[] }>(
      dashboard.url,
      `/api/traces?run=${encodeURIComponent("hostile/实验1")}`,
    );
    assert.deepEqual(
      files.map((f) => f.name),
      ["rank 0 (é).jsonl"],
    );
    const download = await get(
      dashboard.url,
      `/api/trace?run=${encodeURIComponent("hostile/实验1")}&file=${encodeURIComponent("rank 0 (é).jsonl")}`,
    );
    assert.equal(download.status, 200, download.text);
    assert.equal(download.text, "[\n");
    assert.equal(
      download.headers["content-disposition"],
      `attachment; filename="rank 0 (_).jsonl"; filename*=UTF-8''rank%200%20%28%C3%A9%29.jsonl`,
    );
    // Still refused: anything that is not one to three folder names, and a NUL in any parameter
    // (checked before the route, as on the team server), each with why.
    const refused: Array<[string, RegExp]> = [
      ["hostile/..", /one to three folder names/],
      ["../hostile", /one to three folder names/],
      ["hostile%5Ccaf%C3%A9", /one to three folder names/],
      ["a/b/c/d", /one to three folder names/],
      ["hostile/caf%C3%A9%00", /the parameter "run" holds a NUL character/],
    ];
    for (const [run, why] of refused) {
      const answer = await get(dashboard.url, `/api/keys?run=${run}`);
      assert.equal(answer.status, 400, `${run}: ${answer.text}`);
      assert.match(JSON.parse(answer.text).error, why);
    }
  });

  it("never serves a file that resolves outside the root", async () => {
    // traces/ -> an outside folder: nothing listed, nothing downloadable.
    const { files } = await json<{ files: unknown[] }>(dashboard.url, "/api/traces?run=links/traces-etc");
    assert.deepEqual(files, []);
    const passwd = await get(dashboard.url, "/api/trace?run=links/traces-etc&file=passwd");
    assert.equal(passwd.status, 404, passwd.text);
    assert.doesNotMatch(passwd.text, /outside-secret/);
    // config.yaml and version.json linked out: not shown.
    const config = await json<{ configYaml: string | null; version: unknown }>(
      dashboard.url,
      "/api/config?run=links/files-out",
    );
    assert.equal(config.configYaml, null);
    assert.equal(config.version, null);
    // metrics.db linked out: not listed, not opened.
    const { runs } = await json<{ runs: { id: string }[] }>(dashboard.url, "/api/runs");
    assert.ok(!runs.some((r) => r.id === "links/db-out"), JSON.stringify(runs.map((r) => r.id)));
    for (const path of [
      "/api/keys?run=links/db-out",
      "/api/series?run=links/db-out&key=stolen",
      "/api/summary?run=links/db-out",
    ]) {
      const answer = await get(dashboard.url, path);
      assert.equal(answer.status, 403, `${path}: ${answer.text}`);
      assert.match(JSON.parse(answer.text).error, /metrics\.db resolves \(through a symlink\) outside the runs root/);
      assert.doesNotMatch(answer.text, /stolen|42/);
    }
  });

  it("skips a broken symlink in traces/ and lists the other files", async () => {
    const { files } = await json<{ files: { name: string }[] }>(dashboard.url, "/api/traces?run=exp/base");
    assert.deepEqual(
      files.map((f) => f.name),
      ["rank-0.jsonl"],
    );
    assert.equal((await get(dashboard.url, "/api/trace?run=exp/base&file=broken.jsonl")).status, 404);
  });

  it("answers a damaged metrics.db with which run and what is wrong, not a bare 500", async () => {
    const { runs } = await json<{ runs: { id: string; status: string; error?: string }[] }>(dashboard.url, "/api/runs");
    const damaged = runs.find((r) => r.id === "exp/damaged");
    assert.ok(damaged !== undefined);
    assert.equal(damaged.status, "unknown");
    assert.match(damaged.error ?? "", /metrics\.db is not a SQLite database/);
    const answer = await get(dashboard.url, "/api/keys?run=exp/damaged");
    assert.equal(answer.status, 500);
    assert.match(JSON.parse(answer.text).error, /^run "exp\/damaged": metrics\.db is not a SQLite database/);
  });

  it("logs a failed request's path without the token", async () => {
    const source = createStoreSource(root);
    source.listRuns = () => {
      throw new Error("disk on fire");
    };
    const exposed = await startDashboard({ root, host: "127.0.0.2", port: 0, token: "s3cret-token-value", source });
    try {
      const seen = await collectDiagnostics(async () => {
        const answer = await get(`http://127.0.0.2:${exposed.port}/`, "/api/runs?token=s3cret-token-value&x=1");
        assert.equal(answer.status, 500);
        assert.doesNotMatch(answer.text, /disk on fire/);
      });
      const logged = seen.filter((d) => d.code === "ui.request").map((d) => d.message);
      assert.equal(logged.length, 1, JSON.stringify(seen));
      assert.match(logged[0] ?? "", /\/api\/runs\?token=\[redacted\]&x=1 failed: .*disk on fire/);
      assert.doesNotMatch(logged[0] ?? "", /s3cret/);
    } finally {
      await exposed.close();
    }
    assert.equal(
      redactedRequestPath("/a?x=1&TOKEN=abc&%74oken=def#frag"),
      "/a?x=1&TOKEN=[redacted]&%74oken=[redacted]",
    );
  });

  it("caps lines and points per request with a 400 saying what is allowed", async () => {
    const line = ["signal", null, null];
    const tooMany = JSON.stringify(Array.from({ length: MAX_BATCH_LINES + 1 }, () => line));
    const a = await get(dashboard.url, `/api/lines?run=exp/base&maxPoints=10&lines=${encodeURIComponent(tooMany)}`);
    assert.equal(a.status, 400);
    assert.match(
      JSON.parse(a.text).error,
      new RegExp(`too many lines in one request: ${MAX_BATCH_LINES + 1}, at most ${MAX_BATCH_LINES}`),
    );
    const heavy = JSON.stringify(Array.from({ length: MAX_BATCH_LINES }, () => ["loss", null, null]));
    const b = await get(dashboard.url, `/api/lines?run=exp/base&maxPoints=2000&lines=${encodeURIComponent(heavy)}`);
    assert.equal(b.status, 400);
    assert.match(
      JSON.parse(b.text).error,
      new RegExp(`more than the ${MAX_BATCH_POINTS.toLocaleString("en-US")} one request may return`),
    );
    // At the caps: answered in full.
    const atCap = JSON.stringify(Array.from({ length: MAX_BATCH_POINTS / 2000 }, () => ["loss", null, null]));
    const { lines } = await json<{ lines: { steps: number[] }[] }>(
      dashboard.url,
      `/api/lines?run=exp/base&maxPoints=2000&lines=${encodeURIComponent(atCap)}`,
    );
    assert.equal(lines.length, MAX_BATCH_POINTS / 2000);
    assert.ok(lines.every((l) => l.steps.length === 120));
  });

  it("gzips JSON and the app's files when the client accepts it; the bytes decompress to the plain answer", async () => {
    const path = "/api/series?run=exp/base&key=loss";
    const plain = await get(dashboard.url, path);
    assert.equal(plain.headers["content-encoding"], undefined);
    const zipped = await get(dashboard.url, path, { "Accept-Encoding": "gzip, deflate, br" });
    assert.equal(zipped.headers["content-encoding"], "gzip");
    assert.equal(zipped.headers["vary"], "Accept-Encoding");
    assert.equal(Number(zipped.headers["content-length"]), zipped.body.length);
    assert.ok(zipped.body.length < plain.body.length / 2, `${zipped.body.length} vs ${plain.body.length} bytes`);
    assert.equal(gunzipSync(zipped.body).toString("utf8"), plain.text);
    // A trace download is streamed through gzip.
    const trace = await get(dashboard.url, "/api/trace?run=exp/base&file=rank-0.jsonl", { "Accept-Encoding": "gzip" });
    assert.equal(trace.headers["content-encoding"], "gzip");
    assert.match(gunzipSync(trace.body).toString("utf8"), /"ph":"X"/);
    // gzip;q=0 is a refusal.
    assert.equal(
      (await get(dashboard.url, path, { "Accept-Encoding": "gzip;q=0" })).headers["content-encoding"],
      undefined,
    );
    // Static files, from a web folder of our own.
    const web = tempDir("rankscope-ui-web-");
    const script = `console.log(${JSON.stringify("x".repeat(50))});\n`.repeat(100);
    mkdirSync(join(web, "assets"));
    writeFileSync(join(web, "index.html"), "<!doctype html><title>t</title>");
    writeFileSync(join(web, "assets", "app-1234.js"), script);
    const app = await startDashboard({ root, port: 0, webDir: web });
    try {
      const js = await get(app.url, "/assets/app-1234.js", { "Accept-Encoding": "gzip" });
      assert.equal(js.status, 200);
      assert.equal(js.headers["content-encoding"], "gzip");
      assert.equal(gunzipSync(js.body).toString("utf8"), script);
      const page = await get(app.url, "/", { "Accept-Encoding": "gzip" });
      assert.equal(page.headers["content-encoding"], undefined, "a tiny page goes as it is");
      assert.equal(page.text, "<!doctype html><title>t</title>");
    } finally {
      await app.close();
      rmSync(web, { recursive: true, force: true });
    }
  });
});
