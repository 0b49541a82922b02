/**
 * The text logs through the dashboard's API (`/api/logs`, `/api/log`; src/ui/log-reader.ts) over
 * a real 20 MB merged.log: every answer is one bounded window, paging back by byte offset (and
 * forward, as following does) returns every line exactly once with its UTF-8 intact, filters
 * keep a record's stack lines with it, a rotated file restarts from its tail, bad input is a 400
 * that says what is valid, nothing outside the root is listed or read, and off loopback the
 * token is required as for every other endpoint.
 */
import assert from "node:assert/strict";
import { appendFileSync, mkdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  LOG_DEFAULT_WINDOW,
  LOG_MAX_LINES,
  LOG_MAX_WINDOW,
  type LogLine,
  type LogWindow,
} from "../../src/ui/log-reader.js";
import { startDashboard, type Dashboard } from "../../src/ui/server.js";
import { tempDir } from "../helpers.js";
import { seedFinishedRun } from "./seed.js";

const RANKS = ["Controller", "Trainer_0_r0", "Trainer_0_r1"];
const COMPONENTS = ["Scheduler", "Trainer", "Rollout café"];

/** The i-th record of the seeded log: merged.log lines (with the rank prefix and colours), and what a reader must get back. */
function record(i: number): { lines: string[]; rank: string; component: string; level: string; messages: string[] } {
  const rank = RANKS[i % 3] ?? "";
  const component = COMPONENTS[i % 3] ?? "";
  const level = i % 97 === 96 ? "ERROR" : i % 13 === 12 ? "WARNING" : i % 5 === 4 ? "DEBUG" : "INFO";
  const message = `record ${i} 实验 ${"x".repeat(i % 40)} step=${i}`;
  const time = `20261122-01:${String(Math.floor(i / 60) % 60).padStart(2, "0")}:${String(i % 60).padStart(2, "0")}.${String(i % 1000).padStart(3, "0")}`;
  const text = `${time} ${component} ${level}: ${message}`;
  const prefix = `[${rank}]`.padEnd(16);
  const coloured = level === "ERROR" ? `\u001b[31m${text}` : level === "WARNING" ? `\u001b[33m${text}\u001b[0m` : text;
  const lines = [`${prefix} ${coloured}`];
  const messages = [message];
  if (level === "ERROR") {
    lines.push(`${prefix} Error: boom ${i}`, `${prefix}     at train (train.ts:${i}:7)\u001b[0m`);
    messages.push(`Error: boom ${i}`, `    at train (train.ts:${i}:7)`);
  }
  return { lines, rank, component, level: level.toLowerCase(), messages };
}

