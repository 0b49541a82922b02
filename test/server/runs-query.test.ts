/**
 * `/api/runs`' filters, sorts and paging give the same answer from both sources: a local root
 * (the run index, in memory) and the team server (SQL over PostgreSQL) holding the same runs, sent
 * by the sync. Runs differ in every way a query looks at — tags, group, status, numbers, text and
 * booleans as parameters (some missing), last values (NaN, +∞, missing), names that order
 * differently by UTF-16 unit, by locale and by code point — and each query is compared page for
 * page, row for row.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createPostgresSource } from "../../src/server/pg-source.js";
import { RunSync } from "../../src/sync/run-sync.js";
import { writeFileAtomicSync } from "../../src/io/atomic-write.js";
import { parseRunQuery } from "../../src/ui/run-query.js";
import type { DashboardSource, RunsPage } from "../../src/ui/source.js";
import { createStoreSource, type StoreSource } from "../../src/ui/store-source.js";
import { tempDir } from "../helpers.js";
import { openRun } from "../ui/seed.js";
import { Postgres, postgresMissing } from "./postgres.js";
import { projectId, serverWithTokens } from "./support.js";
import type { TeamServer } from "../../src/server/server.js";

const skip = postgresMissing() ?? false;

interface Spec {
  trial: string;
  tags?: string[];
  group?: string;
  params?: Record<string, unknown>;
  /** Values of `loss` by step; its last one is the run's last value. */
  loss?: number[];
  status: "finished" | "failed" | "running";
}

// Names whose orders differ: by UTF-16 unit "\u{1D4B3}" (a surrogate pair) sorts before "\uFFFD", by code point after it.
const SPECS: Spec[] = [
  {
    trial: "alpha",
    tags: ["a", "b"],
    group: "g0",
    params: { lr: 0.001, act: "gelu", flag: true },
    loss: [3, 2, 1],
    status: "finished",
  },
  {
    trial: "Beta",
    tags: ["a"],
    group: "g0",
    params: { lr: 0.01, act: "relu", flag: false },
    loss: [3, 2.5],
    status: "finished",
  },
  {
    trial: "gamma",
    tags: ["b", "c"],
    group: "g1",
    params: { lr: 0.01, act: "gelu" },
    loss: [1, NaN],
    status: "failed",
  },
  { trial: "delta", tags: [], params: { lr: "auto", act: "tanh" }, loss: [2, Infinity], status: "finished" },
  { trial: "émile", tags: ["c"], group: "g1", params: { lr: 0.1 }, status: "running" },
  { trial: "zeta", group: "g2", params: { act: "gelu", batch: 64 }, loss: [0.5], status: "finished" },
  { trial: "\u{1D4B3}-astral", tags: ["a", "c"], params: { lr: 0.001, batch: 32 }, loss: [4, 0.25], status: "running" },
  { trial: "\uFFFD-replacement", params: { lr: 1e-4, act: "GELU" }, loss: [0.75], status: "finished" },
  {
    trial: "实验",
    tags: ["b"],
    group: "g0",
    params: { lr: 0.01, act: "gelu", batch: 32 },
    loss: [5, 1.5],
    status: "failed",
  },
  { trial: "omega", tags: ["a", "b", "c"], params: {}, loss: [-1], status: "finished" },
];

const QUERIES: string[] = [
  "",
  "sort=name",
  "sort=-name",
  "sort=started",
  "sort=-started",
  "sort=updated",
  "sort=status",
  "sort=-status",
  "sort=group",
  "sort=-group",
  "sort=param:lr",
  "sort=-param:lr",
  "sort=param:act",
  "sort=-param:act",
  "sort=param:flag",
  "sort=param:missing",
  "sort=metric:loss",
  "sort=-metric:loss",
  "sort=metric:missing",
  "tag=a",
  "tag=a&tag=c",
  "group=g0",
  "status=running",
  "status=failed&status=finished",
  "q=ALPHA",
  "q=a",
  "q=g1",
  "q=%25",
  "param=lr=0.01",
  "param=lr!=0.01",
  "param=lr<0.01",
  "param=lr<=0.01",
  "param=lr>0.001",
  "param=lr>=0.1",
  "param=act=gelu",
  "param=act!=gelu",
  "param=lr=auto",
  "param=flag=true",
  "param=batch>=32&param=act=gelu",
  "metric=loss<1",
  "metric=loss<=1",
  "metric=loss>1",
  "metric=loss>=0.5",
  "metric=loss=2.5",
  "metric=loss!=2.5",
  "metric=missing!=1",
  "metric=missing<1",
  "run=q/alpha&run=q/zeta&run=q/nope",
  "sort=name&limit=3",
  "sort=name&offset=3&limit=3",
  "sort=name&offset=9&limit=3",
  "sort=-metric:loss&offset=2&limit=4",
  "sort=param:lr&tag=a&limit=2",
  "summary=1&sort=name",
  "summary=1&internal=1&sort=name&limit=4",
];

