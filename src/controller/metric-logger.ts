/**
 * The controller: owns the global backends, knows every rank, and turns `flush(step)` into one
 * merged batch per step.
 *
 * `flush(step)` asks every registered rank for its states (each rank logs its own per-rank
 * backends on the way), merges them key by key, and hands the result to the `global_reduce`
 * backends. A rank that does not answer by the deadline cannot hang it: the flush logs what
 * arrived and says which ranks were missing.
 */
import type { BackendContext } from "../backends/backend.js";
import "../backends/builtin.js";
// The controller merges states of every reduction its ranks may send, stats' avg_min_max included.
import "../stats/reductions.js";
import { getCollector, pendingValues as pendingValuesOf } from "../core/collector.js";
import type { KeyState } from "../core/key-state.js";
import { DEADLINE, withDeadline } from "../core/deadline.js";
import { describeError, warn } from "../core/diagnostics.js";
import { peekProcessWide, setProcessWide } from "../core/process-wide.js";
import { redactRecord } from "../core/redact.js";
import { configureLifecycle, endingBySignal, endingReason, registerDrain, untilTheEnd } from "../core/lifecycle.js";
import type { Metric } from "../core/metric.js";
import { setCurrentRun } from "../run/current.js";
import { releaseUnusedRunLocation, type RunLocation } from "../run/run-dir.js";
import { runHyperparams, validateRunMeta, writeRunFiles } from "../run/run-files.js";
import { runLocationNote } from "./where.js";
import { BackendSet, type BackendDeliveryStats } from "../pipeline/backend-set.js";
import { validateBackendsConfig, type BackendsConfig, type ValidatedBackend } from "../pipeline/config.js";
import { GLOBAL_DISPLAY_NAME } from "../core/rank-identity.js";
import {
  conflictingOptions,
  DEFAULT_BACKENDS,
  resolveLoggerOptions,
  type FlushOptions,
  type FlushResult,
  type InitBackendsOptions,
  type LogDirectOptions,
  type MetricLoggerOptions,
  type ResolvedLoggerOptions,
  type ShutdownOptions,
} from "./logger-options.js";
import { FlushesBeforeInit } from "./before-init.js";
import {
  alertStates,
  answersTiming,
  askRanks,
  droppedKeyStates,
  mergeAnswers,
  rankCountStates,
  describeMissing,
  rankRefs,
} from "./rank-answers.js";
import { LostRanks } from "./lost-ranks.js";
import { StragglerTracker } from "./stragglers.js";
import type { ResolvedStragglerOptions } from "./straggler-options.js";
import type { RankIdentity } from "../core/rank-identity.js";
import { LocalRankHandle, RankRuntime, type RankHandle, type RankInit } from "../pipeline/runtime.js";
import { controllerIdentity } from "../pipeline/current-rank.js";
import { reduceStates } from "../pipeline/reduce-states.js";
import { provideDefaultLogger, type RankController } from "../pipeline/default-logger.js";
import { ControllerAlerts, type AlertStats } from "../alerts/controller-alerts.js";
import type { StragglerInput } from "../alerts/engine.js";

export {
  DEFAULT_BACKENDS,
  GLOBAL_DISPLAY_NAME,
  LOGGER_SETTINGS,
  MAX_FLUSHES_BEFORE_INIT,
  type FlushOptions,
  type FlushResult,
  type InitBackendsOptions,
  type LogDirectOptions,
  type MetricLoggerOptions,
  type ShutdownOptions,
} from "./logger-options.js";
export { DROPPED_KEY_RECORDS_KEY, RANKS_EXPECTED_KEY, RANKS_REPORTING_KEY } from "../core/internal-keys.js";

