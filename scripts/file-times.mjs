// A node:test reporter: each test file's time, the sum of its top-level tests' durations, longest
// first, in seconds, written to the file RANKSCOPE_TEST_TIMES names (scripts/test.sh adds this
// reporter when it is set: `RANKSCOPE_TEST_TIMES=times.txt npm test`). The file is rewritten after
// each top-level test, synchronously, so an interrupted run still leaves the times it had.
import { writeFileSync } from "node:fs";

export default async function* fileTimes(source) {
  const out = process.env.RANKSCOPE_TEST_TIMES;
  const perFile = new Map();
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const { data } = event;
    if (data.nesting !== 0 || typeof data.file !== "string" || !out) continue;
    const file = data.file.startsWith(process.cwd() + "/") ? data.file.slice(process.cwd().length + 1) : data.file;
    perFile.set(file, (perFile.get(file) ?? 0) + (data.details?.duration_ms ?? 0));
    const rows = [...perFile].sort((a, b) => b[1] - a[1]);
    const total = rows.reduce((sum, [, ms]) => sum + ms, 0);
    const lines = rows.map(([f, ms]) => `${(ms / 1000).toFixed(1).padStart(7)} ${f}\n`);
    writeFileSync(out, `${lines.join("")}${(total / 1000).toFixed(1).padStart(7)} in all (${rows.length} files)\n`);
  }
  yield "";
}
