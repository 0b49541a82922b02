// The optional features' packages (core/optional-packages.ts) are package.json's optional peer
// dependencies, with the same ranges, and in devDependencies so this repository's tests have them.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import {
  installLine,
  MissingPackageError,
  OPTIONAL_FEATURES,
  requireOptional,
} from "../../src/core/optional-packages.js";

const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
};

test("every optional feature's package is an optional peer dependency with package.json's range", () => {
  const table = Object.assign({}, ...Object.values(OPTIONAL_FEATURES).map((f) => f.packages)) as Record<string, string>;
  assert.deepEqual(table, manifest.peerDependencies);
  for (const [name, range] of Object.entries(manifest.peerDependencies)) {
    assert.equal(manifest.peerDependenciesMeta[name]?.optional, true, `${name} is optional`);
    assert.equal(manifest.devDependencies[name], range, `${name} is a devDependency, same range`);
    assert.equal(manifest.dependencies[name], undefined, `${name} is not a dependency`);
  }
});

test("the install line names every package of the feature with its range", () => {
  assert.equal(installLine("server"), "npm install pg@^8.23.1 pg-copy-streams@^7.0.0 prom-client@^15.1.3");
  assert.equal(installLine("prometheus"), "npm install prom-client@^15.1.3");
  assert.equal(
    installLine("nats"),
    `npm install @nats-io/transport-node@${manifest.peerDependencies["@nats-io/transport-node"]}`,
  );
});

test("a package that is installed loads; a name outside the feature is refused", () => {
  const pg = requireOptional<typeof import("pg")>("server", "pg");
  assert.equal(typeof pg.Pool, "function");
  assert.throws(() => requireOptional("server", "zod"), /zod is not a package of server/);
  const error = new MissingPackageError("otlp", "@opentelemetry/api");
  assert.match(error.message, /the otlp backend .* needs @opentelemetry\/api.*npm install @opentelemetry\/api@/);
});
