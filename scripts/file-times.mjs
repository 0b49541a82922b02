// A node:test reporter: each test file's time, the sum of its top-level tests' durations, longest
// first, in seconds. scripts/test.sh adds it when RANKSCOPE_TEST_TIMES names a file to write
// (`RANKSCOPE_TEST_TIMES=times.txt npm test`); scripts/slow-tests.txt is ordered from it.
export default async function* fileTimes(source) {
  const perFile = new Map();
  for await (const event of source) {
    if (event.type !== "test:pass" && event.type !== "test:fail") continue;
    const { data } = event;
    if (data.nesting !== 0 || typeof data.file !== "string") continue;
    const file = data.file.startsWith(process.cwd() + "/") ? data.file.slice(process.cwd().length + 1) : data.file;
    perFile.set(file, (perFile.get(file) ?? 0) + (data.details?.duration_ms ?? 0));
  }
  const rows = [...perFile].sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((sum, [, ms]) => sum + ms, 0);
  for (const [file, ms] of rows) yield `${(ms / 1000).toFixed(1).padStart(7)} ${file}\n`;
  yield `${(total / 1000).toFixed(1).padStart(7)} in all (${rows.length} files)\n`;
}