describe("text logs through the dashboard API", () => {
  let root: string;
  let outside: string;
  let dashboard: Dashboard;
  let logPath: string;
  let records = 0;
  const expected: { rank: string; component: string; level: string; message: string; continued: boolean }[] = [];

  const get = async (path: string): Promise<{ status: number; body: string }> => {
    const response = await fetch(new URL(path, dashboard.url));
    return { status: response.status, body: await response.text() };
  };
  const window = async (query: string): Promise<LogWindow & { bytes: number }> => {
    const answer = await get(`/api/log?run=exp/base&file=merged.log${query}`);
    assert.equal(answer.status, 200, answer.body);
    return { ...(JSON.parse(answer.body) as LogWindow), bytes: Buffer.byteLength(answer.body) };
  };

  before(async () => {
    root = tempDir("rankscope-ui-logs-");
    outside = tempDir("rankscope-ui-logs-outside-");
    const runDir = seedFinishedRun(root);
    mkdirSync(join(runDir, "logs"), { recursive: true });
    logPath = join(runDir, "logs", "merged.log");
    const chunk: string[] = [];
    let bytes = 0;
    while (bytes < 20 * 1024 * 1024) {
      const r = record(records++);
      for (const [j, message] of r.messages.entries())
        expected.push({ rank: r.rank, component: r.component, level: r.level, message, continued: j > 0 });
      const text = `${r.lines.join("\n")}\n`;
      chunk.push(text);
      bytes += Buffer.byteLength(text);
      if (chunk.length >= 10_000) appendFileSync(logPath, chunk.splice(0).join(""));
    }
    appendFileSync(logPath, chunk.join(""));
    writeFileSync(join(runDir, "logs", "main.log"), "20261122-01:00:00.000 Scheduler INFO: started\n");
    writeFileSync(join(outside, "secret.log"), "20261122-01:00:00.000 Secret INFO: do not show\n");
    symlinkSync(join(outside, "secret.log"), join(runDir, "logs", "linked.log"));
    // A run whose logs/ folder itself links out of the root.
    const linkedRun = seedFinishedRun(root, "exp", "logs-out");
    symlinkSync(outside, join(linkedRun, "logs"));
    dashboard = await startDashboard({ root, port: 0 });
  });

  after(async () => {
    await dashboard.close();
    rmSync(root, { recursive: true, force: true });
    rmSync(outside, { recursive: true, force: true });
  });

  const same = (lines: LogLine[], from: number): void => {
    lines.forEach((line, k) => {
      const want = expected[from + k];
      assert.deepEqual(
        {
          rank: line.rank,
          component: line.component,
          level: line.level,
          message: line.message,
          continued: line.continued,
        },
        want,
        `line ${from + k}`,
      );
    });
  };

  it("lists merged.log, then main.log; a file linking out of the root is not listed", async () => {
    const { files } = JSON.parse((await get("/api/logs?run=exp/base")).body) as {
      files: { name: string; size: number }[];
    };
    assert.deepEqual(
      files.map((f) => f.name),
      ["merged.log", "main.log"],
    );
    assert.equal(files[0]?.size, statSync(logPath).size);
    const linked = JSON.parse((await get("/api/logs?run=exp/logs-out")).body) as { files: unknown[] };
    assert.deepEqual(linked.files, []);
  });

  it("answers the tail as one bounded window of whole lines, parsed back into what was logged", async () => {
    const tail = await window("");
    const size = statSync(logPath).size;
    assert.equal(tail.size, size);
    assert.equal(tail.end, size);
    assert.ok(tail.end - tail.start <= LOG_DEFAULT_WINDOW, `${tail.end - tail.start} bytes read`);
    assert.ok(tail.bytes < 400_000, `the answer is ${tail.bytes} bytes`);
    same(tail.lines, expected.length - tail.lines.length);
    assert.ok(
      tail.lines.every((l) => !l.message.includes("\u001b")),
      "colour codes are removed",
    );
  });

  it("pages back by byte offset through the whole 20 MB file: every line once, in order, UTF-8 intact", async () => {
    const pages: LogLine[][] = [];
    let before = Number.MAX_SAFE_INTEGER;
    let reads = 0;
    for (;;) {
      const page = await window(
        `&maxBytes=${512 * 1024}&limit=${LOG_MAX_LINES}${before === Number.MAX_SAFE_INTEGER ? "" : `&before=${before}`}`,
      );
      assert.ok(page.end - page.start <= 512 * 1024);
      pages.unshift(page.lines);
      reads++;
      if (page.start === 0) break;
      assert.ok(page.start < before, "each page ends where the next begins");
      before = page.start;
      assert.ok(reads < 200, "paging ends");
    }
    const lines = pages.flat();
    assert.equal(lines.length, expected.length);
    same(lines, 0);
    assert.ok(lines.some((l) => l.component === "Rollout café" && l.message.includes("实验")));
  });

  it("reads forward from an end offset (what following does), and restarts from the tail when the file was rotated", async () => {
    const tail = await window("");
    const added = "[Trainer_0_r1]   20261122-02:00:00.000 Trainer INFO: appended\n";
    appendFileSync(logPath, added);
    const newer = await window(`&after=${tail.end}`);
    assert.deepEqual(
      newer.lines.map((l) => l.message),
      ["appended"],
    );
    assert.equal(newer.end, tail.end + Buffer.byteLength(added));
    const none = await window(`&after=${newer.end}`);
    assert.deepEqual(none.lines, []);
    assert.equal(none.reset, false);
    const rotated = await window(`&after=${newer.end + 10 ** 9}`);
    assert.equal(rotated.reset, true);
    assert.equal(rotated.end, newer.end);
    expected.push({ rank: "Trainer_0_r1", component: "Trainer", level: "info", message: "appended", continued: false });
  });

  it("filters by lowest level and by component on the server, keeping an error's stack lines with it", async () => {
    const errors = await window("&level=error");
    assert.ok(errors.lines.length > 0);
    assert.ok(errors.lines.every((l) => l.level === "error"));
    assert.ok(
      errors.lines.some((l) => l.continued && /at train \(train\.ts:\d+:7\)/.test(l.message)),
      "stack lines come with their error",
    );
    assert.ok(errors.end - errors.start <= 1024 * 1024, "a filtered read scans one bounded window too");
    const warnings = await window("&level=warning&component=Trainer&limit=50");
    assert.equal(warnings.lines.length, 50);
    assert.ok(warnings.lines.every((l) => (l.level === "warning" || l.level === "error") && l.component === "Trainer"));
    assert.ok(warnings.components.includes("Rollout café"), "the window's components are listed for the picker");
    // The last 50 of the window; the page before goes on from the first of them.
    const earlier = await window(`&level=warning&component=Trainer&limit=50&before=${warnings.start}`);
    assert.ok(
      earlier.lines.length > 0 &&
        (earlier.lines[earlier.lines.length - 1]?.offset ?? Infinity) < (warnings.lines[0]?.offset ?? 0),
    );
  });

  it("refuses bad input with a 400 saying what is valid, and files outside logs/ or the root", async () => {
    const cases: [string, number, RegExp][] = [
      ["&after=1&before=2", 400, /after .* or before .*, not both/],
      ["&level=loud", 400, /level must be one of trace, debug, info, warning, error, critical/],
      [`&maxBytes=${LOG_MAX_WINDOW + 1}`, 400, /maxBytes must be an integer from 1024 to 4194304/],
      ["&before=-1", 400, /before must be an integer/],
      ["&limit=0", 400, /limit must be an integer from 1/],
    ];
    for (const [query, status, message] of cases) {
      const answer = await get(`/api/log?run=exp/base&file=merged.log${query}`);
      assert.equal(answer.status, status, query);
      assert.match(answer.body, message);
    }
    for (const [file, status] of [
      ["..%2Fconfig.yaml", 400],
      ["linked.log", 404],
      ["nope.log", 404],
    ] as const) {
      const answer = await get(`/api/log?run=exp/base&file=${file}`);
      assert.equal(answer.status, status, file);
      assert.doesNotMatch(answer.body, /do not show|lr: 0\.001/);
    }
    assert.equal((await get("/api/log?run=exp/logs-out&file=secret.log")).status, 404);
  });

  it("asks for the token off loopback, as every endpoint does", async () => {
    const token = "s3cret-logs-token";
    const exposed = await startDashboard({ root, host: "127.0.0.2", port: 0, token });
    try {
      const base = `http://127.0.0.2:${exposed.port}`;
      assert.equal((await fetch(`${base}/api/log?run=exp/base&file=merged.log`)).status, 401);
      assert.equal((await fetch(`${base}/api/logs?run=exp/base`)).status, 401);
      const answer = await fetch(`${base}/api/log?run=exp/base&file=merged.log`, {
        headers: { Authorization: `Bearer ${token}` },
      });
      assert.equal(answer.status, 200);
    } finally {
      await exposed.close();
    }
  });
});