/** The controller-side logger. Get it with `getOrCreateMetricLogger`. */
export class MetricLogger implements ResolvedLoggerOptions, RankController {
  readonly processName: string;
  readonly run: RunLocation;
  readonly flushDeadlineMs: number;
  readonly shutdownDeadlineMs: number;
  readonly backendDeadlineMs: number;
  /** True when `shutdown()` does not print where the run's data went (`quiet`, `RANKSCOPE_QUIET`). */
  readonly quiet: boolean;
  /** The options this logger was created with (a later `getOrCreateMetricLogger` must not contradict them). */
  readonly options: Readonly<MetricLoggerOptions>;
  /** This run's id in transport messages (see `MetricLoggerOptions.runId`). */
  readonly runId: string;
  /** The `alerts` option as given. */
  readonly alertOptions: MetricLoggerOptions["alerts"];
  /**
   * The secret sealing this run's NATS messages (see `MetricLoggerOptions.runSecret`): hand it to
   * ranks and host agents you start yourself in their environment (`RANKSCOPE_RUN_SECRET`), never
   * on a command line or in a log.
   */
  readonly runSecret: string;
  /** Straggler attribution's options (`MetricLoggerOptions.stragglers`); null when it is off. */
  readonly stragglers: ResolvedStragglerOptions | null;
  /** Straggler attribution across flushes (its chronic window), when on. */
  private readonly stragglerTracker: StragglerTracker | null;
  private readonly ranks = new Map<string, RankHandle>();
  private globalBackends = BackendSet.empty();
  /** Controller-side primaries of per-rank backends with `perRankShareRun` (they create the shared run). */
  private primaryBackends = BackendSet.empty();
  private rankInit: RankInit | null = null;
  private lastStep = -1;
  private closed = false;
  /** Flushes made before `initBackends`: logged, at their own steps, by the first flush after it. */
  private readonly beforeInit = new FlushesBeforeInit();
  private readonly shutdownHooks: Array<() => Promise<void> | void> = [];
  private unregisterDrain: (() => void) | null = null;
  /** Flushes running now (a shutdown lets them log before it finishes the backends). */
  private readonly flushesInFlight = new Set<Promise<FlushResult>>();
  /** The runtime of the controller's own collector (its per-rank backends: `eventBackends`). */
  private readonly ownRuntime: RankRuntime;
  /** This process's own collector, flushed like a rank but never counted as one (it cannot go missing). */
  private readonly ownRank: RankHandle;
  /** Rules judged at every flush and by a watchdog, and the user's `alert()` calls (src/alerts). */
  private readonly alerts: ControllerAlerts;
  /** Ranks lost so far (crashed, or silent over NATS), for the rest of the run. */
  private readonly lost = new LostRanks();

  constructor(options: MetricLoggerOptions = {}) {
    const resolved = resolveLoggerOptions(options);
    this.options = { ...options };
    this.processName = resolved.processName;
    this.run = resolved.run;
    this.flushDeadlineMs = resolved.flushDeadlineMs;
    this.shutdownDeadlineMs = resolved.shutdownDeadlineMs;
    this.backendDeadlineMs = resolved.backendDeadlineMs;
    this.quiet = resolved.quiet;
    this.runId = resolved.runId;
    this.alertOptions = resolved.alertOptions;
    this.alerts = ControllerAlerts.create(options.alerts, this.run);
    this.runSecret = resolved.runSecret;
    this.stragglers = resolved.stragglers;
    this.stragglerTracker = resolved.stragglers === null ? null : new StragglerTracker(resolved.stragglers);
    // A new logger after a shutdown(): recording is logged again, and raw values belong to its steps
    // (the last flushed step + 1 of this run, not of a run before it in this process).
    getCollector().reopen();
    getCollector().step = 0;
    const local = new RankRuntime(controllerIdentity(this.processName));
    this.ownRuntime = local;
    this.ownRank = new LocalRankHandle(local);
    this.ranks.set(local.identity.rankName, this.ownRank);
    setCurrentRun({ ...this.run, identity: local.identity, role: "controller" });
    configureLifecycle({ drainDeadlineMs: options.drainDeadlineMs });
    // The logger is a drain of the process lifecycle (docs/lifecycle.md): at a signal it shuts down
    // (ranks stopped, backends finished, the run marked crashed); at beforeExit without shutdown()
    // it flushes what is left and shuts down with a warning; at exit it counts what it could not log.
    this.unregisterDrain = registerDrain({
      name: "metric logger",
      stage: "logger",
      drain: ({ reason, deadline }) => {
        if (this.closed) return undefined;
        const deadlineMs = Math.max(1, deadline - Date.now() - 100);
        return reason === "beforeExit" ? this.endForgotten(deadlineMs) : this.shutdown({ deadlineMs });
      },
      exit: ({ reason }) => {
        if (this.closed) return;
        this.closed = true;
        releaseUnusedRunLocation(this.run);
        const { keys, values } = pendingValues();
        if (values > 0) {
          warn(
            "exit.unflushed",
            `${reason}: ${values} value(s) in ${keys} key(s) recorded since the last flush were never logged (the process ended without flush(step) and shutdown())`,
          );
        }
      },
    });
  }

