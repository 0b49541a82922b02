/**
 * The NATS connection of the controller and of host agents: connecting with the run's credentials
 * and the transport's reconnect policy (every node of a cluster), and not keeping an idle
 * controller alive.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import { nats } from "../protocol/nats-client.js";
import {
  natsAuthEnv,
  natsConnectError,
  natsConnectionOptions,
  reportNatsRefusals,
  resolveNatsAuth,
  type NatsAuth,
  type NatsAuthOptions,
  type NatsClientIdentity,
} from "../protocol/nats-auth.js";

/** The settings each connection was made with, for the ranks spawned to join it (kept off the server objects: they hold secrets). */
const AUTH_OF = new WeakMap<NatsConnection, NatsAuth>();

/**
 * Connect as `client` with `auth` (resolved by `resolveNatsAuth`; its URL may list every node of a
 * cluster). Throws an Error naming the server, without credentials, when it cannot be reached or
 * refuses them; later refusals (permissions) are reported as diagnostics.
 */
export async function connectTo(auth: NatsAuth, client: NatsClientIdentity): Promise<NatsConnection> {
  let nc: NatsConnection;
  try {
    nc = await nats.connect(natsConnectionOptions(auth, client));
  } catch (error) {
    throw natsConnectError(client.name, auth, error);
  }
  reportNatsRefusals(nc, client);
  AUTH_OF.set(nc, auth);
  return nc;
}

/**
 * The environment a rank spawned on this machine needs to join over `nc` (`spawnRanks({ nats })`):
 * the credentials and TLS files of `natsAuth` — the ranks' own, e.g. a user with the rank role's
 * permissions — or, without it, those `nc` connected with. TLS settings `natsAuth` does not name
 * are `nc`'s (the same server, the same CA). Environment variables only: never a command line.
 */
export function rankAuthEnv(nc: NatsConnection, natsAuth?: NatsAuthOptions): Record<string, string> {
  const own = AUTH_OF.get(nc);
  if (own === undefined) return {};
  if (natsAuth === undefined) return natsAuthEnv(own);
  const namesTls = Object.keys(natsAuth).some((key) => key.startsWith("tls"));
  const { tls, tlsCaFile, tlsCertFile, tlsKeyFile } = own.values;
  const inherited: NatsAuthOptions = namesTls
    ? {}
    : {
        tls,
        ...(tlsCaFile !== undefined ? { tlsCaFile } : {}),
        ...(tlsCertFile !== undefined ? { tlsCertFile, tlsKeyFile } : {}),
      };
  // The ranks' settings are exactly these (not this process's environment: the child gets them all).
  return natsAuthEnv(resolveNatsAuth("spawnRanks (natsAuth)", own.url, { ...inherited, ...natsAuth }, {}));
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
  if (
    protocol === undefined ||
    heartbeats === undefined ||
    typeof schedule !== "function" ||
    typeof protocol.transport?.socket?.unref !== "function"
  )
    return false;
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
