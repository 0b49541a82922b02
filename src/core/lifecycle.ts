/**
 * The one owner of the process lifecycle: `exit`, `beforeExit`, SIGINT, SIGTERM and uncaught
 * exceptions. Every part of rankscope that holds data (the stream, the trace files, the logger and
 * its ranks, the store writer, the file sinks) registers a named drain here instead of listening to
 * the process itself, so every part follows one rule and one deadline.
 *
 * - **SIGINT / SIGTERM** with no listener of the user's: every drain's async part runs (stage by
 *   stage: producers, then the logger and its ranks, then sinks) within ONE total deadline
 *   (`drainDeadlineMs`, env `RANKSCOPE_DRAIN_DEADLINE_MS`, default 5000 ms); drains that missed it
 *   are reported by name; then every sync part runs, and the signal is raised again, once, so the
 *   process ends by it exactly as it would have without rankscope (status 130 / 143, `signal` set).
 *   The job's calls into rankscope from then on never settle (`untilTheEnd`), so its loop parks
 *   instead of spinning, and a watchdog thread (end-watchdog.ts) kills the process at the deadline
 *   should its main thread never come back. A second signal while draining ends the process at once.
 * - **An interactive stop**: while a drain registered with `stopsCleanlyOnSignal` is present (the
 *   CLI's `rankscope ui` and `tail`, whose Ctrl-C is the ordinary way to stop them), the process
 *   exits with code 0 after the drains and sync parts instead of raising the signal again.
 * - **SIGINT / SIGTERM with a listener of the user's** (any listener that is not ours, installed
 *   before or after us): the user's code decides, as Node would — rankscope does nothing at the
 *   signal. If the user's handler then exits, the sync parts run at `exit`.
 * - **Uncaught exception / unhandled rejection**: noted (the run is marked crashed); Node prints it
 *   and exits with code 1 as usual, and the sync parts run at `exit`.
 * - **beforeExit** (the loop ran dry, e.g. a job that forgot `shutdown()`): the async parts run with
 *   reason `beforeExit`; they may schedule more work (the loop then goes on), at most a few rounds.
 * - **exit** (`process.exit()`, the end of the loop): the sync parts run once, each bounded.
 */
import { describeError, reportError, warn } from "./diagnostics.js";
import { startEndWatchdog } from "./end-watchdog.js";
import { processWide } from "./process-wide.js";
import { integerKind, resolveSetting, type Setting } from "./settings.js";

/** Why the process is ending. */
type EndReason = "SIGINT" | "SIGTERM" | "uncaughtException" | "beforeExit" | "exit";

/** The signals rankscope drains on. */
type DrainedSignal = "SIGINT" | "SIGTERM";

/**
 * When a drain runs relative to the others: `producer` parts (the stream ring, trace buffers) hand
 * their data on first, then the `logger` (final flush, ranks stopped, backends finished), then
 * `sink`s (store writer, files) write what reached them.
 */
type DrainStage = "producer" | "logger" | "sink";
const STAGES: readonly DrainStage[] = ["producer", "logger", "sink"];

/** What a drain is told. */
interface DrainContext {
  readonly reason: EndReason;
  /** When the total drain deadline passes (ms since the epoch); a drain should be done by then. */
  readonly deadline: number;
}

/** A part that holds data, and how it writes it out at the end. */
interface Drain {
  /** Shown when the drain misses the deadline, e.g. `store writer (runs/x/y)`. */
  readonly name: string;
  /** Default `sink`. */
  readonly stage?: DrainStage;
  /**
   * Write what is queued before the process ends by a signal, or at `beforeExit`. Return a
   * promise only when there is work; it is bounded by the total drain deadline.
   */
  drain?(context: DrainContext): Promise<void> | void;
  /**
   * The last synchronous write: at `exit`, and after a signal's async drains. Nothing can be
   * awaited here; bound any wait by `context.deadline`.
   */
  exit?(context: DrainContext): void;
  /**
   * An interactive command's drain (`rankscope ui`, `rankscope tail`): a SIGINT/SIGTERM is how the
   * user stops it, so after the drains and sync parts the process exits with code 0 instead of
   * raising the signal again. Applies while this drain is registered when the signal arrives.
   */
  readonly stopsCleanlyOnSignal?: boolean;
}