  /** Whether `initBackends` has started this logger's backends (a `Logger` facade created later uses them). */
  get backendsStarted(): boolean {
    return this.rankInit !== null;
  }

  /** Names of the registered ranks (this process included). */
  get rankNames(): string[] {
    return [...this.ranks.keys()];
  }

  /**
   * Validate the config and start the backends: `global_reduce` ones here, per-rank ones in every
   * registered rank (and in ranks that register later). With no config, the embedded default.
   * Throws a TypeError for an invalid config before starting anything, and an Error when backends
   * were already initialised, unless `options.replace` asks for that (replacing them in the middle
   * of a run splits its data between two sets of backends, so it is never silent).
   */
  async initBackends<C extends object = BackendsConfig>(
    config?: BackendsConfig<C>,
    options: InitBackendsOptions = {},
  ): Promise<void> {
    this.assertOpen("initBackends");
    if (this.rankInit !== null && options.replace !== true) {
      throw new Error(
        "initBackends() was already called on this logger; to use other backends, call shutdown() first and get a new logger with getOrCreateMetricLogger(), or pass { replace: true } to finish the current backends and start these. (A Logger facade created before calls it too; one created after initBackends() logs to the backends already started.)",
      );
    }
    const validated = await validateBackendsConfig(config ?? DEFAULT_BACKENDS);
    const runMeta = validateRunMeta(options);
    const resumeStep = options.resumeStep ?? 0;
    if (!Number.isInteger(resumeStep) || resumeStep < 0)
      throw new TypeError(`resumeStep must be a non-negative integer, got ${String(resumeStep)}`);
    if (this.rankInit !== null) {
      await this.globalBackends.finish();
      await this.primaryBackends.finish();
    }
    const run = { runDir: this.run.runDir, experiment: this.run.experiment, trial: this.run.trial, resumeStep };
    const global = validated.filter((v) => v.loggingMode === "global_reduce");
    this.globalBackends = await BackendSet.start(
      global,
      (v) => this.globalContext(v, run.resumeStep),
      this.backendDeadlineMs,
    );
    // Alerts are recorded by the global backends that take them (the store), never awaited by a flush.
    this.alerts.recordWith((event) => void this.eventBackends("logAlert").logAlert(event));
    // Forge's primary: a per-rank backend whose ranks share one run gets a controller-side instance
    // that creates it and hands its id to the ranks as primary metadata.
    const shared = validated.filter((v) => v.loggingMode !== "global_reduce" && v.options.perRankShareRun === true);
    this.primaryBackends = await BackendSet.start(
      shared,
      (v) => this.globalContext(v, run.resumeStep),
      this.backendDeadlineMs,
    );
    const perRank: Record<string, Record<string, unknown>> = {};
    // Ranks apply the controller's backend deadline unless the backend has its own, capped at half
    // the flush deadline: a rank logs its per-rank backends before it answers a flush, and a hung
    // one must not make the rank miss the flush (its states would be lost for every backend).
    const rankDeadlineMs = Math.min(this.backendDeadlineMs, Math.max(1, Math.floor(this.flushDeadlineMs / 2)));
    for (const v of validated)
      if (v.loggingMode !== "global_reduce") perRank[v.name] = { deadlineMs: rankDeadlineMs, ...v.options };
    const primaryMetadata = { ...this.globalBackends.metadataForRanks(), ...this.primaryBackends.metadataForRanks() };
    if (resumeStep > 0) this.lastStep = resumeStep - 1;
    const files =
      options.runConfig === undefined && runMeta === undefined
        ? undefined
        : await writeRunFiles(this.run.runDir, {
            ...(options.runConfig === undefined ? {} : { config: options.runConfig }),
            ...(runMeta === undefined ? {} : { meta: runMeta }),
          });
    // The run's config and version info are its hyperparameters in every backend that has them:
    // the global and primary ones here, the per-rank ones through the ranks' init.
    const hyperparams = files !== undefined && options.runConfig !== undefined ? runHyperparams(files) : undefined;
    const rankInit: RankInit = {
      backends: perRank,
      primaryMetadata,
      run,
      ...(hyperparams === undefined ? {} : { hyperparams }),
    };
    this.rankInit = rankInit;
    await Promise.all([...this.ranks.values()].map((r) => r.init(rankInit)));
    if (hyperparams !== undefined) await this.logHyperparams(hyperparams);
  }

