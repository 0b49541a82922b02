/**
 * The NATS connection of the controller and of host agents: connecting with the transport's
 * reconnect policy (every node of a cluster), and not keeping an idle controller alive.
 */
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { describeError } from "../../core/diagnostics.js";
import { natsServers, RECONNECT } from "../protocol/nats.js";

/** Connect with the transport's reconnect policy; `url` may list every node of a cluster, comma-separated. */
export async function connectTo(url: string, name: string, timeoutMs: number): Promise<NatsConnection> {
  try {
    return await connect({ servers: natsServers(url), name, timeout: timeoutMs, ...RECONNECT });
  } catch (error) {
    throw new Error(`cannot reach the NATS server at ${url}: ${describeError(error)}. Start nats-server there, or pass the right URL (RANKSCOPE_NATS_URL)`, { cause: error });
  }
}


/** What `unrefWhileIdle` reaches inside the NATS client (`@nats-io/nats-core`'s ProtocolHandler). */
interface NatsInternals {
  protocol?: {
    transport?: { socket?: { unref?: () => unknown } };
    heartbeats?: { timer?: { unref?: () => unknown }; _schedule?: () => void };
  };
}

/**
 * Let the controller's NATS connection not keep the process alive by itself, the way idle child
 * ranks do not (launcher.ts): its socket and its heartbeat timer are unref'd, after the first
 * connection and after every reconnect. Work in flight still keeps the process alive — every
 * request to a rank has a referenced deadline timer, and so does the lifecycle's drain — so a job
 * that forgets `shutdown()` reaches `beforeExit` and is shut down there instead of hanging.
 *
 * The client exposes no unref option; this uses its socket (`protocol.transport.socket`, a Node
 * `net.Socket`) and its heartbeat (`protocol.heartbeats`). Returns false, and the caller warns,
 * when a client version lacks them (the connection then keeps the process alive until `shutdown()`).
 */
export function unrefWhileIdle(nc: NatsConnection): boolean {
  const protocol = (nc as unknown as NatsInternals).protocol;
  const heartbeats = protocol?.heartbeats;
  const schedule = heartbeats?._schedule;
  if (protocol === undefined || heartbeats === undefined || typeof schedule !== "function" || typeof protocol.transport?.socket?.unref !== "function") return false;
  // The heartbeat re-arms its timer on every beat (the beat's callback calls `this._schedule()`).
  heartbeats._schedule = () => {
    schedule.call(heartbeats);
    heartbeats.timer?.unref?.();
  };
  heartbeats.timer?.unref?.();
  unrefSocket(nc);
  return true;
}

/** Unref the connection's current socket (a reconnect makes a new one). */
export function unrefSocket(nc: NatsConnection): void {
  (nc as unknown as NatsInternals).protocol?.transport?.socket?.unref?.();
}
