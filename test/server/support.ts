/**
 * What the team server's tests share: a server over a fresh database of a real PostgreSQL, tokens,
 * and the comparison of a run's local store with what the server holds, value by value, for every
 * kind of data (through both `DashboardSource`s, so what is compared is what a user would see).
 */
import { readLogWindow } from "../../src/ui/log-reader.js";
import assert from "node:assert/strict";
import { realpathSync } from "node:fs";
import { dirname } from "node:path";
import * as store from "../../src/store/reader.js";
import { createPostgresSource } from "../../src/server/pg-source.js";
import { startTeamServer, type TeamServer, type TeamServerOptions } from "../../src/server/server.js";
import { createToken } from "../../src/server/tokens.js";
import { createStoreSource } from "../../src/ui/store-source.js";
import type { DashboardSource } from "../../src/ui/source.js";
import type { Postgres } from "./postgres.js";
import type { ManyRunSpec } from "../ui/seed.js";

let databases = 0;

/** A team server over a new database of `pg`, with a write and a read token of project `proj`. */
export async function serverWithTokens(
  pg: Postgres,
  options: Partial<TeamServerOptions> = {},
  project = "proj",
): Promise<{ server: TeamServer; db: string; write: string; read: string }> {
  const db = await pg.createDatabase(`t${process.pid}_${databases++}`);
  const server = await startTeamServer({ db, port: 0, log: false, ...options });
  const write = await createToken(server.pool, project, "write");
  const read = await createToken(server.pool, project, "read");
  return { server, db, write, read };
}

/** The server's id of a project. */
export async function projectId(server: TeamServer, name = "proj"): Promise<number> {
  const r = await server.pool.query<{ id: number }>("SELECT id FROM projects WHERE name = $1", [name]);
  const id = r.rows[0]?.id;
  assert.ok(id !== undefined, `no project ${name}`);
  return id;
}

function same(a: readonly number[], b: readonly number[], what: string): void {
  assert.equal(a.length, b.length, `${what}: ${a.length} points locally, ${b.length} on the server`);
  for (let i = 0; i < a.length; i++) {
    if (!Object.is(a[i], b[i]))
      assert.fail(`${what}: point ${i} is ${String(a[i])} locally, ${String(b[i])} on the server`);
  }
}