  /**
   * Add a rank (from a transport). If backends are already initialised, it receives the per-rank
   * config and primary metadata now (Forge's late registration).
   */
  async registerRank(handle: RankHandle): Promise<void> {
    this.assertOpen("registerRank");
    if (handle.rankName === this.ownRank.rankName && handle !== this.ownRank) {
      throw new TypeError(
        `a rank cannot be named "${handle.rankName}": that is the controller's own name (its processName)`,
      );
    }
    const previous = this.ranks.get(handle.rankName);
    if (previous !== undefined && previous !== handle) {
      warn(
        `rank.reregistered:${handle.rankName}`,
        `rank ${handle.rankName} registered again; the new registration replaces the old one`,
      );
    }
    this.ranks.set(handle.rankName, handle);
    if (this.rankInit !== null) await handle.init(this.rankInit);
  }

  /**
   * Stop expecting a rank (it exited or left). With `handle`, only that registration is removed (a
   * rank that re-registered meanwhile stays). Returns true if a rank was removed.
   */
  deregisterRank(rankName: string, handle?: RankHandle): boolean {
    const current = this.ranks.get(rankName);
    if (current === undefined || (handle !== undefined && current !== handle)) return false;
    return this.ranks.delete(rankName);
  }

  /**
   * A rank was lost: its process or thread ended without being shut down, or (NATS) it fell
   * silent. The transport that saw it has warned; from now on every flush counts it
   * (`rankscope/ranks_lost`, `FlushResult.lostRanks`), the store records it for the dashboard, and
   * the `rank_lost` alert names it (with `host`, when the transport knows it) until it is back.
   */
  rankLost(identity: RankIdentity, reason: string, host?: string): void {
    const loss = this.lost.lose(identity, reason, this.lastStep >= 0 ? this.lastStep : null, host);
    if (loss !== undefined && !this.closed) void this.eventBackends("logRankLoss").logRankLoss(loss);
  }

  /** A lost rank answered again (a silent NATS rank): no longer counted as lost. */
  rankBack(identity: RankIdentity): void {
    const back = this.lost.back(identity, this.lastStep >= 0 ? this.lastStep : null);
    if (back !== undefined && !this.closed) void this.eventBackends("logRankLoss").logRankLoss(back);
  }