function writeRuns(root: string): void {
  let wall = 1_700_000_000_000;
  for (const spec of SPECS) {
    const writer = openRun(root, "q", spec.trial);
    if (spec.params !== undefined) writer.write({ hyperparams: spec.params });
    const loss = spec.loss ?? [];
    writer.write({
      scalars: [
        ...loss.map((value, step) => ({ key: "loss", step, wall: (wall += 1000), value, reduce: "mean" })),
        { key: "rankscope/ranks_expected", step: 0, wall, value: 2, reduce: "last" },
      ],
    });
    if (spec.tags !== undefined || spec.group !== undefined) {
      writeFileAtomicSync(
        join(root, "q", spec.trial, "run.json"),
        JSON.stringify({
          ...(spec.tags !== undefined ? { tags: spec.tags } : {}),
          ...(spec.group !== undefined ? { group: spec.group } : {}),
        }),
      );
    }
    if (spec.status === "running") writer.close();
    else writer.finish(spec.status);
  }
}

describe("/api/runs: both sources answer every query alike", { skip }, () => {
  let root: string;
  let pgServer: Postgres;
  let server: TeamServer;
  let local: StoreSource;
  let remote: DashboardSource;

  before(async () => {
    root = tempDir("rankscope-runs-query-");
    writeRuns(root);
    pgServer = await Postgres.start();
    const team = await serverWithTokens(pgServer);
    server = team.server;
    for (const spec of SPECS)
      await new RunSync({ runDir: join(root, "q", spec.trial), url: server.url, token: team.write }).pass();
    local = createStoreSource(root);
    await local.index.refreshAll();
    remote = createPostgresSource(server.pool, await projectId(server));
  });

  after(async () => {
    await local?.close?.();
    await server?.close();
    await pgServer?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it("holds the same runs on both sides", async () => {
    const mine = await local.listRuns({ summary: true, internal: true });
    assert.equal(mine.total, SPECS.length);
    assert.deepEqual(await remote.listRuns({ summary: true, internal: true }), mine);
  });

  for (const query of QUERIES) {
    it(`answers ?${query} alike`, async () => {
      const parsed = parseRunQuery(new URLSearchParams(query));
      const mine: RunsPage = await local.listRuns(parsed);
      const theirs: RunsPage = await remote.listRuns(parsed);
      assert.deepEqual(
        theirs.runs.map((r) => r.id),
        mine.runs.map((r) => r.id),
        `order of ?${query}`,
      );
      assert.deepEqual(theirs, mine, `rows of ?${query}`);
    });
  }

  it("orders names by code point on both sides (a surrogate pair after U+FFFD), missing values last either way", async () => {
    const names = (await local.listRuns(parseRunQuery(new URLSearchParams("sort=name")))).runs.map((r) => r.trial);
    assert.ok(names.indexOf("\uFFFD-replacement") < names.indexOf("\u{1D4B3}-astral"), names.join(" "));
    assert.ok(names.indexOf("Beta") < names.indexOf("alpha"));
    for (const sort of ["param:lr", "-param:lr"]) {
      const trials = (await local.listRuns(parseRunQuery(new URLSearchParams(`sort=${sort}`)))).runs.map(
        (r) => r.trial,
      );
      assert.deepEqual(trials.slice(-2).sort(), ["omega", "zeta"], `${sort}: runs without lr come last`);
    }
    const byLoss = (await local.listRuns(parseRunQuery(new URLSearchParams("sort=metric:loss")))).runs.map(
      (r) => r.trial,
    );
    assert.deepEqual(byLoss, [
      "omega",
      "\u{1D4B3}-astral",
      "zeta",
      "\uFFFD-replacement",
      "alpha",
      "实验",
      "Beta",
      "delta",
      "gamma",
      "émile",
    ]);
  });
});
