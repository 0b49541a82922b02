/**
 * What a serving end (the controller, or a rack agent) tells its host agents about their answers:
 * which it logged (`hostAck`, one message per flush for every agent), and, in each flush request,
 * which it carries late (`taken`) and which of their ranks' answers it took through an agent of
 * the host that is gone (`logged`).
 */
import type { HostMessage, RankAnswers } from "./messages.js";
import type { HostHandle } from "./host-handle.js";

/** Acknowledgements queued by host, sent together (`send` is called on the next microtask). */
export class PendingHostAcks {
  private pending: Map<string, number[]> | null = null;
  /** The agent process of each host those answers are of. */
  private readonly agents = new Map<string, string>();

  constructor(private readonly send: () => void) {}

  queue(hostId: string, seqs: readonly number[], agent: string | undefined): void {
    if (this.pending === null) {
      this.pending = new Map();
      queueMicrotask(this.send);
    }
    if (agent !== undefined) this.agents.set(hostId, agent);
    const list = this.pending.get(hostId) ?? [];
    list.push(...seqs);
    this.pending.set(hostId, list);
  }

  /** The `hostAck` message of what was queued, and the queue emptied; undefined when nothing was. */
  take(): Extract<HostMessage, { t: "hostAck" }> | undefined {
    const pending = this.pending;
    this.pending = null;
    const agents = Object.fromEntries(this.agents);
    this.agents.clear();
    return pending === null ? undefined : { t: "hostAck", acks: Object.fromEntries(pending), agents };
  }
}

/** By host, the answers its handle carries late and has not acknowledged (the agent keeps them, not sending them again); undefined when none. */
export function takenByHost(hosts: ReadonlyMap<string, HostHandle>): Record<string, readonly number[]> | undefined {
  let taken: Record<string, readonly number[]> | undefined;
  for (const [hostId, handle] of hosts) {
    const seqs = handle.takenSeqs;
    if (seqs.length > 0) (taken ??= {})[hostId] = seqs.slice(-64);
  }
  return taken;
}

/** By host, its ranks' answers taken through an agent that is gone (`HostHandle.predecessorAnswers`); undefined when none. */
export function loggedByHost(hosts: ReadonlyMap<string, HostHandle>): Record<string, RankAnswers> | undefined {
  let logged: Record<string, RankAnswers> | undefined;
  for (const [hostId, handle] of hosts) {
    const answers = handle.predecessorAnswers();
    if (answers !== undefined) (logged ??= {})[hostId] = answers;
  }
  return logged;
}
