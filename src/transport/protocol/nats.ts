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
 * rankscope.{runId}.inbox.{role}.…  each role's inbox for its own requests (register)
 * ```
 *
 * Loaded only with the NATS carrier (never by `import { recordMetric } from "rankscope"`).
 */
import { nats } from "./nats-client.js";

/**
 * Subjects of one run. With `scope` (a host id), the subjects of that host's agent,
 * `rankscope.{runId}.host.{scope}.register` etc.: the ranks of a host register with and are flushed
 * by their host agent instead of the controller (docs/scale.md).
 */
export function subjects(runId: string, scope?: string) {
  const base = scope === undefined ? `rankscope.${runId}` : `rankscope.${runId}.host.${scope}`;
  return {
    register: `${base}.register`,
    deregister: `${base}.deregister`,
    flush: `${base}.flush`,
    hello: `${base}.hello`,
    rank: (rankName: string) => `${base}.rank.${rankName}`,
    inbox: () => nats.createInbox(`${base}.ctl`),
  };
}

/** The server list of a NATS URL: one URL, or several separated by commas (every node of a cluster, so clients fail over). */
export function natsServers(url: string): string[] {
  return url
    .split(",")
    .map((u) => u.trim())
    .filter((u) => u.length > 0);
}

/**
 * Both sides reconnect on their own, forever, every 250 ms — over TLS too, and after the server
 * refused the credentials twice (the client would otherwise give up: a server whose configuration
 * is being reloaded, or a creds file about to be replaced, must not end a run).
 */
export const RECONNECT = {
  maxReconnectAttempts: -1,
  reconnectTimeWait: 250,
  reconnectJitter: 50,
  reconnectJitterTLS: 50,
  pingInterval: 5000,
  ignoreAuthErrorAbort: true,
} as const;

/** The three kinds of NATS client of a run, each with its own permissions (docs/security.md). */
export type NatsRole = "controller" | "rack" | "host" | "rank";

/**
 * The prefix of a role's request inboxes, `rankscope.{runId}.inbox.{role}`: under the run's
 * subjects (not the client's default `_INBOX.`), so a server's permissions can give each role one
 * run's inboxes and nothing else.
 */
export function inboxPrefix(runId: string, role: NatsRole): string {
  return `rankscope.${runId}.inbox.${role}`;
}
