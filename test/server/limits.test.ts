/**
 * docs/server.md's table of limits states the numbers the code uses: each row's value is
 * compared with the constant that enforces it.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { STRING_LIMITS } from "../../src/core/string-limits.js";
import { DEFAULT_INGEST_LIMITS } from "../../src/server/ingest-route.js";
import {
  DEFAULT_AUTH_FAILURES_PER_MINUTE,
  DEFAULT_INGEST_POOL_SIZE,
  DEFAULT_POOL_SIZE,
  DEFAULT_RATE_LIMIT,
  INGEST_QUEUE,
  INGEST_WAIT_MS,
} from "../../src/server/server.js";
import { TOKEN_CACHE_MS } from "../../src/server/tokens.js";
import { WIRE_LIMITS } from "../../src/sync/wire.js";
import { MAX_PARAM_CHARS } from "../../src/ui/params.js";
import { REPO_ROOT } from "../helpers.js";

const MIB = 1024 * 1024;

/** The rows of the "## Limits" table: the first cell and the second as a number (`1,000`, `32 MiB`). */
function documentedLimits(): Map<string, number> {
  const doc = readFileSync(join(REPO_ROOT, "docs/server.md"), "utf8");
  const section = doc.slice(doc.indexOf("## Limits\n"), doc.indexOf("\n## ", doc.indexOf("## Limits\n") + 1));
  const rows = new Map<string, number>();
  for (const line of section.split("\n")) {
    const cells = line.split("|").map((c) => c.trim());
    const m = /^([\d,]+)( MiB)?$/.exec(cells[2] ?? "");
    if (m === null) continue;
    rows.set(cells[1] ?? "", Number((m[1] ?? "").replaceAll(",", "")) * (m[2] === undefined ? 1 : MIB));
  }
  return rows;
}

test("docs/server.md's table of limits holds the numbers the code uses, every one", () => {
  const rows = documentedLimits();
  const code: [RegExp, number][] = [
    [/^a metric key, tag, group/, STRING_LIMITS.name],
    [/^a metric key, tag, group/, WIRE_LIMITS.name],
    [/^a hyperparameter's text value/, STRING_LIMITS.paramValue],
    [/^NUL characters/, 0],
    [/^a query parameter's value/, MAX_PARAM_CHARS],
    [/^series segments per batch/, WIRE_LIMITS.segments],
    [/^points per batch/, WIRE_LIMITS.points],
    [/^samples and histograms per batch/, WIRE_LIMITS.records],
    [/^alert events per batch/, WIRE_LIMITS.alerts],
    [/^file segments per batch/, WIRE_LIMITS.files],
    [/^a batch's header/, WIRE_LIMITS.header],
    [/^a request's body/, DEFAULT_INGEST_LIMITS.maxBodyBytes],
    [/^a batch inflated/, DEFAULT_INGEST_LIMITS.maxBatchBytes],
    [/^bytes inflated by all ingest requests/, DEFAULT_INGEST_LIMITS.maxInflatingBytes],
    [/^requests per second per client/, DEFAULT_RATE_LIMIT],
    [/^failed authentications per minute/, DEFAULT_AUTH_FAILURES_PER_MINUTE],
    [/^how long a checked token is trusted/, TOKEN_CACHE_MS],
    [/^PostgreSQL connections per server for reads/, DEFAULT_POOL_SIZE],
    [/^PostgreSQL connections per server for ingest/, DEFAULT_INGEST_POOL_SIZE],
    [/^ingest batches waiting/, INGEST_QUEUE],
    [/^how long an ingest batch waits/, INGEST_WAIT_MS],
  ];
  const checked = new Set<string>();
  for (const [name, value] of code) {
    const row = [...rows].find(([what]) => name.test(what));
    assert.ok(row !== undefined, `docs/server.md's limits table has no row ${String(name)}`);
    assert.equal(row[1], value, `${row[0]}: the docs say ${row[1]}, the code uses ${value}`);
    checked.add(row[0]);
  }
  assert.deepEqual(
    [...rows.keys()].filter((r) => !checked.has(r)),
    [],
    "every row of the table is checked against the code",
  );
});
