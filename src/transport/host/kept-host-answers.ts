/**
 * A host agent's answers that the controller has not acknowledged (`hostAck`): each is kept until
 * then and sent again before every later answer (`carried`), so a frame lost in transit (its NATS
 * node died with it) goes into the next flush — once: the controller takes each number once. As a
 * rank's answers are kept (`rank/kept-answers.ts`); bounded, the newest always kept, an answer
 * dropped at the bound reported and counted. Each names the ranks' answers it holds
 * (`header.took`): the agent acknowledges those to its ranks only once the controller logged it.
 */
import { reportError } from "../../core/diagnostics.js";
import type { KeyState } from "../../core/key-state.js";
import { transportStats } from "../protocol/messages.js";
import type { HostStatesHeader } from "./messages.js";

/** How many unacknowledged answers an agent keeps, and how many key states together (the newest always kept). */
export const KEPT_HOST_ANSWERS = 16;
const KEPT_HOST_STATES = 200_000;

/** One answer as it was sent: its header and its merged states. */
export interface KeptHostAnswer {
  readonly header: Omit<HostStatesHeader, "session"> & { readonly seq: number };
  readonly states: readonly KeyState[];
}

/** One agent's unacknowledged answers, oldest first, and its answer numbers. */
export class KeptHostAnswers {
  private readonly kept: KeptHostAnswer[] = [];
  private keptStates = 0;
  private seq = 0;

  constructor(private readonly hostId: string) {}

  /** The number of the next answer (1, 2, …). */
  next(): number {
    return ++this.seq;
  }

  /** The answers to send again before the next one, oldest first. */
  get unacknowledged(): readonly KeptHostAnswer[] {
    return this.kept;
  }

  /**
   * Keep an answer until the controller acknowledges it. Returns the answers dropped at the bound
   * (reported, counted): their ranks need not keep theirs any longer.
   */
  keep(answer: KeptHostAnswer): KeptHostAnswer[] {
    this.kept.push(answer);
    this.keptStates += answer.states.length;
    const gone: KeptHostAnswer[] = [];
    while (this.kept.length > 1 && (this.kept.length > KEPT_HOST_ANSWERS || this.keptStates > KEPT_HOST_STATES)) {
      const dropped = this.kept.shift();
      if (dropped === undefined) break;
      gone.push(dropped);
      this.keptStates -= dropped.states.length;
      transportStats().lostAnswers++;
      reportError(
        `host.unackedDropped:${this.hostId}`,
        `host agent ${this.hostId}: its answer ${dropped.header.seq} (flush(${dropped.header.step})) was never acknowledged by the controller and is no longer kept (an agent keeps ${KEPT_HOST_ANSWERS}); if it never reached the controller, its values are lost (counted in transportStats().lostAnswers)`,
      );
    }
    return gone;
  }

  /** The controller logged these answers: they are dropped, and returned (their ranks' answers are acknowledged now). */
  acknowledge(seqs: readonly number[] | undefined): KeptHostAnswer[] {
    if (seqs === undefined || seqs.length === 0) return [];
    const acked = new Set(seqs);
    const released: KeptHostAnswer[] = [];
    for (let i = this.kept.length - 1; i >= 0; i--) {
      const k = this.kept[i];
      if (k === undefined || !acked.has(k.header.seq)) continue;
      this.kept.splice(i, 1);
      this.keptStates -= k.states.length;
      released.push(k);
    }
    return released;
  }

  /** Numbers of the answers of rank process `pid` named `rankName` that the kept (unacknowledged) answers hold. */
  rankSeqs(rankName: string, pid: number | undefined): number[] {
    const seqs: number[] = [];
    for (const k of this.kept) {
      const took = k.header.took?.[rankName];
      if (took !== undefined && took.p === pid) seqs.push(...took.s);
    }
    return seqs;
  }
}
