/**
 * The public surface is deliberate: each entry point's exported names (values and types) are
 * snapshotted in docs/api-surface.txt, so a change to what users can import shows up in
 * review as a change to that file. docs/api.md says what each entry point is for.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { API_SNAPSHOT, apiSurface } from "../scripts/api-surface.js";

const surface = apiSurface();

/** The names an entry point exports, from the surface text. */
function namesOf(entry: string): string[] {
  const block = surface.split(/\n(?=\S)/).find((b) => b.startsWith(`${entry} (`));
  assert.ok(block !== undefined, `no entry point "${entry}" in package.json's exports`);
  return block
    .split("\n")
    .slice(1)
    .map((line) => line.trim().split(" ")[1] ?? "")
    .filter((name) => name !== "");
}

test("each entry point exports exactly the names in docs/api-surface.txt", () => {
  const snapshot = readFileSync(API_SNAPSHOT, "utf8");
  assert.equal(
    surface,
    snapshot,
    "The public surface changed. If that is deliberate, run `npx tsx scripts/api-surface.ts --write`, " +
      "commit docs/api-surface.txt, and update docs/api.md (and the docs page of the area) for what was added or removed.",
  );
});

test("internals stay out of the package root, and every built-in backend's option type is in it", () => {
  const root = namesOf(".");
  for (const internal of [
    "getCollector",
    "KeyState",
    "MetricEntry",
    "RankRuntime",
    "RankSnapshot",
    "getReduceDefinition",
    "PROTOCOL_VERSION",
    "parseNvidiaSmi",
  ]) {
    assert.ok(
      !root.includes(internal),
      `"${internal}" is exported from "rankscope"; tests import internals from their src/ file`,
    );
  }
  for (const options of [
    "ConsoleBackendOptions",
    "JsonlBackendOptions",
    "StoreBackendOptions",
    "TensorboardBackendOptions",
    "WandbBackendOptions",
    "PrometheusBackendOptions",
    "PrometheusRemoteWriteBackendOptions",
    "OtlpBackendOptions",
  ]) {
    assert.ok(root.includes(options), `"${options}" is not exported from "rankscope"`);
  }
});
