/**
 * Alert events on the team server (docs/alerts.md, docs/server.md) over a real PostgreSQL: a run's
 * events arrive by its sync equal to the store's, through both `DashboardSource`s and over HTTP
 * (`/api/alerts` with a read token, as the banner polls); an event sent twice is kept once; a
 * database migrated before alerts existed gains the table and takes them; and forged alert
 * events — a wrong level, missing fields, NUL, oversized, a bad sequence number — are refused
 * with a 400 saying why, counted, and store nothing.
 */
import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import { describe, it } from "node:test";
import type pg from "pg";
import { createPool } from "../../src/server/db.js";
import { MIGRATIONS, migrate } from "../../src/server/schema.js";
import { startTeamServer } from "../../src/server/server.js";
import { createToken } from "../../src/server/tokens.js";
import { RunSync } from "../../src/sync/run-sync.js";
import { WIRE_VERSION, type AlertHeader } from "../../src/sync/wire.js";
import { jsonText } from "../../src/core/json.js";
import { tempDir } from "../helpers.js";
import { openRun, seedAlerts } from "../ui/seed.js";
import { postgresForSuite, postgresMissing } from "./postgres.js";
import { assertRunEqual, serverWithTokens } from "./support.js";

const skip = postgresMissing() ?? false;

async function alertRows(pool: pg.Pool): Promise<number> {
  const r = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM alerts");
  return r.rows[0]?.n ?? -1;
}

async function rejected(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith('rankscope_server_rejected_total{reason="malformed"}'));
  return Number(line?.slice(line.lastIndexOf(" ") + 1) ?? 0);
}

/** A batch without columns, its header built by hand: what an attacker with a write token could send, past the sync's own checks. */
function alertBatch(run: string, alerts: unknown): Buffer {
  const header = Buffer.from(
    JSON.stringify({ v: WIRE_VERSION, run, series: [], records: [], files: [], alerts }),
    "utf8",
  );
  const head = Buffer.alloc(8);
  head.writeUInt32LE(0x31425352, 0); // "RSB1"
  head.writeUInt32LE(header.length, 4);
  return gzipSync(Buffer.concat([head, header, Buffer.alloc((8 - ((8 + header.length) % 8)) % 8)]));
}

async function post(url: string, token: string, body: Buffer): Promise<{ status: number; text: string }> {
  const answer = await fetch(`${url}/api/ingest/v1/batch`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Encoding": "gzip" },
    body: new Uint8Array(body),
  });
  return { status: answer.status, text: await answer.text() };
}

/** A run of the controller's store with the seeded alert events and a scalar; its run directory. */
function runWithAlerts(root: string, trial: string): string {
  const w = openRun(root, "exp", trial);
  w.write({
    scalars: [0, 1, 2].map((step) => ({ key: "loss", step, wall: 1000 + step, value: step })),
    alerts: seedAlerts(`exp/${trial}`, 1_700_000_000_000),
  });
  w.finish("finished");
  return w.options.runDir;
}

