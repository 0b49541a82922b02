/**
 * AReaL's session tracer: the lifecycle of rollout sessions, one JSON line per finished session in
 * `{runDir}/sessions/rank-{r}.jsonl`.
 *
 * A task (one prompt, say) has sessions (its samples), numbered in order across the tracer. A
 * session goes through phases — `generate`, `reward`, `toolcall` or any name, each as often as
 * needed — collects counters, and ends with a status (`accepted`, `rejected`, `failed`,
 * `dropped`) and a reason. Finished sessions are written in batches of `flushThreshold`, at
 * `save()`, and at exit.
 *
 * A line:
 * ```json
 * {"taskId":0,"sessionId":1,"rank":0,"role":"Rollout","status":"accepted","reason":null,
 *  "submitTime":1763776115123.4,"finalizeTime":1763776115523.9,"totalS":0.4005,
 *  "phases":{"generate":{"count":2,"totalS":0.3}},
 *  "spans":[{"phase":"generate","start":1763776115123.5,"end":1763776115273.5}],
 *  "counters":{"tokens":512}}
 * ```
 * Times are milliseconds since the epoch, durations seconds.
 */
import { describeValue } from "../core/collector.js";
import { describeError, reportError } from "../core/diagnostics.js";
import { envFlag, envInteger } from "../core/env.js";
import { runAround } from "./around.js";
import {
  appendFileFor,
  onExitWriteSync,
  resolveRankFile,
  whenRunKnown,
  type RankFileOptions,
  type RankFileTarget,
} from "./rank-file.js";

/** How a session ended. */
const SESSION_STATUSES = ["accepted", "rejected", "failed", "dropped"] as const;
export type SessionStatus = (typeof SESSION_STATUSES)[number];

const SESSION_STATUS_SET: ReadonlySet<unknown> = new Set(SESSION_STATUSES);

function isSessionStatus(value: unknown): value is SessionStatus {
  return SESSION_STATUS_SET.has(value);
}

/** Options of a session tracer. */
export interface SessionTracerOptions extends RankFileOptions {
  /** Finished sessions held before a batch is written (default 64, env `RANKSCOPE_SESSION_FLUSH_THRESHOLD`). */
  flushThreshold?: number;
  /** Finished sessions held while the run directory is unknown; past it they are dropped and counted (default 100000). */
  maxBufferedSessions?: number;
}

/** One phase occurrence of a session. */
export interface SessionSpan {
  readonly phase: string;
  /** ms since the epoch. */
  readonly start: number;
  readonly end: number;
}

/** A finished session, as written (one line). */
export interface SessionRecord {
  readonly taskId: number;
  readonly sessionId: number;
  readonly rank: number;
  readonly role: string;
  readonly status: SessionStatus;
  readonly reason: string | null;
  readonly submitTime: number;
  readonly finalizeTime: number;
  readonly totalS: number;
  readonly phases: Record<string, { count: number; totalS: number }>;
  readonly spans: SessionSpan[];
  readonly counters: Record<string, number>;
}

interface OpenSession {
  readonly taskId: number;
  readonly sessionId: number;
  readonly submitMs: number;
  readonly open: Map<string, number>;
  readonly spans: SessionSpan[];
  readonly counters: Record<string, number>;
}

type FinishedSession = Omit<SessionRecord, "rank" | "role">;

function nowMs(): number {
  return performance.timeOrigin + performance.now();
}

const round = (seconds: number): number => Math.round(seconds * 1e6) / 1e6;

/** Tracks tasks and their sessions on this rank. */
export class SessionTracer {
  private readonly flushThreshold: number;
  private readonly maxBuffered: number;
  private readonly target: RankFileOptions;
  private nextTaskId = 0;
  private nextSessionId = 0;
  private readonly sessions = new Map<number, OpenSession>();
  private finished: FinishedSession[] = [];
  private unsubscribeRun: (() => void) | undefined;
  private readonly unregisterExit: () => void;
  /** Sessions dropped because the buffer was full while the file was unknown. */
  dropped = 0;
  /** Sessions handed to the file. */
  written = 0;
  /** `RANKSCOPE_DISABLE_TRACING`: sessions are tracked (ids, misuse errors) but nothing is written. */
  private readonly disabled = envFlag("RANKSCOPE_DISABLE_TRACING");