/** Default of `drainDeadlineMs`. */
const DEFAULT_DRAIN_DEADLINE_MS = 5000;
/** At most this much of the drain deadline (and at most a fifth of it) is kept for the sync parts after a signal. */
const SYNC_RESERVE_MS = 1000;
/** beforeExit rounds allowed in a row before the registry stops draining there (each may schedule work). */
const MAX_BEFORE_EXIT_ROUNDS = 5;

interface LifecycleState {
  readonly drains: Set<Drain>;
  installed: boolean;
  /** Set once the process is ending (a signal being drained, an uncaught exception, exit). */
  ending: EndReason | null;
  crashed: boolean;
  exitRan: boolean;
  beforeExitRounds: number;
  deadlineMs: number | null;
  readonly onSigint: () => void;
  readonly onSigterm: () => void;
  readonly onBeforeExit: () => void;
  readonly onExit: () => void;
  readonly onUncaught: () => void;
}

const state: LifecycleState = processWide("lifecycle", () => {
  const s: LifecycleState = {
    drains: new Set(),
    installed: false,
    ending: null,
    crashed: false,
    exitRan: false,
    beforeExitRounds: 0,
    deadlineMs: null,
    onSigint: () => onSignal("SIGINT"),
    onSigterm: () => onSignal("SIGTERM"),
    onBeforeExit: () => onBeforeExit(),
    onExit: () => runExit(state.ending ?? "exit"),
    onUncaught: () => {
      state.crashed = true;
      state.ending ??= "uncaughtException";
    },
  };
  return s;
});

/**
 * Register a drain; returns a function that removes it. The process listeners are installed while
 * at least one drain is registered, and removed with the last one.
 */
export function registerDrain(drain: Drain): () => void {
  if (typeof drain.name !== "string" || drain.name === "")
    throw new TypeError("registerDrain: a drain needs a non-empty name");
  state.drains.add(drain);
  install();
  return () => {
    state.drains.delete(drain);
    if (state.drains.size === 0) uninstall();
  };
}

/** The drain deadline, resolved by the one settings resolver (option → environment → default). */
const DRAIN_DEADLINE_SETTING: Setting<number> = {
  owner: "getOrCreateMetricLogger",
  option: "drainDeadlineMs",
  env: "RANKSCOPE_DRAIN_DEADLINE_MS",
  kind: integerKind(1, 3_600_000),
  fallback: DEFAULT_DRAIN_DEADLINE_MS,
};

/**
 * The total time every drain gets at a signal (ms): set by `configureLifecycle` (the logger's
 * `drainDeadlineMs` option, or the environment), else `RANKSCOPE_DRAIN_DEADLINE_MS`, else 5000.
 * Never throws (it runs in signal handlers): an invalid variable here is reported and the default
 * used; the logger's creation has already rejected it with a TypeError.
 */
function drainDeadlineMs(): number {
  if (state.deadlineMs !== null) return state.deadlineMs;
  try {
    return resolveSetting(DRAIN_DEADLINE_SETTING, undefined);
  } catch (error) {
    reportError("lifecycle.deadlineSetting", `${describeError(error)}; using ${DEFAULT_DRAIN_DEADLINE_MS} ms`);
    return DEFAULT_DRAIN_DEADLINE_MS;
  }
}

/**
 * Resolve the total drain deadline for this process from `drainDeadlineMs` (an integer number of
 * ms ≥ 1), else `RANKSCOPE_DRAIN_DEADLINE_MS`, else 5000. Throws a TypeError for an invalid value.
 */
