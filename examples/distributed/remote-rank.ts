// A rank started by anything (ssh, a scheduler): the controller's address comes from the environment.
import { joinRun, recordMetric, Reduce } from "rankscope";

const connection = await joinRun({ processName: "Worker" }); // RANKSCOPE_NATS_URL, RANKSCOPE_RUN_ID, RANKSCOPE_RUN_SECRET, RANK
console.log(`joined as ${connection.identity.rankName}`);
const work = setInterval(() => recordMetric("worker/heartbeat", 1, Reduce.SUM), 100);
console.log(`left the run: ${await connection.closed}`); // the controller shut down
clearInterval(work);
