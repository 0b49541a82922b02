/**
 * What a user pays before recording anything (issue 35, "Pay for what you use"):
 *
 * - `import("rankscope")` in a fresh process, against `import("pino")` and `import("prom-client")`
 *   measured the same way in the same run, round-robin so a busy machine slows all three alike:
 *   every spawned rank pays it. The time is the import alone (Node's own start-up excluded).
 * - With `RANKSCOPE_BENCH_INSTALL=1`: `npm install` of the packed tarball into an empty project
 *   (needs the npm registry; better-sqlite3 downloads its prebuilt binary or compiles), counting the
 *   packages (`npm ls --all`) and the disk used by node_modules (`du`), what the biggest take.
 *
 * Run: `npm run bench -- import`, or `RANKSCOPE_BENCH_INSTALL=1 npm run bench -- import`;
 * `RANKSCOPE_BENCH_PROJECT=DIR` imports from a project where rankscope is installed instead;
 * `RANKSCOPE_BENCH_TARBALL=FILE` installs that tarball (another commit's `npm pack`) instead of
 * packing this checkout; `RANKSCOPE_BENCH_IGNORE_SCRIPTS=1` installs with `--ignore-scripts`
 * (better-sqlite3 12's script compiles for minutes where GitHub, which has its prebuilt binaries,
 * cannot be reached). Sizes are `du -sb` (bytes in the files, whatever the file system's blocks).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { median, printTable } from "./harness.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const ROUNDS = Number(process.env["RANKSCOPE_BENCH_ROUNDS"] ?? 21);
/** Where the imports run: this checkout (rankscope resolves to its dist/), or an installed project. */
const importCwd = process.env["RANKSCOPE_BENCH_PROJECT"] ?? root;
const SUBJECTS = ["rankscope", "pino", "prom-client"] as const;

/**
 * Wall-clock and CPU milliseconds of `import(spec)` in a fresh Node process started in `cwd`. CPU
 * time (the process's user + system) is the steadier figure on a shared machine: another process
 * running slows the wall clock, not the work.
 */
function importMs(spec: string, cwd: string): { wall: number; cpu: number } {
  const code = `const c = process.cpuUsage(); const t = performance.now(); await import(${JSON.stringify(spec)});
const wall = performance.now() - t; const cpu = process.cpuUsage(c);
process.stdout.write(JSON.stringify({ wall, cpu: (cpu.user + cpu.system) / 1000 }));`;
  const run = spawnSync(process.execPath, ["--input-type=module", "-e", code], {
    cwd,
    encoding: "utf8",
    timeout: 60_000,
  });
  if (run.status !== 0) throw new Error(`import(${spec}) failed: ${run.stderr}`);
  const { wall, cpu } = JSON.parse(run.stdout) as { wall: number; cpu: number };
  return { wall, cpu };
}

/** Files a fresh `import(spec)` evaluates: ES modules (counted by a load hook) and CommonJS ones (require.cache). */
function modulesLoaded(spec: string, cwd: string): number {
  const hook = `data:text/javascript,${encodeURIComponent(
    'export async function load(u, c, n) { if (!u.startsWith("node:")) process.stderr.write("LOADED\\n"); return n(u, c); }',
  )}`;
  const register = `import { register } from "node:module"; register(${JSON.stringify(hook)});`;
  const code = `import { createRequire } from "node:module"; await import(${JSON.stringify(spec)});
const cache = Object.keys(createRequire(import.meta.url).cache);
process.stderr.write(cache.map(() => "CJS\\n").join(""));`;
  const run = spawnSync(
    process.execPath,
    ["--import", `data:text/javascript,${encodeURIComponent(register)}`, "--input-type=module", "-e", code],
    { cwd, encoding: "utf8", timeout: 60_000 },
  );
  const lines = run.stderr.split("\n");
  return lines.filter((l) => l === "CJS" || l === "LOADED").length;
}

