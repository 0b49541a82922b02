// The build's last step for the JavaScript (`npm run build`, after tsc): dist/'s ES modules, one
// file per source file, become a bundle with the same entry points, so that `import("rankscope")`
// opens two files instead of 130: the loader's per-file work was most of the import's time
// (BENCHMARKS.md, "Install and import"; DESIGN.md, "Import time").
//
// - Every entry point keeps its path under dist/: the package's exports and its bin (from
//   package.json), the modules rankscope starts by URL (`packageModule` in
//   src/core/module-worker.ts) and the host agent's process, listed below.
// - Everything `dist/index.js` imports statically is one chunk, dist/chunks/core-*.js: whichever
//   entry a process loads first (`rankscope`, `rankscope/nats`, a rank's entry, the CLI), there is
//   one collector, one controller, one of each process-wide thing. Importing any of it loads all of
//   it, as `import "rankscope"` does.
// - The rest splits as usual: each `import()` inside rankscope (a backend, the dashboard, the CLI's
//   commands) is loaded on first use, with what only it needs.
// - The worker threads rankscope starts on its own modules (the store's writer, the live sync, the
//   stream's writer and its file thread) are one file each: a worker is a thread of its own, with
//   its own module instances, so it shares nothing with the rest and loads nothing it does not run.
// - Packages stay outside: npm installs them and Node resolves them. No minifying: names and stack
//   traces stay as written. The .d.ts files from tsc stay as they are; dist/ui/web (vite) is not touched.
import { rollup } from "rollup";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const dist = join(root, "dist");

/**
 * Modules started by URL that run beside the user's code (a rank process or thread imports rankscope
 * too), and the host and rack agents' processes (`node node_modules/rankscope/dist/transport/host/main.js`,
 * `…/transport/rack/main.js`, docs/scale.md).
 */
const RANK_ENTRIES = ["transport/rank/rank-entry", "cli/demo-rank", "transport/host/main", "transport/rack/main"];
/** Worker threads on rankscope's own modules only: one file each. */
const WORKERS = ["backends/store/writer-worker", "sync/sync-worker", "stream/writer", "stream/file-thread"];

const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const exported = Object.values(pkg.exports)
  .map((target) => (typeof target === "string" ? target : target.default))
  .filter((target) => target.endsWith(".js"));
const targets = [...exported, ...Object.values(pkg.bin)].map((p) => p.replace(/^\.\/dist\//, "").replace(/\.js$/, ""));
const input = (names) => Object.fromEntries(names.map((name) => [name, join(dist, `${name}.js`)]));
for (const name of [...targets, ...RANK_ENTRIES, ...WORKERS])
  if (!statSync(join(dist, `${name}.js`), { throwIfNoEntry: false })?.isFile())
    throw new Error(`bundle: no dist/${name}.js (tsc's output)`);

/** A package or a Node.js built-in: left to Node. */
const external = (id) => !id.startsWith(".") && !isAbsolute(id);
const onwarn = (warning, warn) => {
  if (warning.code !== "CIRCULAR_DEPENDENCY") warn(warning);
};
const staging = join(dist, ".bundle");
rmSync(staging, { recursive: true, force: true });

const main = await rollup({
  input: input([...new Set([...targets, ...RANK_ENTRIES])]),
  external,
  onwarn,
  preserveEntrySignatures: "strict",
});
const indexId = join(dist, "index.js");
let core;
await main.write({
  dir: staging,
  format: "es",
  entryFileNames: "[name].js",
  chunkFileNames: "chunks/[name]-[hash].js",
  manualChunks(id, { getModuleInfo }) {
    if (core === undefined) {
      core = new Set();
      const visit = (m) => {
        if (core.has(m)) return;
        core.add(m);
        for (const next of getModuleInfo(m)?.importedIds ?? []) if (!external(next)) visit(next);
      };
      visit(indexId);
      core.delete(indexId);
    }
    return core.has(id) ? "core" : undefined;
  },
});
await main.close();

for (const name of WORKERS) {
  const worker = await rollup({ input: input([name]), external, onwarn });
  await worker.write({ dir: staging, format: "es", entryFileNames: "[name].js", inlineDynamicImports: true });
  await worker.close();
}

/** The .js files under dir, dist/ui/web (vite's app) and the staging folder aside. */
function compiled(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return path === join(dist, "ui", "web") || path === staging ? [] : compiled(path);
    return entry.name.endsWith(".js") ? [path] : [];
  });
}
for (const path of compiled(dist)) rmSync(path);
for (const path of compiled(staging)) {
  const target = join(dist, relative(staging, path));
  mkdirSync(dirname(target), { recursive: true });
  renameSync(path, target);
}
rmSync(staging, { recursive: true, force: true });
