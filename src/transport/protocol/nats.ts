/**
 * What both sides of the NATS carrier share: the subjects of a run and the connection settings.
 *
 * ```
 * rankscope.{runId}.register        rank → controller (request; answered once the rank is initialised)
 * rankscope.{runId}.deregister      rank → controller
 * rankscope.{runId}.flush           controller → every rank at once (scatter); replies gather on the inbox
 * rankscope.{runId}.hello           controller → every rank: "I am here, register" (at start, after a reconnect)
 * rankscope.{runId}.rank.{rankName} controller → one rank (init, shutdown, start, call, sync, hello)
 * rankscope.{runId}.ctl.{nuid}      the controller's inbox for every reply
 * ```
 *
 * Loaded only with the NATS carrier (never by `import { recordMetric } from "rankscope"`).
 */
import { createInbox } from "@nats-io/transport-node";

/** Subjects of one run. */
export function subjects(runId: string) {
  const base = `rankscope.${runId}`;
  return {
    register: `${base}.register`,
    deregister: `${base}.deregister`,
    flush: `${base}.flush`,
    hello: `${base}.hello`,
    rank: (rankName: string) => `${base}.rank.${rankName}`,
    inbox: () => createInbox(`${base}.ctl`),
  };
}

/** Both sides reconnect on their own, forever, every 250 ms. */
export const RECONNECT = { maxReconnectAttempts: -1, reconnectTimeWait: 250, reconnectJitter: 50, pingInterval: 5000 } as const;
