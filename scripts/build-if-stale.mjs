// `npm run demo` builds first, but only when the build is missing or older
// than a source: the newest mtime under src/ and the build configs against the oldest of the
// build's outputs (tsc rewrites every output on each build; vite empties dist/ui/web). A fresh
// clone has no dist/, so `npm install && npm run demo` still builds.
import { spawnSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const SOURCES = ["src", "tsconfig.json", "tsconfig.build.json", "package.json", "scripts/bundle.mjs"];
const OUTPUTS = ["dist/index.js", "dist/cli/main.js", "dist/ui/web/index.html"];

function newest(path) {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let max = stat.mtimeMs;
  for (const entry of readdirSync(path)) max = Math.max(max, newest(join(path, entry)));
  return max;
}

function oldestOutput() {
  let min = Infinity;
  for (const out of OUTPUTS) {
    try {
      min = Math.min(min, statSync(join(root, out)).mtimeMs);
    } catch {
      return -Infinity; // missing: build
    }
  }
  return min;
}

const sources = Math.max(...SOURCES.map((s) => newest(join(root, s))));
if (oldestOutput() < sources) {
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const build = spawnSync(npm, ["run", "build", "--silent"], { cwd: root, stdio: "inherit" });
  process.exit(build.status ?? 1);
}