  /**
   * The backends that keep the run's events (alerts, rank losses): the global ones when one does,
   * else the controller's own per-rank ones (a `per_rank_reduce` or `per_rank_no_reduce` store
   * writes the same run file), so the dashboard marks them whatever the store's mode.
   */
  private eventBackends(method: "logAlert" | "logRankLoss"): BackendSet {
    if (this.globalBackends.takes(method)) return this.globalBackends;
    return this.ownRuntime.eventBackends(method) ?? this.globalBackends;
  }

  /** What the alerts did since the logger started: firings, resolves, suppressed, user alerts, the webhook's counts. */
  alertStats(): AlertStats {
    return this.alerts.stats();
  }

  /**
   * Flush every rank at `step`: per-rank backends log their rank's values, and the merged values
   * go to the `global_reduce` backends. Returns by the flush deadline even if ranks do not answer.
   * Once the process is ending by a signal rankscope drains, it logs nothing and never returns.
   */
  async flush(step: number, options: FlushOptions = {}): Promise<FlushResult> {
    if (this.parkedWhileEnding("flush")) return untilTheEnd();
    const flushing = this.flushRanks(step, options);
    this.flushesInFlight.add(flushing);
    try {
      return await flushing;
    } finally {
      this.flushesInFlight.delete(flushing);
    }
  }

  private async flushRanks(step: number, options: FlushOptions): Promise<FlushResult> {
    this.assertOpen("flush");
    if (!Number.isInteger(step) || step < 0)
      throw new TypeError(`flush(step) takes a non-negative integer step, got ${String(step)}`);
    if (step < this.lastStep || (step === this.lastStep && options.allowRepeatedStep !== true)) {
      warn(
        "flush.stepNotIncreasing",
        `flush(${step}) after flush(${this.lastStep}): steps should increase; the values are logged at step ${step} as asked`,
      );
    }
    this.lastStep = Math.max(this.lastStep, step);
    const answers = await askRanks([...this.ranks.values()], this.ownRank, step, this.flushDeadlineMs);
    const { snapshots, missing, ranksExpected, ranksReporting } = answers;
    if (missing.length > 0) {
      warn(
        // One code per set of missing ranks: a rank lost an hour later is printed again, not just counted.
        `flush.missingRanks:${missing.join(",")}`,
        `flush(${step}): ${missing.length} of ${ranksExpected} ranks did not answer within ${this.flushDeadlineMs} ms (${describeMissing(missing, this.ranks)}); logged what arrived`,
      );
    }
    const timestamp = Date.now();
    const target = { step, timestamp };
    const stragglers = this.stragglerTracker?.observe(step, timestamp, answersTiming(answers, this.ownRank));
    // What ranks logged on axes of their own since the last flush (a rank's system monitor).
    for (const snapshot of snapshots) {
      for (const log of snapshot.offCycle ?? [])
        await this.logDirect(log.states, { step: log.step, axis: log.axis, timestamp: log.timestamp });
      if (snapshot.alerts !== undefined) this.alerts.userCalls(snapshot.alerts);
    }
    const states = mergeAnswers(snapshots, step);
    states.push(...this.globalBackends.takeUndeliveredStates(), ...this.primaryBackends.takeUndeliveredStates());
    if (ranksExpected > 0) states.push(...rankCountStates({ ranksExpected, ranksReporting }));
    states.push(...this.lost.states());
    states.push(...droppedKeyStates(snapshots, step));
    states.push(...alertStates(this.alerts.takeUndelivered()));
    if (stragglers !== undefined) states.push(...stragglers.states);
    states.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const lostRanks = this.lost.names;
    // The alerts' straggler rule reads the chronic stragglers (docs/alerts.md, docs/stragglers.md).
    const chronic = stragglers?.report.chronic.map((c): StragglerInput => ({
      rank: c.rank,
      rankName: c.rankName,
      host: c.host,
      chronic: true,
    }));
    const result = {
      step,
      ranksExpected,
      ranksReporting,
      missingRanks: missing,
      ...(lostRanks.length > 0 ? { lostRanks } : {}),
      ...(stragglers === undefined ? {} : { stragglers: stragglers.report }),
    };
    if (this.rankInit === null) {
      this.beforeInit.keep({ states, ...target });
      answers.acknowledge(); // kept here until initBackends: the ranks need not send them again
      const { metrics } = reduceStates(states, target);
      return {
        ...result,
        metrics,
        undelivered: {},
        beforeInit: true,
        ...this.judgeAlerts(target, metrics, missing, chronic),
      };
    }
    for (const kept of this.beforeInit.takeAll()) {
      await this.globalBackends.logStates(kept.states, { step: kept.step, timestamp: kept.timestamp });
    }
    const merged =
      this.globalBackends.size > 0 ? await this.globalBackends.logStates(states, target) : reduceStates(states, target);
    if (stragglers !== undefined) await this.globalBackends.logRankTiming(stragglers.record);
    // Logged: the ranks (and host agents) may forget these answers now; they stop sending them again.
    answers.acknowledge();
    return {
      ...result,
      metrics: merged.metrics,
      undelivered: this.undelivered(),
      ...this.judgeAlerts(target, merged.metrics, missing, chronic),
    };
  }