/** Every point of every series, every record and alert event, the run's labels and files: the server's equal the store's. */
export async function assertRunEqual(
  server: TeamServer,
  runDir: string,
  project = "proj",
): Promise<{ points: number }> {
  const real = realpathSync(runDir);
  const local: DashboardSource = createStoreSource(dirname(dirname(real)));
  const remote = createPostgresSource(server.pool, await projectId(server, project));
  const info = store.runInfo(real);
  const runId = `${info.experiment ?? ""}/${info.trial ?? ""}`;
  const handle = await remote.resolveRun(runId, true);
  let points = 0;
  const all = { maxPoints: Infinity };
  for (const kind of ["scalar", "stream", "system"] as const) {
    const keys = store.keys(real, kind);
    const remoteKeys = kind === "scalar" ? await remote.keys(handle) : [];
    if (kind === "scalar")
      assert.deepEqual(
        remoteKeys.map((k) => [k.key, k.ranks]),
        keys.map((k) => [k.key, k.ranks]),
        `${runId}: scalar keys`,
      );
    if (kind === "stream")
      assert.deepEqual(
        await remote.streamKeys(handle),
        keys.map((k) => k.key),
        `${runId}: stream keys`,
      );
    if (kind === "system")
      assert.deepEqual(
        await remote.systemKeys(handle),
        keys.map((k) => k.key),
        `${runId}: system keys`,
      );
    for (const k of keys) {
      if (kind === "scalar") {
        // Without a rank, the line a chart draws: the key's first in the store's order (the global
        // line before ranks, the controller's and threads').
        const [mine, theirs] = [await local.series(real, k.key, all), await remote.series(handle, k.key, all)];
        same(mine.values, theirs.values, `${runId} scalar ${JSON.stringify(k.key)} without a rank`);
      }
      for (const rank of k.ranks) {
        const what = `${runId} ${kind} ${JSON.stringify(k.key)} rank ${rank}`;
        const mine =
          kind === "scalar"
            ? await local.series(real, k.key, { rank, ...all })
            : kind === "system"
              ? await local.system(real, k.key, all)
              : null;
        const theirs =
          kind === "scalar"
            ? await remote.series(handle, k.key, { rank, ...all })
            : kind === "system"
              ? await remote.system(handle, k.key, all)
              : null;
        if (mine !== null && theirs !== null) {
          same(mine.steps, theirs.steps, `${what} steps`);
          same(mine.times, theirs.times, `${what} times`);
          same(mine.values, theirs.values, `${what} values`);
          points += mine.values.length;
        }
      }
      if (kind === "stream") {
        const mine = await local.stream(real, k.key, all);
        const theirs = await remote.stream(handle, k.key, all);
        same(mine.ranks, theirs.ranks, `${runId} stream ${k.key} ranks`);
        same(mine.steps, theirs.steps, `${runId} stream ${k.key} steps`);
        same(mine.times, theirs.times, `${runId} stream ${k.key} times`);
        same(mine.values, theirs.values, `${runId} stream ${k.key} values`);
        points += mine.values.length;
      }
    }
  }
  assert.deepEqual(await remote.samples(handle), await local.samples(real), `${runId}: samples`);
  for (const key of store.keys(real, "histogram").map((k) => k.key)) {
    assert.deepEqual(
      await remote.histograms?.(handle, key, 10_000),
      await local.histograms?.(real, key, 10_000),
      `${runId}: histograms of ${key}`,
    );
    const ranks = await local.histogramRanks?.(real, key);
    assert.deepEqual(await remote.histogramRanks?.(handle, key), ranks, `${runId}: ranks with histograms of ${key}`);
    for (const rank of ranks ?? []) {
      assert.deepEqual(
        await remote.histograms?.(handle, key, 3, rank),
        await local.histograms?.(real, key, 3, rank),
        `${runId}: rank ${rank}'s newest histograms of ${key}`,
      );
    }
  }
  const localAlerts = await local.alerts(real, { limit: 1000 });
  assert.deepEqual(await remote.alerts(handle, { limit: 1000 }), localAlerts, `${runId}: alert events`);
  // Paged as the banner polls: after an event's seq, and the newest few.
  const middle = localAlerts[Math.floor(localAlerts.length / 2)]?.seq ?? 0;
  assert.deepEqual(
    await remote.alerts(handle, { after: middle, limit: 1000 }),
    await local.alerts(real, { after: middle, limit: 1000 }),
    `${runId}: alert events after ${middle}`,
  );
  assert.deepEqual(
    await remote.alerts(handle, { limit: 2 }),
    await local.alerts(real, { limit: 2 }),
    `${runId}: the newest two alert events`,
  );
  // The Ranks view, whole and its newest few flushes: the server's per-rank timings equal the store's, bit for bit.
  for (const maxFlushes of [2000, 3]) {
    assert.deepEqual(
      await remote.ranks(handle, { maxFlushes }),
      await local.ranks(real, { maxFlushes }),
      `${runId}: the Ranks view of the newest ${maxFlushes} flushes`,
    );
  }
  assert.deepEqual(await remote.config(handle), await local.config(real), `${runId}: hyperparameters`);
  assert.deepEqual(await remote.rankNames?.(handle), await local.rankNames?.(real), `${runId}: rank names`);
  assert.deepEqual(await remote.lastValues?.(handle), await local.lastValues?.(real), `${runId}: last values`);
  const { runs } = await remote.listRuns({ ids: [runId] });
  const { runs: localRuns } = await local.listRuns({});
  const mineRun = localRuns.find((r) => r.id === runId);
  const theirRun = runs.find((r) => r.id === runId);
  assert.deepEqual(theirRun, mineRun, `${runId}: the runs list's row`);
  assert.deepEqual(
    await remote.runDetails(handle),
    await local.runDetails(real),
    `${runId}: config.yaml, version.json, tags, group`,
  );
  const localTraces = (await local.traceFiles(real)).map((f) => [f.name, f.size]);
  assert.deepEqual(
    (await remote.traceFiles(handle)).map((f) => [f.name, f.size]),
    localTraces,
    `${runId}: trace files`,
  );
  const localLogs = (await local.logFiles(real)).map((f) => [f.name, f.size] as const);
  assert.deepEqual(
    (await remote.logFiles(handle)).map((f) => [f.name, f.size]),
    localLogs,
    `${runId}: text log files`,
  );
  for (const [name, size] of localLogs) {
    const mine = await local.logFile(real, name);
    const theirs = await remote.logFile(handle, name);
    assert.equal(await theirs.size(), size, `${runId}: logs/${name} size`);
    assert.ok((await theirs.read(0, size)).equals(await mine.read(0, size)), `${runId}: logs/${name} bytes`);
    // A window from the middle, as the Logs tab pages back: the same lines from both sources.
    const before = Math.floor(size / 2);
    assert.deepEqual(
      await readLogWindow(theirs, { before, maxBytes: 4096 }),
      await readLogWindow(mine, { before, maxBytes: 4096 }),
      `${runId}: logs/${name} window`,
    );
  }
  return { points };
}

/**
 * Run rows of `seedManyRuns`' specs straight into the server's `runs` table (what the sync's
 * `applyMeta` writes: name, status, times, tags, group, parameters), for the list at scale:
 * syncing thousands of runs one by one takes minutes. No series: only the runs list reads them.
 */
export async function insertRunRows(
  server: TeamServer,
  specs: readonly ManyRunSpec[],
  project = "proj",
): Promise<void> {
  const id = await projectId(server, project);
  const now = Date.now();
  await server.pool.query(
    `INSERT INTO runs (project_id, run_key, experiment, trial, status, started_at, ended_at, updated_at, tags, grp, params)
     SELECT $1, r.experiment || '/' || r.trial, r.experiment, r.trial, 'finished', $2::double precision - r.i, $2::double precision - r.i + 500, $2::double precision - r.i + 500, ARRAY(SELECT jsonb_array_elements_text(r.tags)), r.grp, r.params
     FROM jsonb_to_recordset($3::jsonb) AS r(i int, experiment text, trial text, tags jsonb, grp text, params jsonb)`,
    [
      id,
      now - 3_600_000,
      JSON.stringify(
        specs.map((s, i) => ({
          i,
          experiment: s.experiment,
          trial: s.trial,
          tags: s.tags,
          grp: s.group,
          params: s.params,
        })),
      ),
    ],
  );
}
