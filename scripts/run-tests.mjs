// The test run of scripts/test.sh: node:test's runner over the files in the order given, so the
// longest start first (scripts/slow-tests.txt). `node --test FILES` sorts its files by name, which
// put the dashboard's Chromium files (test/ui/…, among the longest) last, to run on an emptying
// machine at the end. Each file runs in its own process with this process's flags (the tests'
// loader, scripts/file-cpu.mjs), as under `node --test`. Prints the spec reporter's lines, and
// with RANKSCOPE_TEST_TIMES each file's time (scripts/file-times.mjs). Exit code 1 when a test
// failed.
//
//   node --import ./scripts/ts-loader.mjs scripts/run-tests.mjs CONCURRENCY TIMEOUT_MS FILE...
import { PassThrough } from "node:stream";
import { run } from "node:test";
import { spec } from "node:test/reporters";
import fileTimes from "./file-times.mjs";

const [concurrency, timeout, ...files] = process.argv.slice(2);
if (!(Number(concurrency) >= 1) || !(Number(timeout) >= 1) || files.length === 0) {
  console.error("usage: node scripts/run-tests.mjs CONCURRENCY TIMEOUT_MS FILE...");
  process.exit(2);
}
const events = run({ files, concurrency: Number(concurrency), timeout: Number(timeout) });
let failed = 0;
events.on("test:fail", (data) => {
  if (data.todo === undefined) failed++;
});
const reporter = events.compose(new spec());
reporter.pipe(process.stdout);
const done = [new Promise((resolve) => reporter.on("end", resolve))];
if (process.env.RANKSCOPE_TEST_TIMES) {
  const times = new PassThrough({ objectMode: true });
  events.on("data", (event) => times.write(event));
  events.on("end", () => times.end());
  done.push(
    (async () => {
      for await (const _ of fileTimes(times));
    })(),
  );
}
await Promise.all(done);
if (failed > 0) process.exitCode = 1;
