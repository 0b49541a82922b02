// The README's "Use it in your project", done as a new user does it: the packed tarball installed
// into a fresh `npm init -y` project with the README's own setup commands, every README example
// saved under the name the README shows it with and run with each command the README gives (the
// `node` one where this Node strips types itself), printing exactly the README's output. Unlike
// test/readme.test.ts, nothing here resolves through this checkout: the project is in a temporary
// folder and gets its packages from the registry (npm's cache first).
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { waitFor } from "./helpers.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const readme = readFileSync(join(root, "README.md"), "utf8");

/** The commands of the README's `sh` block after `<!-- name -->`, without their comments. */
function commands(name: string): string[] {
  const block = new RegExp(`<!-- ${name} -->\\n\`\`\`sh\\n([\\s\\S]*?)\`\`\``).exec(readme);
  assert.ok(block !== null, `the README has no sh block after <!-- ${name} -->`);
  return (block[1] ?? "")
    .split("\n")
    .map((line) => line.replace(/#.*$/, "").trim())
    .filter((line) => line !== "");
}

/** Every code block the README names with a visible file name: examples (with their output) and the files they need. */
const SHOWN =
  /`([^`\s]+\.ts)`[^\n]*:\n\n<!-- (?:example|file): (\S+) -->\n```ts\n([\s\S]*?)```(?:\n\nOutput:\n\n```text\n([\s\S]*?)```)?/g;
const shown = [...readme.matchAll(SHOWN)].map((m) => ({
  name: m[1] ?? "",
  source: m[2] ?? "",
  code: m[3] ?? "",
  output: m[4],
}));

let scratch = "";
let project = "";

/**
 * The user's shell: this Node first on PATH, and none of what the test runner or an npm script
 * around it set (NODE_TEST_CONTEXT would make a child report to the runner, an npm script's
 * npm_* settings would steer the project's npm) or this repository's RANKSCOPE_* settings.
 */
function userEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  const kept = new Set(["npm_config_cache", "npm_config_registry", "npm_config_userconfig"]);
  for (const [name, value] of Object.entries(process.env)) {
    if (/^(npm_|NODE_TEST_CONTEXT$|NODE_OPTIONS$|RANKSCOPE_|TSX_)/i.test(name) && !kept.has(name)) continue;
    env[name] = value;
  }
  env["PATH"] = `${dirname(process.execPath)}${delimiter}${env["PATH"] ?? ""}`;
  return env;
}

function sh(command: string, cwd = project, timeout = 60_000): { status: number | null; out: string; err: string } {
  const run = spawnSync("sh", ["-c", command], { cwd, env: userEnv(), encoding: "utf8", timeout });
  return { status: run.status, out: run.stdout, err: run.stderr };
}

// Packing and installing take a minute or more (several on a cold npm cache): bounds of their own.
const SETUP_TIMEOUT_MS = 600_000;
const EXAMPLES_TIMEOUT_MS = 600_000;

before(
  () => {
    assert.ok(
      existsSync(join(root, "dist", "index.js")),
      "dist/ is missing: run `npm run build` first (npm test does)",
    );
    scratch = mkdtempSync(join(tmpdir(), "rankscope-new-project-"));
    const pack = spawnSync("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", scratch], {
      cwd: root,
      encoding: "utf8",
      timeout: 120_000,
    });
    assert.equal(pack.status, 0, pack.stderr);
    const tarball = readdirSync(scratch).find((f) => f.endsWith(".tgz"));
    assert.ok(tarball !== undefined, `npm pack wrote no tarball: ${pack.stdout}`);
    project = join(scratch, "my-job");
    mkdirSync(project);
    const setup = commands("consumer-setup");
    assert.ok(
      setup.some((c) => c === "npm install rankscope"),
      `the README's setup installs rankscope: ${setup.join("; ")}`,
    );
    // Then what an example needs beyond it (`<!-- example-setup -->`: prom-client for prometheus.ts).
    for (const command of [...setup, ...commands("example-setup")]) {
      // The package is this checkout's tarball, not the registry's. From the cache first; no audit.
      // Install scripts are skipped: better-sqlite3's builds from source where its prebuilt binary
      // cannot be downloaded (minutes), and no README example opens a store.
      const line: string = command.startsWith("npm install")
        ? `${command.replace(/^npm install rankscope$/, `npm install ${join(scratch, tarball)}`)} --prefer-offline --no-audit --no-fund --ignore-scripts`
        : command;
      const done = sh(line, project, 300_000);
      assert.equal(done.status, 0, `${line}:\n${done.out}${done.err}`);
    }
  },
  { timeout: SETUP_TIMEOUT_MS },
);

