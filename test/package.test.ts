// The package as a user installs it: the core import stays light, the CLI runs from dist.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));

function loadedModules(imports: string): string[] {
  const script = `${imports}
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
console.log(JSON.stringify(Object.keys(require.cache)));`;
  const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], { cwd: root, encoding: "utf8" });
  assert.equal(run.status, 0, run.stderr);
  return JSON.parse(run.stdout) as string[];
}

const HEAVY = [
  "better-sqlite3",
  "protobufjs",
  "@nats-io",
  "pino",
  "playwright-core",
  "vite",
  "prom-client",
  "@opentelemetry",
  "snappyjs",
];

test('import { recordMetric } from "rankscope" loads none of the heavy optional parts', () => {
  const loaded = loadedModules('import { recordMetric } from "rankscope"; recordMetric("x", 1);');
  for (const heavy of HEAVY) {
    assert.ok(!loaded.some((m) => m.includes(`node_modules/${heavy}`)), `${heavy} was loaded by the core import`);
  }
  // The check can see CommonJS modules loaded through ESM (control: pino is one).
  const control = loadedModules('import "pino";');
  assert.ok(
    control.some((m) => m.includes("node_modules/pino")),
    "control: pino shows up when imported",
  );
});

test('import "rankscope" opens two of its own files: dist/ is a bundle (scripts/bundle.mjs)', () => {
  // Each file costs the ES module loader more than its code costs to run: 133 files took 100 ms of
  // CPU, the bundle 33 (BENCHMARKS.md, "Install and import"). Counted by a load hook.
  const hook = `data:text/javascript,${encodeURIComponent(
    'export async function load(u, c, n) { if (u.startsWith("file:")) process.stderr.write("LOADED " + u + "\\n"); return n(u, c); }',
  )}`;
  const register = `import { register } from "node:module"; register(${JSON.stringify(hook)});`;
  const run = spawnSync(
    process.execPath,
    [
      "--import",
      `data:text/javascript,${encodeURIComponent(register)}`,
      "--input-type=module",
      "-e",
      'import "rankscope";',
    ],
    { cwd: root, encoding: "utf8" },
  );
  assert.equal(run.status, 0, run.stderr);
  const ours = run.stderr
    .split("\n")
    .filter((line) => line.startsWith("LOADED ") && line.includes("/dist/"))
    .map((line) => line.slice(line.indexOf("/dist/") + 1));
  assert.ok(ours.includes("dist/index.js"), `the hook saw the import: ${ours.join(", ")}`);
  assert.ok(ours.length <= 2, `import "rankscope" opened ${ours.length} files: ${ours.join(", ")}`);
});

test("the rankscope bin prints help and rejects unknown commands with a non-zero exit", () => {
  const help = spawnSync(process.execPath, ["dist/cli/main.js", "--help"], { cwd: root, encoding: "utf8" });
  assert.equal(help.status, 0);
  assert.match(help.stdout, /Usage: rankscope/);
  assert.match(help.stdout, /demo/);
  const bad = spawnSync(process.execPath, ["dist/cli/main.js", "frobnicate"], { cwd: root, encoding: "utf8" });
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /unknown command 'frobnicate'/);
});

test("installing the package runs no script of its, and engines names the Node.js majors CI tests", async () => {
  const { readFileSync } = await import("node:fs");
  const manifest = JSON.parse(readFileSync(`${root}/package.json`, "utf8")) as {
    scripts: Record<string, string>;
    engines: { node: string };
  };
  // npm runs these when a user installs the package (prepare: also from git); npm 11 warns about each.
  for (const hook of ["preinstall", "install", "postinstall", "prepare"]) {
    assert.equal(
      manifest.scripts[hook],
      undefined,
      `package.json has a "${hook}" script, which runs on the user's install`,
    );
  }
  assert.ok(manifest.scripts["prepack"]?.includes("build"), "npm pack builds dist/ through prepack");
  const ci = readFileSync(`${root}/.ci/run`, "utf8");
  const majors = [
    "20",
    ...[...ci.matchAll(/for major in ([\d ]+);/g)].flatMap((m) => (m[1] ?? "").trim().split(/\s+/)),
  ];
  assert.deepEqual(majors, ["20", "22", "24"], ".ci/run runs the suite on the machine's Node (20), 22 and 24");
  assert.equal(
    manifest.engines.node,
    majors.map((m) => `^${m}`).join(" || "),
    "engines lists exactly the majors CI tests",
  );
});
