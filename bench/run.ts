/**
 * `npm run bench`: runs every `bench/*.bench.ts` in its own process (so one benchmark's garbage and
 * JIT state cannot skew another's), in name order, and prints their tables. Pass names to run only
 * some: `npm run bench -- core stream`.
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const only = process.argv.slice(2);
const files = readdirSync(here)
  .filter((f) => f.endsWith(".bench.ts"))
  .filter((f) => only.length === 0 || only.includes(f.replace(/\.bench\.ts$/, "")))
  .sort();

let failed = 0;
for (const file of files) {
  process.stdout.write(`\n## ${file.replace(/\.bench\.ts$/, "")}\n\n`);
  const result = spawnSync(
    process.execPath,
    ["--expose-gc", "--max-semi-space-size=128", "--import", "tsx", join(here, file)],
    { stdio: "inherit" },
  );
  if (result.status !== 0) {
    failed++;
    process.stdout.write(`(${file} exited with ${String(result.status ?? result.signal)})\n`);
  }
}
process.exitCode = failed > 0 ? 1 : 0;
