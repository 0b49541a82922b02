// The packed tarball in a fresh project WITHOUT the optional peer dependencies (package.json's
// `peerDependencies`, all optional): what `npm install rankscope` alone gives. A single job's
// backends (console, JSONL, the store) work there; asking for a feature whose packages are missing
// (the otlp backend, `rankscope/otlp`, `rankscope/nats`, `rankscope server`, the store on Node 20)
// is an error naming the `npm install` line that adds them, with package.json's ranges. Network-free, as
// test/package-consumer.test.ts: the tarball is unpacked into the project and only our
// `dependencies` are linked from this checkout's node_modules.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { tempDir } from "./helpers.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  dependencies: Record<string, string>;
  optionalDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
};
let project = "";

/** The `npm install` line a user should be shown for these packages: package.json's ranges. */
function installLine(...names: string[]): string {
  return `npm install ${names.map((name) => `${name}@${manifest.peerDependencies[name]}`).join(" ")}`;
}

const OTLP_LINE = installLine(
  "@opentelemetry/api",
  "@opentelemetry/exporter-metrics-otlp-proto",
  "@opentelemetry/resources",
  "@opentelemetry/sdk-metrics",
  "@opentelemetry/semantic-conventions",
);

/** Runs `node args` in the project; spawn's own timeout bounds it. */
function node(args: readonly string[]): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, args, { cwd: project, encoding: "utf8", timeout: 60_000 });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** Runs an ES module snippet in the project. */
function snippet(name: string, code: string): { status: number | null; stdout: string; stderr: string } {
  writeFileSync(join(project, name), code);
  return node([name]);
}

before(() => {
  assert.ok(existsSync(join(root, "dist", "index.js")), "dist/ is missing: run `npm run build` first (npm test does)");
  const scratch = tempDir("rankscope-peers-");
  const pack = spawnSync("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", scratch], {
    cwd: root,
    encoding: "utf8",
    timeout: 120_000,
  });
  assert.equal(pack.status, 0, pack.stderr);
  const tarball = readdirSync(scratch).find((f) => f.endsWith(".tgz"));
  assert.ok(tarball !== undefined, `npm pack wrote no tarball: ${pack.stdout}`);
  project = join(scratch, "app");
  const installed = join(project, "node_modules", "rankscope");
  mkdirSync(installed, { recursive: true });
  const untar = spawnSync("tar", ["-xzf", join(scratch, tarball), "-C", installed, "--strip-components=1"], {
    encoding: "utf8",
  });
  assert.equal(untar.status, 0, untar.stderr);
  // What `npm install rankscope` brings: the dependencies and the optional dependencies this Node
  // installed (better-sqlite3 13's Node-API build on 22 and later), no optional peer.
  const optional = Object.keys(manifest.optionalDependencies).filter((dep) =>
    existsSync(join(root, "node_modules", dep)),
  );
  for (const dep of [...Object.keys(manifest.dependencies), ...optional]) {
    const link = join(project, "node_modules", dep);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(root, "node_modules", dep), link, "dir");
  }
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  for (const peer of Object.keys(manifest.peerDependencies))
    assert.equal(
      spawnSync(process.execPath, ["-e", `require.resolve(${JSON.stringify(peer)})`], { cwd: project }).status,
      1,
      `${peer} must not be reachable from the project`,
    );
});

after(() => {
  project = "";
});

const NODE_MAJOR = Number(process.versions.node.split(".")[0]);

test(
  "on Node.js 20, a job with the default backends runs without better-sqlite3, and the store names the npm install line",
  { skip: NODE_MAJOR >= 22 && "Node 22 and later use better-sqlite3-napi, which npm installs" },
  () => {
    const run = snippet(
      "default-backends.mjs",
      `import { getOrCreateMetricLogger, recordMetric, Reduce } from "rankscope";
const logger = await getOrCreateMetricLogger({ processName: "Controller", root: "runs", experiment: "e", trial: "n" });
await logger.initBackends();
recordMetric("loss", 2.5, Reduce.MEAN);
await logger.flush(0);
await logger.shutdown();
`,
    );
    // The console backend still gets its data; the store says what to install when it opens.
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /loss: 2\.5/);
    assert.ok(run.stderr.includes(installLine("better-sqlite3")), run.stderr);
    // What the user does next: install it (here, linked from this checkout).
    const link = join(project, "node_modules", "better-sqlite3");
    symlinkSync(join(root, "node_modules", "better-sqlite3"), link, "dir");
  },
);

