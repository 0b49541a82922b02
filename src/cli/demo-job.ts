/**
 * The demo job: a small distributed job, 2 replicas × 2 ranks (child processes by default), run by
 * a controller in this process.
 *
 * Part 1 (the design's seed 001 §2): each rank records its local rank with SUM twice, flushed once per
 * logging mode (`global_reduce` prints 4.0; `per_rank_reduce` 0.0 and 2.0 per replica;
 * `per_rank_no_reduce` the raw stream). Part 2 is a toy RL loop recording with every reduction,
 * merged across the ranks into the backends of `DEMO_BACKENDS`, and it fills every face the
 * dashboard shows: global and per-rank lines, a raw stream, samples and histograms (the store),
 * the system monitor (its own axis), `config.yaml`, `version.json` and the run's tags and group,
 * a perf trace per rank (`traces/rank-{r}.jsonl`) and of the controller (`traces/controller.jsonl`),
 * TensorBoard event files (`tensorboard/`), and text logs from the controller and every rank
 * (`logs/main.log`, `logs/merged.log`).
 */
import { LOGGING_MODES } from "../core/metric.js";
import { packageModule } from "../core/module-worker.js";
import type { BackendsConfig } from "../pipeline/config.js";
import { getOrCreateMetricLogger } from "../controller/metric-logger.js";
import { SystemMonitor } from "../system/monitor.js";
import { getLogger } from "../textlog/logger.js";
import { savePerfTracer, traceScope } from "../trace/perf-tracer.js";
import { spawnRanks } from "../transport/controller/launcher.js";

/**
 * Where the demo's part 2 logs to: add backends here. The store three times: the values reduced
 * across ranks, each rank's own line, and each rank's raw values (the dashboard's Streams tab);
 * TensorBoard's event files beside it (`tensorboard --logdir {run}/tensorboard`).
 */
const DEMO_BACKENDS: BackendsConfig = {
  console: { loggingMode: "global_reduce" },
  tensorboard: { loggingMode: "global_reduce" },
  store: { loggingMode: "global_reduce" },
  store_per_rank: { type: "store", loggingMode: "per_rank_reduce" },
  store_stream: { type: "store", loggingMode: "per_rank_no_reduce" },
};

/** The demo's run config (`config.yaml`, the dashboard's Config tab and runs table). */
const DEMO_RUN_CONFIG = {
  algorithm: "toy-rl",
  model: { name: "tiny-policy", layers: 4, hidden: 256 },
  optimizer: { name: "adam", lr: 3e-4, betas: [0.9, 0.999] },
  rollout: { episodesPerRank: 8, maxTokens: 128 },
};

/** Options of the demo. */
interface DemoOptions {
  /** Steps of part 2. */
  steps: number;
  /** Ranks as child processes (default) or worker threads. */
  kind?: "process" | "thread";
  /** Carry the messages over this NATS server instead of IPC (child processes only). */
  natsUrl?: string;
}

/** The demo's rank module: `dist/cli/demo-rank.js`, the `.ts` under `src/` when running from source. */
function demoRankModule(): URL {
  return packageModule("cli/demo-rank");
}

function heading(text: string): void {
  process.stdout.write(`\n# ${text}\n\n`);
}

export async function runDemo(options: DemoOptions): Promise<void> {
  const kind = options.kind ?? "process";
  const logger = await getOrCreateMetricLogger({ processName: "Controller" });
  let monitor: SystemMonitor | undefined;
  try {
    // Loaded only when asked for, like any user of the NATS carrier would.
    const nats =
      options.natsUrl === undefined
        ? undefined
        : await (await import("../transport/controller/nats.js")).serveRanksOverNats({ url: options.natsUrl, logger });
    const actors = await spawnRanks({
      module: demoRankModule(),
      replicas: 2,
      ranksPerReplica: 2,
      kind: nats === undefined ? kind : "process",
      processName: "MyActor",
      logger,
      output: "ordered",
      ...(nats === undefined ? {} : { nats }),
    });
    const carrier =
      nats !== undefined
        ? `child processes over NATS (${nats.url}, run ${nats.runId})`
        : kind === "process"
          ? "child processes"
          : "worker threads";
    process.stdout.write(
      `rankscope demo: ${actors.rankNames.length} ranks as ${carrier}: ${actors.rankNames.join(", ")}\n`,
    );
    let step = 0;

    for (const loggingMode of LOGGING_MODES) {
      heading(`logging_mode ${loggingMode}: each rank records its local rank (0 or 1) with SUM, twice`);
      // The demo shows each mode in turn on the same ranks: replacing the backends is asked for.
      await logger.initBackends({ console: { loggingMode } }, { replace: step > 0 });
      for (let i = 0; i < 2; i++) await actors.fanout("myFn");
      await logger.flush(step++);
      // Stream lines reach the console from each rank's writer thread: wait for them, then print.
      if (loggingMode === "per_rank_no_reduce") await actors.fanout("drainStream");
      await actors.syncOutput();
    }

    heading(`a toy RL job: every reduction, merged across the ${actors.rankNames.length} ranks (global_reduce)`);
    await logger.initBackends(DEMO_BACKENDS, {
      runConfig: { ...DEMO_RUN_CONFIG, steps: options.steps },
      tags: ["demo", "toy-rl"],
      group: "demo",
      replace: true,
    });
    // Sampled at every step here, not on timers, so a short demo still has a system chart.
    monitor = new SystemMonitor({ logger, gpus: false, label: "demo" });
    const log = getLogger("Trainer");
    for (let s = 0; s < options.steps; s++) {
      await traceScope("train.step", { category: "compute", args: { step: s } }, async () => {
        await actors.fanout("rollout", s);
        const flushed = await logger.flush(step);
        const loss = flushed.metrics.find((m) => m.key === "train/loss")?.value;
        log.info({ step, loss, ranks: `${flushed.ranksReporting}/${flushed.ranksExpected}` }, "step done");
        step++;
      });
      await monitor.sample();
      await monitor.flush();
      await actors.syncOutput();
    }
  } finally {
    await monitor?.stop();
    await savePerfTracer();
    await logger.shutdown();
  }
}