  constructor(options: SessionTracerOptions = {}) {
    if (options === null || typeof options !== "object")
      throw new TypeError(`SessionTracer options must be an object, got ${describeValue(options)}`);
    this.flushThreshold = options.flushThreshold ?? envInteger("RANKSCOPE_SESSION_FLUSH_THRESHOLD", 64, 1);
    if (!Number.isInteger(this.flushThreshold) || this.flushThreshold < 1) {
      throw new TypeError(
        `SessionTracer flushThreshold must be an integer ≥ 1, got ${describeValue(options.flushThreshold)}`,
      );
    }
    this.maxBuffered = options.maxBufferedSessions ?? 100_000;
    if (!Number.isInteger(this.maxBuffered) || this.maxBuffered < 1) {
      throw new TypeError(
        `SessionTracer maxBufferedSessions must be an integer ≥ 1, got ${describeValue(options.maxBufferedSessions)}`,
      );
    }
    this.target = { runDir: options.runDir, rank: options.rank, role: options.role };
    this.unregisterExit = onExitWriteSync(() => this.write(true));
  }

  /** Register a task; returns its id (0, 1, 2, … per tracer). */
  registerTask(): number {
    return this.nextTaskId++;
  }

  /** Register a session of a task (submitted now); returns its id (sequential across tasks). */
  registerSession(taskId: number): number {
    if (!Number.isInteger(taskId) || taskId < 0 || taskId >= this.nextTaskId)
      throw new Error(
        `SessionTracer.registerSession(${describeValue(taskId)}): no such task; register it with registerTask() first`,
      );
    const sessionId = this.nextSessionId++;
    this.sessions.set(sessionId, { taskId, sessionId, submitMs: nowMs(), open: new Map(), spans: [], counters: {} });
    return sessionId;
  }

  /** Open a phase of a session (e.g. `generate`). */
  startPhase(sessionId: number, phase: string): void {
    const session = this.session(sessionId, `startPhase(${sessionId}, ${JSON.stringify(phase)})`);
    if (typeof phase !== "string" || phase.length === 0)
      throw new TypeError(`SessionTracer.startPhase: phase must be a non-empty string, got ${describeValue(phase)}`);
    if (session.open.has(phase)) {
      throw new Error(
        `SessionTracer.startPhase(${sessionId}, ${JSON.stringify(phase)}): the phase is already open; end it with endPhase before starting it again`,
      );
    }
    session.open.set(phase, nowMs());
  }

  /** Close a phase opened with `startPhase`. */
  endPhase(sessionId: number, phase: string): void {
    const session = this.session(sessionId, `endPhase(${sessionId}, ${JSON.stringify(phase)})`);
    const start = session.open.get(phase);
    if (start === undefined) {
      throw new Error(
        `SessionTracer.endPhase(${sessionId}, ${JSON.stringify(phase)}): the phase is not open; call startPhase first`,
      );
    }
    session.open.delete(phase);
    session.spans.push({ phase, start, end: nowMs() });
  }

  /** Run `fn` inside a phase (sync or async); the phase closes even when `fn` throws. */
  tracePhase<T>(sessionId: number, phase: string, fn: () => T): T {
    this.startPhase(sessionId, phase);
    return runAround(fn, () => this.endPhase(sessionId, phase));
  }