describe("alerts on the team server", { skip }, () => {
  const postgres = postgresForSuite();

  it("a run's alert events arrive by its sync equal to the store's, through both sources and /api/alerts; sent twice, kept once", async () => {
    const { server, write, read } = await serverWithTokens(postgres.server);
    try {
      const runDir = runWithAlerts(tempDir("rankscope-server-alerts-"), "a");
      const first = await new RunSync({ runDir, url: server.url, token: write }).pass(true);
      assert.equal(first.records, 4, "the four events are records of the pass");
      await assertRunEqual(server, runDir);
      // The web app's request, with a read token: NaN survives, the HTML is text.
      const answer = await fetch(`${server.url}/api/alerts?run=${encodeURIComponent("exp/a")}`, {
        headers: { Authorization: `Bearer ${read}` },
      });
      assert.equal(answer.status, 200);
      const body = (await answer.json()) as { alerts: Record<string, unknown>[] };
      assert.deepEqual(
        body.alerts.map((a) => [a["seq"], a["id"], a["state"], a["value"] ?? null]),
        [
          [1, "nonfinite:loss#1", "firing", "NaN"],
          [2, "rank_lost:Trainer_0_r1#2", "firing", null],
          [3, "nonfinite:loss#1", "resolved", 0.5],
          [4, "user#3", "firing", null],
        ],
      );
      assert.equal(body.alerts[3]?.["title"], "<b>eval</b>");
      // A batch of the same events again (a retry after a lost answer) changes nothing.
      const again = alertBatch(
        "exp/a",
        seedAlerts("exp/a", 1_700_000_000_000).map((e, i): AlertHeader => ({ seq: i + 1, event: jsonText(e) })),
      );
      assert.equal((await post(server.url, write, again)).status, 200);
      assert.equal(await alertRows(server.pool), 4);
      assert.deepEqual(await new RunSync({ runDir, url: server.url, token: write }).pass(true), {
        batches: 0,
        points: 0,
        records: 0,
        fileBytes: 0,
        complete: true,
      });
      await assertRunEqual(server, runDir);
    } finally {
      await server.close();
    }
  });

  it("a database migrated before alerts existed gains the table at the next start, its runs show none, and a sync then sends them", async () => {
    const db = await postgres.server.createDatabase(`before_alerts_${process.pid}`);
    const old = createPool({ url: db, max: 2, statementTimeoutMs: 30_000 });
    try {
      assert.deepEqual(
        await migrate(
          old,
          MIGRATIONS.filter((m) => m.version <= 2),
        ),
        [1, 2],
      );
      const table = await old.query("SELECT to_regclass('alerts') AS t");
      assert.equal(table.rows[0]?.t, null, "version 2 has no alerts table");
    } finally {
      await old.end();
    }
    const server = await startTeamServer({ db, port: 0, log: false });
    try {
      const versions = await server.pool.query<{ version: number }>(
        "SELECT version FROM schema_migrations ORDER BY version",
      );
      assert.deepEqual(
        versions.rows.map((r) => r.version),
        MIGRATIONS.map((m) => m.version),
        "every migration applied, alerts (3) among them",
      );
      const write = await createToken(server.pool, "proj", "write");
      const runDir = runWithAlerts(tempDir("rankscope-server-alerts-old-"), "b");
      await new RunSync({ runDir, url: server.url, token: write }).pass(true);
      await assertRunEqual(server, runDir);
      assert.equal(await alertRows(server.pool), 4);
    } finally {
      await server.close();
    }
  });

  it("refuses forged alert events with a 400 saying why, stores nothing of the batch, counts each", async () => {
    const { server, write } = await serverWithTokens(postgres.server);
    try {
      const good = { ...seedAlerts("exp/f", 1)[0] };
      const event = (change: Record<string, unknown>): string => JSON.stringify({ ...good, value: "NaN", ...change });
      const cases: [string, unknown, RegExp][] = [
        ["not a list", { seq: 1, event: event({}) }, /alerts must be an array/],
        ["a sequence number of 0", [{ seq: 0, event: event({}) }], /alerts\[0\]\.seq must be an integer from 1/],
        [
          "an unknown level",
          [{ seq: 1, event: event({ level: "fatal" }) }],
          /level must be one of info, warning, error/,
        ],
        ["no message", [{ seq: 1, event: event({ message: undefined }) }], /needs id, rule, run and message/],
        [
          "a state of its own",
          [{ seq: 1, event: event({ state: "exploded" }) }],
          /state must be one of firing, resolved, ended/,
        ],
        ["a value that is an object", [{ seq: 1, event: event({ value: { $where: "1" } }) }], /value must be a number/],
        ["not JSON", [{ seq: 1, event: "{'level':" }], /must be a JSON object/],
        ["NUL in the id", [{ seq: 1, event: event({ id: "a\u0000b" }) }], /event's id holds a NUL/],
        ["an oversized event", [{ seq: 1, event: event({ message: "x".repeat(70_000) }) }], /longer than 65536/],
        ["a field too long", [{ seq: 1, event: event({ host: "h".repeat(20_000) }) }], /at most 16384 characters/],
      ];
      for (const [what, alerts, message] of cases) {
        const answer = await post(server.url, write, alertBatch("exp/f", alerts));
        assert.equal(answer.status, 400, `${what}: ${answer.text}`);
        assert.match(answer.text, message, what);
      }
      assert.equal(await alertRows(server.pool), 0, "nothing of a refused batch is stored");
      const runs = await server.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM runs");
      assert.equal(runs.rows[0]?.n, 0, "not even its run");
      assert.equal(await rejected(server.url), cases.length);
    } finally {
      await server.close();
    }
  });
});
