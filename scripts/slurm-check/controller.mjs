// The controller of scripts/slurm-check.sh (copied into the job's project as controller.js): it
// serves the rack agents of docs/scale.md's three-level Slurm example, opens each step once every
// rank has joined (the ranks and this process share the job's directory, sync/), flushes once
// every rank recorded it, and writes what each flush returned to sync/result.json. Rank r records
// r + s at step s under MEAN (loss) and SUM (tokens). With CHECK_KILL_AFTER=k, after the flush of
// step k it asks the check script to kill rack1's agent (sync/kill) and goes on once it is killed.
import { getOrCreateMetricLogger } from "rankscope";
import { serveHostsOverNats } from "rankscope/host";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";

const STEPS = Number(process.env.CHECK_STEPS ?? 4);
const KILL_AFTER = Number(process.env.CHECK_KILL_AFTER ?? -1);
const url = process.env.RANKSCOPE_NATS_URL;
mkdirSync("sync", { recursive: true });
const runDir = `${process.cwd()}/runs/${process.env.RANKSCOPE_RUN_ID}`;
const logger = await getOrCreateMetricLogger({ processName: "Controller", runDir, flushDeadlineMs: 5000 });
await logger.initBackends({ jsonl: { loggingMode: "global_reduce" } });
const hosts = await serveHostsOverNats({ url, logger });
console.log(`controller: serving on ${url}, run ${logger.runId}`);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const deadline = Date.now() + 240_000;
const until = async (what, ok) => {
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`controller: gave up waiting for ${what}`);
    await sleep(200);
  }
};
const files = (prefix) => readdirSync("sync").filter((f) => f.startsWith(prefix));

// The world size, from the first rank that joined (its SLURM_NTASKS).
let world = 0;
await until("a rank to join", () => {
  const [first] = files("joined-");
  if (first !== undefined) world = Number(readFileSync(`sync/${first}`, "utf8"));
  return world > 0;
});
// Flush (nothing recorded yet) until every rank answers through the tree.
let step = 0;
await until("every rank to answer through the tree", async () => {
  const r = await logger.flush(step++);
  console.log(`controller: warm-up flush(${r.step}): ${r.ranksReporting} of ${r.ranksExpected} ranks (world ${world})`);
  return r.ranksExpected === world && r.ranksReporting === world;
});
const served = hosts.hostIds.sort();
const places = served.map((id) => {
  const handle = hosts.host(id);
  const hostList = handle?.memberHostList() ?? [];
  return { id, ranks: (handle?.memberRanks() ?? []).map((rank, i) => `${rank}@${hostList[i]}`) };
});
for (const { id, ranks } of places) console.log(`controller: serves ${id}: ${ranks.join(" ")}`);

const flushes = [];
let previousComplete = true;
const logFlush = (r, s) => {
  const value = (key) => r.metrics.find((m) => m.key === key)?.value;
  const complete = r.ranksReporting === world && r.missingRanks.length === 0;
  const want =
    s === undefined ? undefined : { loss: (world - 1) / 2 + s, tokens: (world * (world - 1)) / 2 + world * s };
  // A complete flush after a complete one holds exactly the step's values; after an incomplete one it
  // also holds the values carried from it.
  const exact = complete && previousComplete && want !== undefined;
  previousComplete = complete;
  flushes.push({
    step: r.step,
    s,
    complete,
    exact,
    missing: r.missingRanks,
    loss: value("loss"),
    tokens: value("tokens"),
    want,
  });
  console.log(
    `controller: flush(${r.step}): ${r.ranksReporting}/${r.ranksExpected} ranks, missing [${r.missingRanks.join(",")}], loss ${value("loss")}, tokens ${value("tokens")}` +
      (want === undefined ? "" : ` (recorded: loss ${want.loss}, tokens ${want.tokens})`),
  );
};
for (let s = 0; s < STEPS; s++) {
  writeFileSync(`sync/go-${s}`, "");
  await until(`step ${s} recorded by every rank`, () => files(`done-${s}-`).length === world);
  logFlush(await logger.flush(step++), s);
  writeFileSync(`sync/flushed-${s}`, "");
  if (s === KILL_AFTER) {
    writeFileSync("sync/kill", "");
    await until("rack1's agent to be killed", () => existsSync("sync/killed"));
  }
}
// Values a flush did not get (ranks named missing) come with a later one: flush until complete.
for (let extra = 0; !previousComplete && extra < 10; extra++) logFlush(await logger.flush(step++), undefined);
writeFileSync(
  "sync/result.json",
  JSON.stringify({ world, steps: STEPS, served, places, flushes, stats: hosts.stats }, null, 1),
);
await logger.shutdown();
console.log("controller: shut down");