  /**
   * The alert rules on one flush (src/alerts), synchronously beside the flush's delivery: no flush
   * waits for an alert. `stragglers`: the straggler attribution's ranks at this flush, with their
   * chronic flag (absent: no attribution was made, no evidence for the `straggler` rule).
   */
  private judgeAlerts(
    target: { step: number; timestamp: number },
    metrics: readonly Metric[],
    missing: readonly string[],
    stragglers?: readonly StragglerInput[],
  ): Pick<FlushResult, "alerts"> {
    const ranks = { missing: rankRefs(missing, this.ranks), lost: this.lost.refs() };
    const alerts = this.alerts.observeFlush({
      step: target.step,
      at: target.timestamp,
      metrics,
      ranks,
      ...(stragglers === undefined ? {} : { stragglers }),
    });
    return alerts.length === 0 ? {} : { alerts };
  }

  /** What each controller-side backend did not get (only backends that missed something). */
  undelivered(): Record<string, BackendDeliveryStats> {
    const all = { ...this.primaryBackends.deliveryStats(), ...this.globalBackends.deliveryStats() };
    return Object.fromEntries(Object.entries(all).filter(([, stats]) => stats.undelivered > 0));
  }

  /**
   * Log states to the global backends now, outside the flush cycle: no rank is asked, the
   * collector is not touched, and `every: N` does not apply. For faces that log on an axis of
   * their own (the system monitor, `axis: "system/step"`) or log one-off values (histograms).
   */
  async logDirect(states: readonly KeyState[], options: LogDirectOptions): Promise<readonly Metric[]> {
    if (this.parkedWhileEnding("logDirect")) return untilTheEnd();
    this.assertOpen("logDirect");
    const target = {
      step: options.step,
      timestamp: options.timestamp ?? Date.now(),
      ...(options.axis === undefined ? {} : { axis: options.axis }),
    };
    const reduced = reduceStates(states, target);
    if (this.globalBackends.size > 0) await this.globalBackends.logFlush(reduced, options.step);
    return reduced.metrics;
  }

  /** Hand the run's hyperparameters / config to every global backend, secrets redacted (`redactSecrets`). */
  async logHyperparams(params: Readonly<Record<string, unknown>>): Promise<void> {
    const redacted = redactRecord(params);
    await Promise.all([this.globalBackends.logHyperparams(redacted), this.primaryBackends.logHyperparams(redacted)]);
  }

