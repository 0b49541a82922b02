/**
 * Run directories are unique (issue 20, item 3): two jobs that start at the same moment on one
 * root with a default-named trial never share a directory — real processes, started together.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { series } from "../../src/store/reader.js";
import { claimRunLocation, releaseUnusedRunLocation, resolveRunLocation } from "../../src/run/run-dir.js";
import { collectDiagnostics, runNode, tempDir, waitFor, type ChildResult } from "../helpers.js";

const CHILD = join(import.meta.dirname, "fixtures", "same-moment.ts");

/** Start `n` children of the fixture, wait until each is ready, and give them one start time. */
async function startTogether(
  n: number,
  args: string[],
): Promise<{ runDir: string; trial: string; result: ChildResult }[]> {
  const dir = tempDir();
  const goFile = join(dir, "go");
  const ready = new Set<number>();
  const runs = Array.from({ length: n }, (_, i) =>
    runNode(
      [CHILD, ...args],
      { GO_FILE: goFile },
      { onStdout: (text) => void (text.startsWith("ready\n") && ready.add(i)) },
    ),
  );
  await waitFor(() => ready.size === n, { timeoutMs: 60_000, what: `${n} children to be ready` });
  writeFileSync(goFile, String(Date.now() + 300));
  return Promise.all(
    runs.map(async (run) => {
      const result = await run;
      assert.equal(result.code, 0, result.stderr);
      const line = result.stdout.split("\n").find((l) => l.startsWith("{"));
      assert.ok(line !== undefined, result.stdout);
      return { ...(JSON.parse(line) as { runDir: string; trial: string }), result };
    }),
  );
}

describe("run directories", () => {
  it("two processes claiming the same default trial at the same moment get two directories", async () => {
    const root = tempDir();
    const at = new Date(2026, 10, 24, 9, 30, 5);
    const got = await startTogether(2, ["claim", root, String(at.getTime())]);
    const trials = got.map((g) => g.trial).sort();
    assert.deepEqual(trials, ["20261124-093005", "20261124-093005-2"]);
    assert.deepEqual(readdirSync(join(root, "dup")).sort(), trials);
    const second = got.find((g) => g.trial.endsWith("-2"));
    assert.match(
      second?.result.stderr ?? "",
      /run directory .*20261124-093005 already exists .* this run writes to .*20261124-093005-2/,
    );
  });

  it("two jobs started together on one root write two runs, each with exactly its own steps", async () => {
    const root = tempDir();
    const got = await startTogether(2, ["job", root]);
    assert.notEqual(got[0]?.runDir, got[1]?.runDir);
    for (const { runDir } of got) {
      assert.equal(
        series(runDir, "loss", { maxPoints: Infinity }).points.length,
        300,
        `${runDir}: 300 steps, not another job's too`,
      );
      const lines = readFileSync(join(runDir, "metrics.jsonl"), "utf8")
        .split("\n")
        .filter((l) => l.includes('"key":"loss"'));
      assert.equal(lines.length, 300);
    }
  });

  it("a named trial or run directory is used as it is (a resume, ranks joining it); only a default trial is claimed", async () => {
    const root = tempDir();
    const named = claimRunLocation({ root, experiment: "e", trial: "t" }, {});
    assert.equal(named.runDir, join(root, "e", "t"));
    assert.equal(named.claimed, undefined);
    assert.equal(existsSync(named.runDir), false, "nothing is created for a named trial");
    assert.equal(claimRunLocation({ root, experiment: "e" }, { RANKSCOPE_TRIAL: "t" }).claimed, undefined);
    assert.equal(claimRunLocation({ runDir: join(root, "x") }, {}).claimed, undefined);
    const now = new Date(2026, 0, 2, 3, 4, 5);
    const first = claimRunLocation({ root, experiment: "e" }, {}, now);
    const seen = await collectDiagnostics(() => {
      const second = claimRunLocation({ root, experiment: "e" }, {}, now);
      assert.equal(second.trial, `${first.trial}-2`);
    });
    assert.ok(seen.some((d) => d.code === "run.dirTaken"));
    assert.equal(
      resolveRunLocation({ root, experiment: "e" }, {}, now).trial,
      first.trial,
      "resolving alone creates and renames nothing",
    );
  });

  it("a claimed directory nobody wrote into is removed again, with the parents the claim created", () => {
    const root = join(tempDir(), "fresh-root");
    const location = claimRunLocation({ root, experiment: "e" }, {});
    assert.ok(existsSync(location.runDir));
    releaseUnusedRunLocation(location);
    assert.equal(existsSync(location.runDir), false);
    assert.equal(existsSync(root), false, "the root this claim created is gone too");
    const used = claimRunLocation({ root, experiment: "e" }, {});
    writeFileSync(join(used.runDir, "metrics.jsonl"), "{}\n");
    releaseUnusedRunLocation(used);
    assert.ok(existsSync(used.runDir), "a directory with data stays");
  });
});