  /** Add `delta` (default 1) to a counter of the session, e.g. `tokens`. */
  addCounter(sessionId: number, name: string, delta = 1): void {
    const session = this.session(sessionId, `addCounter(${sessionId}, ${JSON.stringify(name)})`);
    if (typeof delta !== "number" || !Number.isFinite(delta))
      throw new TypeError(`SessionTracer.addCounter: delta must be a finite number, got ${describeValue(delta)}`);
    session.counters[name] = (session.counters[name] ?? 0) + delta;
  }

  /**
   * End a session with its status and, for anything but `accepted`, usually a reason. Phases still
   * open end now. The session is written with the next batch.
   */
  finalize(sessionId: number, status: SessionStatus, reason?: string): void {
    const session = this.session(sessionId, `finalize(${sessionId}, ${JSON.stringify(status)})`);
    if (!isSessionStatus(status)) {
      throw new TypeError(
        `SessionTracer.finalize(${sessionId}): status ${describeValue(status)} is not valid; valid: ${SESSION_STATUSES.join(", ")}`,
      );
    }
    const end = nowMs();
    for (const [phase, start] of session.open) session.spans.push({ phase, start, end });
    session.open.clear();
    const phases: Record<string, { count: number; totalS: number }> = {};
    for (const span of session.spans) {
      const entry = (phases[span.phase] ??= { count: 0, totalS: 0 });
      entry.count++;
      entry.totalS = round(entry.totalS + (span.end - span.start) / 1000);
    }
    this.sessions.delete(sessionId);
    if (this.disabled) return;
    if (this.finished.length >= this.maxBuffered) {
      this.dropped++;
      reportError(
        "sessions.bufferFull",
        `the session tracer holds ${this.maxBuffered} finished sessions and cannot write them (run directory unknown?); further sessions are dropped and counted`,
      );
      return;
    }
    this.finished.push({
      taskId: session.taskId,
      sessionId,
      status,
      reason: reason ?? null,
      submitTime: session.submitMs,
      finalizeTime: end,
      totalS: round((end - session.submitMs) / 1000),
      phases,
      spans: session.spans,
      counters: session.counters,
    });
    if (this.finished.length >= this.flushThreshold) this.write(false);
  }

  /** Sessions registered and not finalized yet. */
  get openSessions(): number {
    return this.sessions.size;
  }

  /** Write finished sessions now and wait for the file. */
  async save(): Promise<void> {
    this.write(false);
    const target = resolveRankFile("sessions", this.target);
    if (target !== undefined) await appendFileFor(target.path).drain();
  }

  /** Write what is left and stop listening for exit. */
  async close(): Promise<void> {
    await this.save();
    this.unregisterExit();
    this.unsubscribeRun?.();
  }

  private session(sessionId: number, call: string): OpenSession {
    const session = this.sessions.get(sessionId);
    if (session === undefined) {
      throw new Error(
        `SessionTracer.${call}: no open session ${describeValue(sessionId)} (never registered, or already finalized)`,
      );
    }
    return session;
  }

  private write(sync: boolean): RankFileTarget | undefined {
    if (this.finished.length === 0) return undefined;
    const target = resolveRankFile("sessions", this.target);
    if (target === undefined) {
      this.unsubscribeRun ??= whenRunKnown(() => this.write(false));
      return undefined;
    }
    const batch = this.finished;
    this.finished = [];
    let text = "";
    for (const s of batch) {
      const record: SessionRecord = {
        taskId: s.taskId,
        sessionId: s.sessionId,
        rank: target.rank,
        role: target.role,
        status: s.status,
        reason: s.reason,
        submitTime: s.submitTime,
        finalizeTime: s.finalizeTime,
        totalS: s.totalS,
        phases: s.phases,
        spans: s.spans,
        counters: s.counters,
      };
      try {
        text += `${JSON.stringify(record)}\n`;
      } catch (error) {
        text += `${JSON.stringify({ ...record, counters: {}, error: describeError(error) })}\n`;
      }
    }
    this.written += batch.length;
    const file = appendFileFor(target.path);
    if (sync) file.writeQueuedSync(text);
    else file.append(text);
    return target;
  }
}
