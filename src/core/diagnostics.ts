import { processWide } from "./process-wide.js";
import { redactUrlCredentials } from "./redact.js";
/**
 * Operational faults and warnings: every one is counted, the first of each kind is reported.
 *
 * rankscope never throws an operational fault (a failing backend, a dead rank, a full disk) into
 * the user's loop. It reports it here instead: once per `code` through the handler (stderr by
 * default), and counted every time, so a fault that repeats a million times costs one line of
 * output and is still visible as a number (`diagnostics().counts`).
 *
 * Every message passes through `redactUrlCredentials` first: a URL quoted in a message (a NATS
 * server, a backend's endpoint) never shows the password or token it was given with.
 */

/** One reported fault or warning. */
export interface Diagnostic {
  /** Stable identifier of the kind of fault, e.g. `backend.logBatch:console`. */
  code: string;
  /** A sentence a user can act on. */
  message: string;
  /** `warning` for misuse that was tolerated, `error` for a fault that lost or delayed data. */
  level: "warning" | "error";
  /** How many times this code has been seen, including this one. */
  count: number;
}

/** Receives the first diagnostic of each code (and, with `everyTime`, all of them). */
export type DiagnosticHandler = (diagnostic: Diagnostic) => void;

interface DiagnosticsState {
  counts: Map<string, number>;
  handler: DiagnosticHandler;
  everyTime: boolean;
}

function defaultHandler(d: Diagnostic): void {
  process.stderr.write(`[rankscope] ${d.level}: ${d.message}\n`);
}

function state(): DiagnosticsState {
  return processWide("diagnostics", () => ({ counts: new Map(), handler: defaultHandler, everyTime: false }));
}

function report(level: Diagnostic["level"], code: string, message: string, show = false): void {
  const s = state();
  const count = (s.counts.get(code) ?? 0) + 1;
  s.counts.set(code, count);
  if (count === 1 || s.everyTime || show) {
    try {
      s.handler({ code, message: redactUrlCredentials(message), level, count });
    } catch {
      // A broken handler must not turn a reported fault into a crash of the user's loop.
    }
  }
}

/** Report tolerated misuse: counted, and printed the first time its `code` is seen. */
export function warn(code: string, message: string): void {
  report("warning", code, message);
}

/** When each rate-bounded code was last printed, and its count then. */
function lastShown(): Map<string, { at: number; count: number }> {
  return processWide("diagnostics.shown", () => new Map<string, { at: number; count: number }>());
}

/**
 * Report misuse that may repeat fast (a flood of rejected messages): counted every time like
 * `warn`, printed the first time, and then again at most once per `intervalMs` with how many came
 * since — so an attack stays visible in the output without flooding it.
 */
export function warnAtBoundedRate(code: string, message: string, intervalMs = 60_000, now = Date.now()): void {
  const s = state();
  const count = (s.counts.get(code) ?? 0) + 1;
  const shown = lastShown().get(code);
  if (count === 1 || shown === undefined || now - shown.at >= intervalMs || s.everyTime) {
    const since = shown === undefined ? 0 : count - shown.count - 1;
    lastShown().set(code, { at: now, count });
    s.counts.set(code, count - 1);
    report(
      "warning",
      code,
      since > 0 ? `${message} (${since} more since the last report, ${count} in all)` : message,
      true,
    );
  } else {
    s.counts.set(code, count);
  }
}

/** Report an operational fault that lost or delayed data: counted, printed the first time. */
export function reportError(code: string, message: string): void {
  report("error", code, message);
}

/**
 * Replace where diagnostics go (default: one line on stderr). With `everyTime`, the handler sees
 * every occurrence instead of the first of each code. Returns a function that restores the
 * previous handler.
 */
export function setDiagnosticHandler(handler: DiagnosticHandler, options: { everyTime?: boolean } = {}): () => void {
  const s = state();
  const previous = { handler: s.handler, everyTime: s.everyTime };
  s.handler = handler;
  s.everyTime = options.everyTime ?? false;
  return () => {
    s.handler = previous.handler;
    s.everyTime = previous.everyTime;
  };
}

/** Counts of every diagnostic code seen in this process. */
export function diagnosticCounts(): Record<string, number> {
  return Object.fromEntries(state().counts);
}

/** Forget every count, so the next occurrence of each code is reported again (tests, new runs). */
export function resetDiagnostics(): void {
  state().counts.clear();
  lastShown().clear();
}

/** A readable description of any thrown value, for messages. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