  /**
   * Finish every backend and every rank, within the shutdown deadline. Values recorded after the
   * last flush are not logged: that is reported, never silent.
   */
  async shutdown(options: ShutdownOptions = {}): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.unregisterDrain?.();
    this.unregisterDrain = null;
    const deadlineMs = options.deadlineMs ?? this.shutdownDeadlineMs;
    if (!Number.isFinite(deadlineMs) || deadlineMs <= 0)
      throw new TypeError(
        `shutdown({ deadlineMs }) takes a positive number of milliseconds, got ${String(deadlineMs)}`,
      );
    const { keys, values } = pendingValues();
    if (values > 0) {
      warn(
        "shutdown.unflushed",
        `shutdown(): ${values} value(s) in ${keys} key(s) recorded since the last flush were not logged; call flush(step) before shutdown()`,
      );
    }
    const started = Date.now();
    // A flush still running (called before a signal that shuts the logger down) logs its step
    // before the backends finish, within half the deadline, instead of logging into finished ones.
    const inFlight = [...this.flushesInFlight];
    const flushed =
      inFlight.length === 0
        ? Promise.resolve()
        : withDeadline(Promise.allSettled(inFlight), deadlineMs / 2).then(() => undefined);
    // Ranks get a little less than the whole deadline, so one that must be killed is killed in time.
    const rankDeadline = Math.max(1, deadlineMs - Math.min(500, deadlineMs / 5));
    // The run is over: alerts still firing end with it (`ended`), recorded before the backends
    // finish — the controller's own per-rank ones too, which may keep them (`eventBackends`).
    const ended = flushed.then(() => this.alerts.endRun());
    const ranks = [...this.ranks.values()];
    const ranksDone = flushed.then(() =>
      Promise.all(
        ranks.map((r) =>
          (r === this.ownRank ? ended : Promise.resolve())
            .then(() => r.shutdown(Math.max(1, rankDeadline - (Date.now() - started))))
            .catch(() => undefined),
        ),
      ),
    );
    // Primaries finish after their ranks: a shared run is marked complete once the ranks are done.
    // The webhook gets what is left of the deadline for its queue (the rest is counted undelivered).
    const alertsDone = ended.then(() => this.alerts.close(Math.max(1, rankDeadline - (Date.now() - started))));
    const all = [
      ended.then(() => this.globalBackends.finish()),
      ranksDone.then(() => this.primaryBackends.finish()),
      alertsDone,
    ];
    const done = await withDeadline(Promise.all(all), deadlineMs);
    if (done === DEADLINE)
      warn(
        "shutdown.deadline",
        `shutdown(): ranks or backends did not finish within ${deadlineMs} ms; stopped waiting`,
      );
    // Transports close even after a missed deadline, so no connection keeps the process alive.
    await withDeadline(this.runShutdownHooks(), Math.max(200, deadlineMs - (Date.now() - started)));
    this.ranks.clear();
    // A default-named run directory this logger claimed and nobody wrote into leaves nothing behind.
    releaseUnusedRunLocation(this.run);
    // Once per job, on the controller only (ranks have no MetricLogger), after the data is written.
    const note = this.quiet || this.rankInit === null ? undefined : runLocationNote(this.run);
    if (note !== undefined) process.stderr.write(note);
    if (peekProcessWide(LOGGER) === this) {
      setProcessWide(LOGGER, undefined);
      // Values recorded from now on reach no backend: counted and warned about, never silent.
      getCollector().close();
    }
  }

  /**
   * The loop ran dry without `shutdown()` (beforeExit): flush what was recorded since the last
   * flush (and what the ranks hold) at the next step, then shut down, with a warning.
   */
  private async endForgotten(deadlineMs: number): Promise<void> {
    const started = Date.now();
    const { values } = pendingValues();
    const withRanks = this.ranks.size > 1;
    const step = this.lastStep + 1;
    warn(
      "shutdown.forgotten",
      `the job ended without logger.shutdown(): ${values > 0 || withRanks ? `flushing what is left at step ${step}, then ` : ""}shutting down${withRanks ? ` ${this.ranks.size - 1} rank(s)` : ""}; call shutdown() at the end of the job`,
    );
    if (values > 0 || withRanks) {
      await withDeadline(
        this.flush(step, { allowRepeatedStep: true }).catch((error: unknown) =>
          warn("shutdown.finalFlush", `final flush failed: ${describeError(error)}`),
        ),
        Math.min(this.flushDeadlineMs, deadlineMs / 2),
      );
    }
    await this.shutdown({ deadlineMs: Math.max(1, deadlineMs - (Date.now() - started)) });
  }

  /**
   * Run `hook` at `shutdown()`, after the ranks were stopped (transports close their connections
   * here). Hooks run within the shutdown deadline; a failing hook is reported.
   */
  onShutdown(hook: () => Promise<void> | void): void {
    this.shutdownHooks.push(hook);
  }

  private async runShutdownHooks(): Promise<void> {
    for (const hook of this.shutdownHooks.splice(0)) {
      try {
        await hook();
      } catch (error) {
        warn("shutdown.hook", `shutdown(): a transport failed to close: ${describeError(error)}`);
      }
    }
  }

  /**
   * Once the process is ending by a signal rankscope drains, the user's loop may still be running
   * (its awaits resolve in between): its calls are not errors then, and not logged either (the
   * values stay counted as unflushed); they never settle, so the loop parks until the process ends
   * by the signal instead of spinning (docs/lifecycle.md).
   */
  private parkedWhileEnding(call: string): boolean {
    if (!endingBySignal()) return false;
    warn(
      "lifecycle.ending",
      `${call}() while the process is ending (${String(endingReason())}): not logged, and it does not return (the process ends by the signal); rankscope is writing what was flushed before`,
    );
    return true;
  }

  private assertOpen(call: string): void {
    if (this.closed) throw new Error(`${call}() after shutdown(): get a new logger with getOrCreateMetricLogger()`);
  }

  private globalContext(v: ValidatedBackend, resumeStep: number): BackendContext {
    return {
      backendName: v.type,
      displayName: GLOBAL_DISPLAY_NAME,
      loggingMode: v.loggingMode,
      role: "controller",
      identity: controllerIdentity(this.processName),
      runDir: this.run.runDir,
      experiment: this.run.experiment,
      trial: this.run.trial,
      resumeStep,
      primaryMetadata: {},
    };
  }
}

