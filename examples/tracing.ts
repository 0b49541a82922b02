// Tracing: step timers as metrics (Forge), a per-rank perf trace for Perfetto and rollout
// sessions (AReaL). Run it, then: rankscope traces merge <the run directory it prints>
import { getOrCreateMetricLogger, SessionTracer, traceScope, Tracer, savePerfTracer } from "rankscope";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const logger = await getOrCreateMetricLogger({ processName: "Trainer", experiment: "tracing-example" });
await logger.initBackends({ console: { loggingMode: "global_reduce" } });
const sessions = new SessionTracer({ flushThreshold: 4 });

for (let step = 0; step < 2; step++) {
  await traceScope("train.step", { category: "compute", args: { step } }, async () => {
    // Rollout: four sessions of one task, generated concurrently (each gets its own trace row).
    const task = sessions.registerTask();
    await traceScope("rollout", { category: "scheduler" }, () =>
      Promise.all(
        [0, 1, 2, 3].map(async (i) => {
          const session = sessions.registerSession(task);
          await traceScope("generate", { category: "compute" }, () =>
            sessions.tracePhase(session, "generate", () => sleep(10 + 5 * i)),
          );
          sessions.addCounter(session, "tokens", 100 + i);
          sessions.finalize(session, i === 3 ? "rejected" : "accepted", i === 3 ? "reward below threshold" : undefined);
        }),
      ),
    );

    // Training: a Tracer records durations as metrics.
    const t = new Tracer("train", { trackMemory: true });
    t.start();
    await traceScope("forward", { category: "compute" }, () => sleep(5));
    t.step("forward");
    await traceScope("allreduce", { category: "comm" }, () => sleep(3));
    t.step("allreduce");
    t.stop();
  });
  await logger.flush(step);
}

await savePerfTracer();
await sessions.save();
await logger.shutdown();
console.log(`traces in ${logger.run.runDir}/traces, sessions in ${logger.run.runDir}/sessions`);
