/**
 * Runs grouped by config keys (`/api/groups`, `src/ui/group-bands.ts`): the mean, standard
 * deviation, min and max of a small known group equal values worked out by hand (no numpy), with
 * steps aligned across runs, a run logged less often interpolated, NaN and ±∞ left out; and both
 * sources — a local root and the team server over PostgreSQL holding the same runs — answer the
 * same groups.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { RunSync } from "../../src/sync/run-sync.js";
import { groupBand, valuesAt } from "../../src/ui/group-bands.js";
import { startDashboard, type Dashboard } from "../../src/ui/server.js";
import { tempDir } from "../helpers.js";
import { Postgres, postgresMissing } from "../server/postgres.js";
import { serverWithTokens } from "../server/support.js";
import type { TeamServer } from "../../src/server/server.js";
import { writeRun } from "./web/support.js";

/** Close enough for sums of a few doubles; the expected values are exact fractions worked out by hand. */
function near(actual: readonly number[], expected: readonly number[], what: string): void {
  assert.equal(actual.length, expected.length, `${what}: ${JSON.stringify(actual)}`);
  actual.forEach((a, i) =>
    assert.ok(Math.abs(a - (expected[i] ?? NaN)) < 1e-12, `${what}[${i}] = ${a}, expected ${expected[i]}`),
  );
}