after(() => {
  if (scratch !== "") rmSync(scratch, { recursive: true, force: true });
});

test("the README names each example's file, as it is in examples/", () => {
  assert.ok(shown.filter((s) => s.output !== undefined).length >= 5, `found ${shown.length} named examples`);
  for (const { name, source, code } of shown) {
    assert.equal(source, `examples/${name}`, `the README shows ${source} as ${name}`);
    assert.equal(readFileSync(join(root, source), "utf8"), code, `the README shows ${source} as it is`);
  }
});

test(
  "in a fresh npm init -y project set up as the README says, every README example runs with each command the README gives and prints what the README shows",
  { timeout: EXAMPLES_TIMEOUT_MS },
  () => {
    for (const { name, code } of shown) {
      mkdirSync(dirname(join(project, name)), { recursive: true });
      writeFileSync(join(project, name), code);
    }
    const stripsTypes = Reflect.get(process.features, "typescript") !== undefined;
    const run = commands("consumer-run");
    assert.ok(run.length >= 2, `the README gives ${run.length} commands to run an example`);
    let ran = 0;
    for (const command of run) {
      assert.match(command, /\bquickstart\.ts$/, `the README's run command names the quickstart: ${command}`);
      if (command.startsWith("node ") && !stripsTypes) continue; // Node 20: the README says npx tsx
      for (const { name, output } of shown) {
        if (output === undefined) continue;
        const line = command.replace(/quickstart\.ts$/, name);
        const done = sh(line);
        assert.equal(done.status, 0, `${line}:\n${done.err}`);
        assert.equal(done.out, output, `${line} prints what the README shows`);
        ran++;
      }
    }
    // The README's claim: Node 22.18 and later, and 24, run `node quickstart.ts` (20 does not).
    const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
    assert.equal(stripsTypes, major >= 24 || (major === 22 && minor >= 18), `Node ${process.version}`);
    const examples = shown.filter((s) => s.output !== undefined).length;
    assert.equal(ran, examples * run.filter((c) => stripsTypes || !c.startsWith("node ")).length);
  },
);

test("a project that stays CommonJS runs the quickstart as .mts, as the README says, where .ts stops at top-level await", () => {
  const cjs = join(project, "stays-commonjs");
  mkdirSync(cjs);
  writeFileSync(join(cjs, "package.json"), JSON.stringify({ type: "commonjs" }));
  const quickstart = shown.find((s) => s.name === "quickstart.ts");
  assert.ok(quickstart !== undefined && quickstart.output !== undefined);
  writeFileSync(join(cjs, "quickstart.ts"), quickstart.code);
  writeFileSync(join(cjs, "quickstart.mts"), quickstart.code);
  assert.match(readme, /npx tsx quickstart\.mts/);
  const mts = sh("npx tsx quickstart.mts", cjs);
  assert.equal(mts.status, 0, mts.err);
  assert.equal(mts.out, quickstart.output);
  const ts = sh("npx tsx quickstart.ts", cjs);
  assert.notEqual(ts.status, 0);
  assert.match(ts.err, /Top-level await is currently not supported with the "cjs" output format/);
});

test("the dashboard `npx rankscope ui` started (the README's command) stops serving when that npx process is stopped by its pid", async () => {
  assert.match(readme, /npx rankscope ui --root runs/);
  mkdirSync(join(project, "runs"), { recursive: true });
  // Its own process group, so that whatever the test leaves can be killed at the end.
  const npx = spawn("npx", ["rankscope", "ui", "--root", "runs", "--port", "0"], {
    cwd: project,
    env: userEnv(),
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let out = "";
  npx.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
  npx.stderr.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
  const serving = async (url: string): Promise<boolean> => {
    try {
      return (await fetch(`${url}api/runs`, { signal: AbortSignal.timeout(5000) })).ok;
    } catch {
      return false;
    }
  };
  try {
    const url = await waitFor(() => /rankscope dashboard: (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out)?.[1], {
      timeoutMs: 60_000,
      what: "rankscope ui to print its URL",
    });
    assert.ok(await serving(url), `the dashboard at ${url} answers`);
    npx.kill("SIGTERM");
    await waitFor(async () => !(await serving(url)), {
      timeoutMs: 30_000,
      what: `the dashboard at ${url} to stop once the npx process (pid ${npx.pid}) was stopped`,
    });
  } finally {
    try {
      if (npx.pid !== undefined) process.kill(-npx.pid, "SIGKILL");
    } catch {
      // The group is gone: nothing was left running.
    }
  }
});