/** Values (and keys) recorded in this process's collector since its last flush. */
function pendingValues(): { keys: number; values: number } {
  return pendingValuesOf(getCollector());
}

/** The process-wide slot of the controller's logger. */
const LOGGER = "metricLogger";

/**
 * The controller's logger, created on first call and returned by every later call in the process
 * (until `shutdown()`). Later calls may pass no options, or the same ones; an option that differs
 * from the existing logger's is an Error (a logger for another experiment would otherwise silently
 * write into this one): call `shutdown()` on the existing logger first.
 */
export async function getOrCreateMetricLogger(options: MetricLoggerOptions = {}): Promise<MetricLogger> {
  let logger = peekProcessWide<MetricLogger>(LOGGER);
  if (logger === undefined) {
    logger = new MetricLogger(options);
    setProcessWide(LOGGER, logger);
    return logger;
  }
  const conflicts = conflictingOptions(logger, options ?? {});
  if (conflicts.length > 0) {
    throw new Error(
      `getOrCreateMetricLogger: a logger already exists in this process (experiment "${logger.run.experiment}", trial "${logger.run.trial}") and these options differ from it: ${conflicts.join("; ")}. Call shutdown() on it first to start another, or call getOrCreateMetricLogger() without options to get it.`,
    );
  }
  return logger;
}

// The carriers (spawnRanks, serveRanksOverNats, serveHostsOverNats) fall back to this logger.
provideDefaultLogger(() => getOrCreateMetricLogger());

/** The controller's logger if one exists in this process (created and not shut down), else undefined. */
export function currentMetricLogger(): MetricLogger | undefined {
  return peekProcessWide<MetricLogger>(LOGGER);
}
