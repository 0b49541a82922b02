/**
 * How every rankscope process authenticates to NATS — the controller, host agents and ranks alike
 * (docs/security.md, "Connecting with credentials"): user and password or a token (in the URL or
 * as settings), an nkey seed, a creds file (a user JWT), TLS with a CA, a client certificate and
 * its key. Each is a setting of the one resolver (option → environment → none), so a launcher can
 * pass them as environment variables and code as `auth` options.
 *
 * Shared by both sides (the rank side never imports the controller side): `resolveNatsAuth` reads
 * and checks the settings, `natsConnectionOptions` turns them into the nats.js client's own options
 * (its authenticators and `tls`), `natsAuthEnv` is what a spawned rank is handed (environment
 * variables, never its command line). Credentials never appear in a message: the URL kept for
 * messages (`NatsAuth.url`) has none, and every diagnostic is redacted (`redactUrlCredentials`).
 *
 * The settings and their checks are `nats-auth-settings.ts` (re-exported here); this file is the
 * connection: authenticators, TLS, the client's options and what a refusal says.
 */
import { readFileSync } from "node:fs";
import { checkServerIdentity, type ConnectionOptions } from "node:tls";
import type { Authenticator, NatsConnection, NodeConnectionOptions, TlsOptions } from "@nats-io/transport-node";
import { nats } from "./nats-client.js";
import { describeError, reportError } from "../../core/diagnostics.js";
import { inboxPrefix, RECONNECT, type NatsRole } from "./nats.js";
import { describeNatsAuth, type NatsAuth, type NatsAuthOptions } from "./nats-auth-settings.js";

export {
  describeNatsAuth,
  NATS_AUTH_ENV,
  natsAuthEnv,
  resolveNatsAuth,
  type NatsAuth,
  type NatsAuthOptions,
} from "./nats-auth-settings.js";

/** The nats.js authenticator of an nkey seed or a creds file (files are read at every connection, so they can be rotated). */
function authenticatorOf(values: Readonly<NatsAuthOptions>): Authenticator | undefined {
  const { nkeySeed, nkeySeedFile, credsFile } = values;
  if (nkeySeed !== undefined) return nats.nkeyAuthenticator(new TextEncoder().encode(nkeySeed));
  if (nkeySeedFile !== undefined)
    return nats.nkeyAuthenticator(() => new TextEncoder().encode(readFileSync(nkeySeedFile, "utf8").trim()));
  if (credsFile !== undefined) return nats.credsAuthenticator(() => readFileSync(credsFile));
  return undefined;
}

/** The TLS options the Node client passes on to `tls.connect`: its own, and the identity check. */
type NodeTls = TlsOptions & Pick<ConnectionOptions, "checkServerIdentity">;

/**
 * The client's TLS options: files it loads at every connection (an empty object still requires
 * TLS), and the check of the server's certificate against the server's name. The client gives
 * Node no name for a server given by IP address, and Node then checks the certificate against
 * `localhost` (nats.js issue 303): there the certificate must name one of the servers rankscope
 * was given — their IP addresses or names — instead.
 */
function tlsOf(values: Readonly<NatsAuthOptions>, servers: readonly string[]): NodeTls {
  const hosts = servers.map(hostOf);
  return {
    ...(values.tlsCaFile !== undefined ? { caFile: values.tlsCaFile } : {}),
    ...(values.tlsCertFile !== undefined ? { certFile: values.tlsCertFile } : {}),
    ...(values.tlsKeyFile !== undefined ? { keyFile: values.tlsKeyFile } : {}),
    checkServerIdentity: (host, cert) => {
      if (host !== "localhost") return checkServerIdentity(host, cert);
      const errors = hosts.map((h) => checkServerIdentity(h, cert));
      return errors.some((e) => e === undefined) ? undefined : errors[0];
    },
  };
}

/** The host of a server (`nats://10.0.0.1:4222`, `[::1]:4222`, `n1`): an IP address or a name. */
function hostOf(server: string): string {
  const rest = server.replace(/^[a-z][a-z0-9+.-]*:\/\//i, "");
  const bracketed = /^\[([^\]]+)\]/.exec(rest);
  if (bracketed?.[1] !== undefined) return bracketed[1];
  return rest.replace(/[:/].*$/, "");
}