export function configureLifecycle(options: { drainDeadlineMs?: number }): void {
  state.deadlineMs = resolveSetting(DRAIN_DEADLINE_SETTING, options.drainDeadlineMs);
}

/**
 * Why the process is ending, or null while it is not: a run whose process ends by a signal or an
 * uncaught exception is marked crashed, not finished.
 */
export function endingReason(): EndReason | null {
  return state.ending;
}

/** Did the process end (or is it ending) by a signal or an uncaught exception? */
export function endingAbnormally(): boolean {
  return state.crashed;
}

function install(): void {
  if (state.installed) return;
  state.installed = true;
  process.on("SIGINT", state.onSigint);
  process.on("SIGTERM", state.onSigterm);
  process.on("beforeExit", state.onBeforeExit);
  process.on("exit", state.onExit);
  process.on("uncaughtExceptionMonitor", state.onUncaught);
}

function uninstall(): void {
  if (!state.installed || state.ending !== null) return;
  state.installed = false;
  removeSignalListeners();
  process.removeListener("beforeExit", state.onBeforeExit);
  process.removeListener("exit", state.onExit);
  process.removeListener("uncaughtExceptionMonitor", state.onUncaught);
}

function removeSignalListeners(): void {
  process.removeListener("SIGINT", state.onSigint);
  process.removeListener("SIGTERM", state.onSigterm);
}

function ours(signal: DrainedSignal): () => void {
  return signal === "SIGINT" ? state.onSigint : state.onSigterm;
}

function onSignal(signal: DrainedSignal): void {
  if (state.ending === "SIGINT" || state.ending === "SIGTERM") {
    // A second signal while draining: the user insists; end now, with what is written.
    raise(signal);
    return;
  }
  // The rule: a listener of the user's owns the signal, as in Node; we neither drain nor end.
  const mine = ours(signal);
  if (process.listeners(signal).some((l) => l !== mine)) return;
  // An interactive command stopped by the user ends normally (decided now: its drain may unregister).
  const stopsCleanly = [...state.drains].some((d) => d.stopsCleanlyOnSignal === true);
  state.ending = signal;
  state.crashed = !stopsCleanly;
  const budget = drainDeadlineMs();
  // The process is gone by `end`, whatever the job's own code does meanwhile: the async drains
  // get the deadline less a reserve for the sync parts, and a watchdog thread, which needs
  // nothing from this (possibly starved) main thread, kills the process at `end`.
  const end = Date.now() + budget;
  startEndWatchdog(
    end,
    `[rankscope] error: ${signal}: the process did not end within the ${budget} ms drain deadline (its main thread did not come back from the job's code, or a drain hung); killed with SIGKILL, what was not written by then is lost (raise drainDeadlineMs / RANKSCOPE_DRAIN_DEADLINE_MS)`,
  );
  void runDrains({ reason: signal, deadline: end - syncReserveMs(budget) }).finally(() => {
    runExit(signal, end);
    if (stopsCleanly) process.exit(0);
    else raise(signal);
  });
}

/** The part of the drain deadline kept for the sync parts after a signal's async drains. */
function syncReserveMs(budget: number): number {
  return Math.min(SYNC_RESERVE_MS, Math.floor(budget / 5));
}

/**
 * True once the process is ending by a SIGINT/SIGTERM that rankscope drains (no listener of the
 * user's for it): the process ends by that signal within the drain deadline.
 */
export function endingBySignal(): boolean {
  return state.ending === "SIGINT" || state.ending === "SIGTERM";
}

/**
 * What a call of the job's loop (`flush`, `fanout`, …) returns once the process is ending by a
 * signal: a promise that never settles. The loop parks there until the process ends by the
 * signal. A call that resolved at once instead would let a `for (;;) { await … }` loop spin on
 * microtasks and starve every timer of the drain (issue 24 case 1); a rejection would become an
 * uncaught exception and change how the process ends.
 */
export function untilTheEnd<T>(): Promise<T> {
  return new Promise<T>(() => undefined);
}