test("without the optional peers (better-sqlite3 too on Node 22+), a single job logs to the console, JSONL and the store", () => {
  const run = snippet(
    "job.mjs",
    `import { getOrCreateMetricLogger, recordMetric, Reduce } from "rankscope";
const logger = await getOrCreateMetricLogger({ processName: "Controller", root: "runs", experiment: "e", trial: "t" });
await logger.initBackends({
  console: { loggingMode: "global_reduce" },
  jsonl: { loggingMode: "global_reduce" },
  store: { loggingMode: "global_reduce" },
});
recordMetric("loss", 1.5, Reduce.MEAN);
await logger.flush(0);
await logger.shutdown();
`,
  );
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /loss: 1\.5/);
  assert.match(readFileSync(join(project, "runs", "e", "t", "metrics.jsonl"), "utf8"), /"loss"/);
  const read = snippet(
    "read.mjs",
    `import { series } from "rankscope/store";
console.log(JSON.stringify(series("runs/e/t", "loss")));
`,
  );
  assert.equal(read.status, 0, read.stderr);
  assert.match(read.stdout, /1\.5/);
});

test("the otlp backend without its packages names the npm install line", () => {
  const run = snippet(
    "otlp.mjs",
    `import { getOrCreateMetricLogger } from "rankscope";
const logger = await getOrCreateMetricLogger({ processName: "Controller", root: "runs-otlp" });
try {
  await logger.initBackends({ otlp: { loggingMode: "global_reduce" } });
} catch (error) {
  console.log(error.message);
}
await logger.shutdown();
`,
  );
  assert.equal(run.status, 0, run.stderr);
  assert.ok(run.stdout.includes(OTLP_LINE), `expected "${OTLP_LINE}" in: ${run.stdout}`);
});

test("importing rankscope/otlp or rankscope/nats without their packages names the npm install line", () => {
  for (const [subpath, line] of [
    ["rankscope/otlp", OTLP_LINE],
    ["rankscope/nats", installLine("@nats-io/transport-node")],
    ["rankscope/host", installLine("@nats-io/transport-node")],
  ] as const) {
    const run = node(["--input-type=module", "-e", `await import(${JSON.stringify(subpath)})`]);
    assert.notEqual(run.status, 0, `${subpath} loaded without its packages`);
    assert.ok(run.stderr.includes(line), `${subpath}: expected "${line}" in: ${run.stderr}`);
  }
});

test("the prometheus backends without prom-client name the npm install line", () => {
  for (const backend of ["prometheus", "prometheus_remote_write"]) {
    const run = snippet(
      `${backend}.mjs`,
      `import { getOrCreateMetricLogger } from "rankscope";
const logger = await getOrCreateMetricLogger({ processName: "Controller", root: "runs", experiment: "p", trial: "${backend}" });
await logger.initBackends({ ${backend}: { loggingMode: "global_reduce"${backend === "prometheus" ? ", serve: false" : ', url: "http://127.0.0.1:1/api/v1/write"'} } });
`,
    );
    assert.notEqual(run.status, 0, `${backend} started without prom-client`);
    assert.ok(run.stderr.includes(installLine("prom-client")), run.stderr);
  }
  const subpath = snippet("prometheus-subpath.mjs", 'await import("rankscope/prometheus");\n');
  assert.notEqual(subpath.status, 0);
  assert.ok(subpath.stderr.includes(installLine("prom-client")), subpath.stderr);
});

test("`rankscope server` without pg names the npm install line", () => {
  const cli = join(project, "node_modules", "rankscope", "dist", "cli", "main.js");
  const run = node([cli, "server", "--db", "postgres://rankscope@127.0.0.1:1/rankscope"]);
  assert.equal(run.status, 1, run.stderr);
  const line = installLine("pg", "pg-copy-streams", "prom-client");
  assert.ok(run.stderr.includes(line), `expected "${line}" in: ${run.stderr}`);
});
