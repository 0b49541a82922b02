// The TypeScript loader of the tests: scripts/test.sh runs every test file under
// `node --import ./scripts/ts-loader.mjs`, and tests start their TypeScript children with it
// (test/helpers.ts, TS_LOADER). The hooks are in scripts/ts-loader-hooks.mjs. Why not tsx, which
// the tests used before: its loader costs each process about 0.4–0.6 s of CPU more, and the suite
// starts some 250 of them (CONTRIBUTING.md, "How long the suite takes"). Workers that run
// TypeScript still register tsx themselves (src/core/module-worker.ts), as a user's would.
import module from "node:module";

if (typeof module.registerHooks === "function" && typeof module.stripTypeScriptTypes === "function") {
  // Node 22.15 and later: in-thread hooks, Node's own type stripping (lines and columns kept).
  const { syncHooks } = await import("./ts-loader-hooks.mjs");
  module.registerHooks(syncHooks());
} else {
  // Node 20: off-thread hooks, esbuild's output with an inline source map that stack traces follow.
  process.setSourceMapsEnabled(true);
  module.register("./ts-loader-hooks.mjs", import.meta.url);
}