const wall = new Map<string, number[]>(SUBJECTS.map((s) => [s, []]));
const cpu = new Map<string, number[]>(SUBJECTS.map((s) => [s, []]));
for (let round = 0; round < ROUNDS; round++)
  for (const spec of SUBJECTS) {
    const ms = importMs(spec, importCwd);
    wall.get(spec)?.push(ms.wall);
    cpu.get(spec)?.push(ms.cpu);
  }
const rankscopeCpu = median(cpu.get("rankscope") ?? []);
printTable(
  [
    "import in a fresh process",
    "median CPU ms",
    "median wall ms",
    "fastest wall ms",
    "rankscope ÷ it (CPU)",
    "files loaded",
  ],
  SUBJECTS.map((spec) => {
    const c = median(cpu.get(spec) ?? []);
    const w = wall.get(spec) ?? [];
    return [spec, c, median(w), Math.min(...w), (rankscopeCpu / c).toFixed(2), modulesLoaded(spec, importCwd)];
  }),
);
process.stdout.write(
  `${ROUNDS} rounds, round-robin; Node ${process.versions.node}. "files loaded": ES modules through the loader plus CommonJS files in require.cache (a CommonJS file imported from ESM counts twice).\n\n`,
);

if (process.env["RANKSCOPE_BENCH_INSTALL"] === "1") install();
else process.stdout.write("Install size: set RANKSCOPE_BENCH_INSTALL=1 (needs the npm registry).\n");

/** `npm install` of the packed tarball into an empty project: packages, disk, the biggest. */
function install(): void {
  const scratch = mkdtempSync(join(tmpdir(), "rankscope-install-"));
  try {
    const given = process.env["RANKSCOPE_BENCH_TARBALL"];
    if (given === undefined)
      execFileSync("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", scratch], { cwd: root });
    const tarball = given ?? readdirSync(scratch).find((f) => f.endsWith(".tgz"));
    if (tarball === undefined) throw new Error("npm pack wrote no tarball");
    const project = join(scratch, "app");
    execFileSync("mkdir", [project]);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
    const started = performance.now();
    const scripts = process.env["RANKSCOPE_BENCH_IGNORE_SCRIPTS"] === "1" ? ["--ignore-scripts"] : [];
    execFileSync("npm", ["install", "--no-audit", "--no-fund", "--silent", ...scripts, resolve(scratch, tarball)], {
      cwd: project,
      stdio: ["ignore", "ignore", "inherit"],
      timeout: 900_000,
    });
    const seconds = (performance.now() - started) / 1000;
    const parseable = execFileSync("npm", ["ls", "--all", "--parseable"], { cwd: project, encoding: "utf8" });
    const packages = parseable.split("\n").filter((line) => line.includes("node_modules")).length;
    const bytes = (path: string): number =>
      Number(execFileSync("du", ["-sb", path], { encoding: "utf8" }).split("\t")[0]);
    const modules = join(project, "node_modules");
    const tops = readdirSync(modules)
      .filter((name) => !name.startsWith("."))
      .flatMap((name) => (name.startsWith("@") ? readdirSync(join(modules, name)).map((s) => `${name}/${s}`) : [name]));
    const biggest = tops
      .map((name) => [name, bytes(join(modules, name))] as const)
      .sort((a, b) => b[1] - a[1])
      .slice(0, 6);
    const totalMb = bytes(modules) / 1e6;
    printTable(
      ["npm install rankscope (empty project)", "packages", "MB (du -sb)", "import ms (installed)"],
      [["core", packages, totalMb, importMs("rankscope", project).wall]],
    );
    printTable(
      ["biggest in node_modules", "MB", "share"],
      biggest.map(([name, size]) => [name, size / 1e6, `${((100 * size) / 1e6 / totalMb).toFixed(0)} %`]),
    );
    process.stdout.write(
      `Node ${process.versions.node}, npm ${execFileSync("npm", ["--version"], { encoding: "utf8" }).trim()}, install took ${seconds.toFixed(0)} s${scripts.length > 0 ? " (--ignore-scripts)" : ""}.\n`,
    );
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