describe("group bands: the figures", () => {
  it("equals hand-computed mean, population standard deviation, min and max of a group of three", () => {
    // Step:        0  1  2  3
    // a:           1  2  3  4
    // b:           3  2  1  0
    // c:           2  2  2  5
    // mean:        2  2  2  3
    // deviations²: 1+1+0=2, 0, 1+1+0=2, 1+9+4=14 → std √(2/3), 0, √(2/3), √(14/3)
    const band = groupBand(
      [
        { steps: [0, 1, 2, 3], values: [1, 2, 3, 4] },
        { steps: [0, 1, 2, 3], values: [3, 2, 1, 0] },
        { steps: [0, 1, 2, 3], values: [2, 2, 2, 5] },
      ],
      2000,
    );
    assert.deepEqual(band.steps, [0, 1, 2, 3]);
    near(band.mean, [2, 2, 2, 3], "mean");
    near(band.std, [0.816496580927726, 0, 0.816496580927726, 2.160246899469287], "std");
    assert.deepEqual(band.min, [1, 2, 1, 0]);
    assert.deepEqual(band.max, [3, 2, 3, 5]);
    assert.deepEqual(band.count, [3, 3, 3, 3]);
  });

  it("interpolates a run logged less often, and leaves NaN and ±∞ out", () => {
    // d logs steps 0 and 2 only: at step 1 it counts as 4 (halfway from 2 to 6).
    // e has NaN at step 1 and +∞ at step 2: it counts at step 0 only (a line through NaN is not interpolated).
    const band = groupBand(
      [
        { steps: [0, 1, 2], values: [0, 2, 4] },
        { steps: [0, 2], values: [2, 6] },
        { steps: [0, 1, 2], values: [4, NaN, Infinity] },
      ],
      2000,
    );
    assert.deepEqual(band.steps, [0, 1, 2]);
    // Step 0: 0, 2, 4 → mean 2, std √(8/3); step 1: 2, 4 → mean 3, std 1; step 2: 4, 6 → mean 5, std 1.
    near(band.mean, [2, 3, 5], "mean");
    near(band.std, [1.632993161855452, 1, 1], "std");
    assert.deepEqual(band.count, [3, 2, 2]);
    assert.deepEqual([...valuesAt({ steps: [10, 20], values: [1, 3] }, [5, 10, 15, 20, 25])], [NaN, 1, 2, 3, NaN]);
  });

  it("aligns at most maxPoints evenly spaced steps", () => {
    const steps = Array.from({ length: 1001 }, (_, i) => i);
    const band = groupBand(
      [
        { steps, values: steps.map((s) => s * 2) },
        { steps, values: steps.map(() => 0) },
      ],
      11,
    );
    assert.deepEqual(band.steps, [0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
    assert.deepEqual(band.mean, band.steps);
    assert.deepEqual(
      band.max,
      band.steps.map((s) => 2 * s),
    );
  });
});

interface GroupsAnswer {
  key: string;
  groups: {
    values: unknown[];
    label: string;
    runs: string[];
    steps: number[];
    mean: number[];
    std: number[];
    min: number[];
    max: number[];
    count: number[];
  }[];
  missing: string[];
}

const skipTeam = postgresMissing() ?? false;

describe("group bands: /api/groups over both sources", () => {
  let root: string;
  let dashboard: Dashboard;
  let pg: Postgres | undefined;
  let team: { server: TeamServer; read: string } | undefined;
  const runs: [string, number, string, (step: number) => number][] = [
    ["s1", 0.1, "adam", (s) => [1, 2, 3, 4][s] ?? NaN],
    ["s2", 0.1, "adam", (s) => [3, 2, 1, 0][s] ?? NaN],
    ["s3", 0.1, "adam", (s) => [2, 2, 2, 5][s] ?? NaN],
    ["s4", 0.2, "adam", (s) => 10 + s],
    ["s5", 0.2, "sgd", (s) => 20 + s],
  ];

  before(async () => {
    root = tempDir("rankscope-groups-");
    for (const [trial, lr, opt, f] of runs) writeRun(root, "sweep", trial, 4, { loss: f }, { lr, opt });
    writeRun(root, "sweep", "other", 4, { reward: (s) => s }, { lr: 0.1, opt: "adam" });
    dashboard = await startDashboard({ root, port: 0 });
    if (skipTeam === false) {
      pg = await Postgres.start();
      const t = await serverWithTokens(pg);
      for (const trial of [...runs.map((r) => r[0]), "other"])
        await new RunSync({ runDir: join(root, "sweep", trial), url: t.server.url, token: t.write }).pass();
      team = { server: t.server, read: t.read };
    }
  });

  after(async () => {
    await dashboard?.close();
    await team?.server.close();
    await pg?.close();
    rmSync(root, { recursive: true, force: true });
  });

  const query = (by: string[]): string =>
    `/api/groups?key=loss&${by.map((b) => `by=${encodeURIComponent(b)}`).join("&")}&${[...runs.map((r) => r[0]), "other", "nope"].map((t) => `run=sweep/${t}`).join("&")}`;

  async function ask(base: string, path: string, token?: string): Promise<GroupsAnswer> {
    const answer = await fetch(
      new URL(path, base),
      token === undefined ? {} : { headers: { Authorization: `Bearer ${token}` } },
    );
    const text = await answer.text();
    assert.equal(answer.status, 200, text);
    return JSON.parse(text) as GroupsAnswer;
  }

  it("groups by a parameter: one band per value, with the hand-computed figures", async () => {
    const answer = await ask(dashboard.url, query(["param:lr"]));
    assert.deepEqual(
      answer.groups.map((g) => [g.label, g.runs]),
      [
        ["lr=0.1", ["sweep/s1", "sweep/s2", "sweep/s3"]],
        ["lr=0.2", ["sweep/s4", "sweep/s5"]],
      ],
    );
    const [first, second] = answer.groups;
    near(first?.mean ?? [], [2, 2, 2, 3], "lr=0.1 mean");
    near(first?.std ?? [], [0.816496580927726, 0, 0.816496580927726, 2.160246899469287], "lr=0.1 std");
    assert.deepEqual(first?.min, [1, 2, 1, 0]);
    assert.deepEqual(first?.max, [3, 2, 3, 5]);
    // lr=0.2: 10+s and 20+s → mean 15+s, std 5, min 10+s, max 20+s.
    near(second?.mean ?? [], [15, 16, 17, 18], "lr=0.2 mean");
    near(second?.std ?? [], [5, 5, 5, 5], "lr=0.2 std");
    assert.deepEqual(
      answer.missing.sort(),
      ["sweep/nope", "sweep/other"],
      "runs without the key or unknown are listed, not drawn",
    );
  });

  it("groups by two fields", async () => {
    const answer = await ask(dashboard.url, query(["param:lr", "param:opt"]));
    assert.deepEqual(
      answer.groups.map((g) => [g.label, g.runs.length]),
      [
        ["lr=0.1 · opt=adam", 3],
        ["lr=0.2 · opt=adam", 1],
        ["lr=0.2 · opt=sgd", 1],
      ],
    );
  });

  it("says what is wrong with a bad request", async () => {
    for (const [path, message] of [
      ["/api/groups?key=loss&run=sweep/s1", /by must be given/],
      ["/api/groups?key=loss&by=lr&run=sweep/s1", /by must be param:NAME, group, experiment or status/],
      ["/api/groups?key=loss&by=group", /run must be given/],
      ["/api/groups?by=group&run=sweep/s1", /missing the key parameter/],
    ] as const) {
      const answer = await fetch(new URL(path, dashboard.url));
      assert.equal(answer.status, 400, path);
      assert.match(((await answer.json()) as { error: string }).error, message);
    }
  });

  it("answers the same groups from the team server", { skip: skipTeam }, async () => {
    assert.ok(team !== undefined);
    for (const by of [["param:lr"], ["param:lr", "param:opt"], ["group"]]) {
      assert.deepEqual(
        await ask(team.server.url, query(by), team.read),
        await ask(dashboard.url, query(by)),
        by.join(","),
      );
    }
  });
});