/** The nats.js options that carry `auth`: servers, user/password or token, an authenticator, TLS. */
export function authConnectionOptions(auth: NatsAuth): NodeConnectionOptions {
  const { values } = auth;
  const authenticator = authenticatorOf(values);
  return {
    servers: [...auth.servers],
    ...(values.user !== undefined
      ? { user: values.user, ...(values.password !== undefined ? { pass: values.password } : {}) }
      : {}),
    ...(values.token !== undefined ? { token: values.token } : {}),
    ...(authenticator !== undefined ? { authenticator } : {}),
    ...(values.tls ? { tls: tlsOf(values, auth.servers) } : {}),
  };
}

/** Who connects, for `natsConnectionOptions`. */
export interface NatsClientIdentity {
  /** The client's name on the server (its monitoring pages show it). */
  readonly name: string;
  readonly runId: string;
  readonly role: NatsRole;
  /** How long one connection attempt may take. */
  readonly timeoutMs: number;
}

/**
 * Every option of a rankscope NATS connection: `auth`'s servers and credentials, the transport's
 * reconnect policy, and the role's inbox prefix under the run's subjects (`rankscope.{runId}.inbox.
 * {role}`), so a server can limit each role to one run (docs/security.md, "Authorization templates").
 */
export function natsConnectionOptions(auth: NatsAuth, client: NatsClientIdentity): NodeConnectionOptions {
  return {
    ...authConnectionOptions(auth),
    name: client.name,
    timeout: client.timeoutMs,
    inboxPrefix: inboxPrefix(client.runId, client.role),
    ...RECONNECT,
  };
}

/** True when the server refused the credentials (retrying with the same ones cannot help). */
export function isNatsAuthError(error: unknown): boolean {
  return error instanceof nats.errors.AuthorizationError || error instanceof nats.errors.UserAuthenticationExpiredError;
}

/**
 * The error to throw when `who` could not connect: the server refused its credentials (naming the
 * method, never a secret), or it could not be reached. Names `auth.url`, which holds no credentials.
 */
export function natsConnectError(who: string, auth: NatsAuth, error: unknown): Error {
  if (isNatsAuthError(error)) {
    return new Error(
      `${who}: the NATS server at ${auth.url} refused its credentials (${describeNatsAuth(auth)}): ${describeError(error)}. Give the credentials the server expects (RANKSCOPE_NATS_* variables or the auth option; docs/security.md)`,
      { cause: error },
    );
  }
  const tls = auth.values.tls
    ? "; with TLS, check the server's certificate against tlsCaFile (RANKSCOPE_NATS_TLS_CA_FILE)"
    : "";
  return new Error(
    `${who}: cannot reach the NATS server at ${auth.url}: ${describeError(error)}. Start nats-server there, or pass the right URL (RANKSCOPE_NATS_URL)${tls}`,
    { cause: error },
  );
}

/**
 * Report what the server refuses this connection later on: a publish or subscription its user has
 * no permission for (counted per role; the first of each is printed), and credentials refused at a
 * reconnection. Without this the client only drops such messages.
 */
export function reportNatsRefusals(nc: NatsConnection, client: NatsClientIdentity): void {
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type !== "error") continue;
      const error = status.error;
      if (error instanceof nats.errors.PermissionViolationError) {
        const what = error.operation === "publish" ? "publish to" : "subscribe to";
        reportError(
          `transport.nats.permission:${client.role}`,
          `${client.name}: the NATS server refused to let it ${what} ${error.subject}; its user lacks the ${client.role} role's permissions for run ${client.runId} (docs/security.md, "Authorization templates")`,
        );
      } else if (isNatsAuthError(error)) {
        reportError(
          `transport.nats.auth:${client.role}`,
          `${client.name}: the NATS server refused its credentials on reconnecting: ${describeError(error)}; it keeps trying`,
        );
      }
    }
  })();
}
