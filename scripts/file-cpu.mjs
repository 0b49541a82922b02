// Preloaded into every test file's process when RANKSCOPE_TEST_CPU=FILE is set (scripts/test.sh):
// at exit, appends one line to FILE: the CPU seconds the file's process used, its own and that of
// the children it waited for (/proc/self/stat utime, stime, cutime, cstime), and the file's name.
// Servers that detach (PostgreSQL's pg_ctl) are not counted. `sort -rn FILE | head` lists the
// files that cost the suite most CPU, which on two cores is what bounds its time. Then the file's
// start and end (seconds since the epoch, to the millisecond): laid side by side they show where in
// the run the slots waited (`node scripts/file-timeline.mjs FILE`).
import { appendFileSync, readFileSync } from "node:fs";
import { relative } from "node:path";

const out = process.env.RANKSCOPE_TEST_CPU;
const file = process.argv[1] ?? "";
if (out && /\.test\.[cm]?ts$/.test(file)) {
  const startedAt = (performance.timeOrigin / 1000).toFixed(3);
  process.on("exit", () => {
    const fields = readFileSync("/proc/self/stat", "utf8").split(") ")[1]?.split(" ") ?? [];
    const ticks = [11, 12, 13, 14].reduce((sum, i) => sum + Number(fields[i] ?? 0), 0);
    const endedAt = (Date.now() / 1000).toFixed(3);
    appendFileSync(
      out,
      `${(ticks / 100).toFixed(1).padStart(7)} ${relative(process.cwd(), file)} ${startedAt} ${endedAt}\n`,
    );
  });
}
