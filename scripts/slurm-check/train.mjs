// A rank of scripts/slurm-check.sh (copied into the job's project as train.js): it joins its host
// agent (RANKSCOPE_HOST_ID), and at each step the controller opens (sync/go-<s>) records rank + s
// under MEAN and SUM, says so (sync/done-<s>-<rank>) and waits for that step's flush.
import { joinRun, recordMetric, Reduce } from "rankscope";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";

const STEPS = Number(process.env.CHECK_STEPS ?? 4);
const connection = await joinRun({ processName: "Train" });
const { rank, rankName, localRank, localWorldSize } = connection.identity;
console.log(
  `rank ${rank} (${rankName}, local ${localRank} of ${localWorldSize}) joined host agent ${process.env.RANKSCOPE_HOST_ID}`,
);
mkdirSync("sync", { recursive: true });
writeFileSync(`sync/joined-${rank}`, String(process.env.SLURM_NTASKS));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
for (let s = 0; s < STEPS; s++) {
  while (!existsSync(`sync/go-${s}`)) await sleep(100);
  recordMetric("loss", rank + s, Reduce.MEAN);
  recordMetric("tokens", rank + s, Reduce.SUM);
  writeFileSync(`sync/done-${s}-${rank}`, "");
  while (!existsSync(`sync/flushed-${s}`)) await sleep(100);
}
console.log(`rank ${rank}: left the run: ${await connection.closed}`);
