/**
 * Flushes made before `initBackends`: no backend is started yet, so their states are kept (at most
 * `MAX_FLUSHES_BEFORE_INIT`, the oldest dropped and counted) and logged at their own steps by the
 * first flush after it.
 */
import type { KeyState } from "../core/key-state.js";
import { reportError, warn } from "../core/diagnostics.js";
import { MAX_FLUSHES_BEFORE_INIT } from "./logger-options.js";

/** A flush made before `initBackends`, kept for the first flush after it. */
interface FlushBeforeInit {
  readonly states: readonly KeyState[];
  readonly step: number;
  readonly timestamp: number;
}

/** The flushes kept until `initBackends`, oldest first. */
export class FlushesBeforeInit {
  private kept: FlushBeforeInit[] = [];

  /** Keep a flush's states (warned about; past the bound the oldest is dropped, reported and counted). */
  keep(flush: FlushBeforeInit): void {
    warn(
      "flush.beforeInit",
      `flush(${flush.step}) before initBackends(): no backend is started yet, so the values are kept and logged at their own steps by the first flush after initBackends() (at most ${MAX_FLUSHES_BEFORE_INIT} flushes are kept)`,
    );
    if (this.kept.length >= MAX_FLUSHES_BEFORE_INIT) {
      this.kept.shift();
      reportError(
        "flush.beforeInitDropped",
        `more than ${MAX_FLUSHES_BEFORE_INIT} flushes before initBackends(): the oldest are dropped and counted; call initBackends() before flushing`,
      );
    }
    this.kept.push(flush);
  }

  /** Every kept flush, oldest first; none is kept afterwards. */
  takeAll(): FlushBeforeInit[] {
    return this.kept.splice(0);
  }
}
