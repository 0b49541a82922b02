// A controller serving ranks on other machines through a NATS server.
// Every message is sealed with the run secret: make one and give it to both sides' environment
// (never a command line):  export RANKSCOPE_RUN_SECRET="$(openssl rand -base64 32)"
// Start nats-server, run this, then on any machine (with the same RANKSCOPE_RUN_SECRET exported):
//   RANKSCOPE_NATS_URL=nats://<host>:4222 RANKSCOPE_RUN_ID=<printed id> RANK=0 node remote-rank.js
import { getOrCreateMetricLogger } from "rankscope";
import { serveRanksOverNats } from "rankscope/nats";

const url = process.env["RANKSCOPE_NATS_URL"] ?? "nats://127.0.0.1:4222";
const mlogger = await getOrCreateMetricLogger({ processName: "Controller" });
await mlogger.initBackends({ console: { loggingMode: "global_reduce" } });
const server = await serveRanksOverNats({ url, logger: mlogger });
console.log(`serving ranks on ${url}, run id ${mlogger.runId}`);

for (let step = 0; step < 10; step++) {
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const result = await mlogger.flush(step);
  console.log(
    `step ${step}: ${result.ranksReporting} of ${result.ranksExpected} collectors reported (${server.rankNames.join(", ") || "no remote ranks yet"})`,
  );
}
await mlogger.shutdown();