/** End the process by `signal`, as it would have ended without our listeners. */
function raise(signal: DrainedSignal): void {
  removeSignalListeners();
  process.kill(process.pid, signal);
}

function onBeforeExit(): void {
  if (state.ending !== null || state.drains.size === 0) return;
  if (state.beforeExitRounds >= MAX_BEFORE_EXIT_ROUNDS) return;
  state.beforeExitRounds++;
  const deadline = Date.now() + drainDeadlineMs();
  const started = runDrains({ reason: "beforeExit", deadline });
  // Work done in a round brings another beforeExit; a round with nothing to do lets the process end.
  void started.then((didWork) => {
    if (!didWork) state.beforeExitRounds = MAX_BEFORE_EXIT_ROUNDS;
  });
}

/**
 * Run every drain's async part, stage by stage, within `context.deadline`. Resolves with whether
 * any drain had work (returned a promise). Drains that miss the deadline are reported by name.
 */
async function runDrains(context: DrainContext): Promise<boolean> {
  let didWork = false;
  const missed: string[] = [];
  let timer: NodeJS.Timeout | undefined;
  // Referenced: while drains run, the process stays alive (up to the deadline).
  const deadlinePassed = new Promise<"deadline">((resolve) => {
    timer = setTimeout(() => resolve("deadline"), Math.max(0, context.deadline - Date.now()));
  });
  try {
    for (const stage of STAGES) {
      const running: Array<{ name: string; done: boolean; promise: Promise<void> }> = [];
      for (const drain of [...state.drains]) {
        if ((drain.stage ?? "sink") !== stage || drain.drain === undefined) continue;
        try {
          const result = drain.drain(context);
          if (result instanceof Promise) {
            didWork = true;
            const entry = { name: drain.name, done: false, promise: Promise.resolve() };
            entry.promise = result.then(
              () => {
                entry.done = true;
              },
              (error: unknown) => {
                entry.done = true;
                reportError(
                  `lifecycle.drain:${drain.name}`,
                  `${drain.name}: failed while draining at ${context.reason}: ${describeError(error)}`,
                );
              },
            );
            running.push(entry);
          }
        } catch (error) {
          reportError(
            `lifecycle.drain:${drain.name}`,
            `${drain.name}: failed while draining at ${context.reason}: ${describeError(error)}`,
          );
        }
      }
      if (running.length === 0) continue;
      const outcome = await Promise.race([Promise.all(running.map((r) => r.promise)), deadlinePassed]);
      if (outcome === "deadline") {
        for (const r of running) if (!r.done) missed.push(r.name);
        // Later stages still get their (instant) chance: their sync parts run after this.
        break;
      }
    }
  } finally {
    clearTimeout(timer);
  }
  if (missed.length > 0) {
    const budget = drainDeadlineMs();
    reportError(
      `lifecycle.deadline:${context.reason}`,
      `${context.reason}: ${missed.length} drain(s) did not finish within the ${budget} ms drain deadline: ${missed.join(", ")}; what they held is counted by each (raise drainDeadlineMs / RANKSCOPE_DRAIN_DEADLINE_MS)`,
    );
  }
  return didWork;
}

/** Run every drain's sync part once (at exit, or after a signal's drains). */
function runExit(reason: EndReason, deadline = Date.now() + drainDeadlineMs()): void {
  if (state.exitRan) return;
  state.exitRan = true;
  state.ending ??= reason;
  const context: DrainContext = { reason, deadline };
  for (const stage of STAGES) {
    for (const drain of [...state.drains]) {
      if ((drain.stage ?? "sink") !== stage || drain.exit === undefined) continue;
      try {
        drain.exit(context);
      } catch (error) {
        // Exit must finish; the part reports what it lost.
        warn(`lifecycle.exit:${drain.name}`, `${drain.name}: failed at ${reason}: ${describeError(error)}`);
      }
    }
  }
}
