/**
 * The NATS credentials of a rankscope process as settings (docs/security.md, "Connecting with
 * credentials"): each a setting of the one resolver (option → environment → none), read and
 * checked by `resolveNatsAuth` — one way to authenticate, files readable, key material that is
 * what it says — and handed to a spawned process as environment (`natsAuthEnv`). `nats-auth.ts`
 * turns the result into the client's connection options.
 */
import { accessSync, constants, readFileSync } from "node:fs";
import { nats } from "./nats-client.js";
import { describeError, warn } from "../../core/diagnostics.js";
import { flagKind, resolveSetting, textKind, type Setting, type SettingKind } from "../../core/settings.js";
import { natsServers } from "./nats.js";

/** How to authenticate to NATS. Every field also has an environment variable (docs/security.md). */
export interface NatsAuthOptions {
  /** User name (env `RANKSCOPE_NATS_USER`); also taken from `nats://user:password@host`. */
  user?: string;
  /** The user's password (env `RANKSCOPE_NATS_PASSWORD`). */
  password?: string;
  /** An authentication token (env `RANKSCOPE_NATS_TOKEN`); also taken from `nats://token@host`. */
  token?: string;
  /** A user nkey seed, `SU…` (env `RANKSCOPE_NATS_NKEY_SEED`). */
  nkeySeed?: string;
  /** A file holding a user nkey seed (env `RANKSCOPE_NATS_NKEY_SEED_FILE`); read at every (re)connection. */
  nkeySeedFile?: string;
  /** A creds file — a user JWT and its nkey seed, as `nsc` writes it (env `RANKSCOPE_NATS_CREDS_FILE`); read at every (re)connection. */
  credsFile?: string;
  /** Require TLS (env `RANKSCOPE_NATS_TLS`); implied by a `tls://` URL and by any TLS file below. */
  tls?: boolean;
  /** The CA that signed the server's certificate, PEM (env `RANKSCOPE_NATS_TLS_CA_FILE`). */
  tlsCaFile?: string;
  /** A client certificate, PEM, for servers that verify clients (env `RANKSCOPE_NATS_TLS_CERT_FILE`); needs `tlsKeyFile`. */
  tlsCertFile?: string;
  /** The client certificate's private key, PEM (env `RANKSCOPE_NATS_TLS_KEY_FILE`). */
  tlsKeyFile?: string;
}

type TextOption = Exclude<keyof NatsAuthOptions, "tls">;

/** A readable file path (checked when the settings are resolved, read by the client when it connects). */
const FILE_KIND = textKind(undefined, "a path to a readable file");

/** A user nkey seed: `SU` and 56 base-32 characters that decode as an nkey seed. */
const SEED_KIND: SettingKind<string> = {
  valid: "a user nkey seed (58 characters starting with SU)",
  fromOption: (v) => (typeof v === "string" && isUserSeed(v) ? v : undefined),
  fromEnv: (raw) => (isUserSeed(raw) ? raw : undefined),
};

/** Every text setting: its environment variable, its kind, and whether it is a secret. */
const TEXT_SETTINGS: Readonly<
  Record<TextOption, { readonly env: string; readonly kind: SettingKind<string>; readonly secret?: true }>
> = {
  user: { env: "RANKSCOPE_NATS_USER", kind: textKind() },
  password: { env: "RANKSCOPE_NATS_PASSWORD", kind: textKind(), secret: true },
  token: { env: "RANKSCOPE_NATS_TOKEN", kind: textKind(), secret: true },
  nkeySeed: { env: "RANKSCOPE_NATS_NKEY_SEED", kind: SEED_KIND, secret: true },
  nkeySeedFile: { env: "RANKSCOPE_NATS_NKEY_SEED_FILE", kind: FILE_KIND },
  credsFile: { env: "RANKSCOPE_NATS_CREDS_FILE", kind: FILE_KIND },
  tlsCaFile: { env: "RANKSCOPE_NATS_TLS_CA_FILE", kind: FILE_KIND },
  tlsCertFile: { env: "RANKSCOPE_NATS_TLS_CERT_FILE", kind: FILE_KIND },
  tlsKeyFile: { env: "RANKSCOPE_NATS_TLS_KEY_FILE", kind: FILE_KIND },
};
const TLS_ENV = "RANKSCOPE_NATS_TLS";
const TEXT_OPTIONS = Object.keys(TEXT_SETTINGS).filter((k): k is TextOption => k in TEXT_SETTINGS);
const FILE_OPTIONS: readonly TextOption[] = ["nkeySeedFile", "credsFile", "tlsCaFile", "tlsCertFile", "tlsKeyFile"];

/** The option names of `NatsAuthOptions` (unknown keys are a TypeError). */
const NATS_AUTH_OPTIONS: readonly string[] = [...TEXT_OPTIONS, "tls"];

/** Every environment variable of `NatsAuthOptions`. */
export const NATS_AUTH_ENV: readonly string[] = [...TEXT_OPTIONS.map((o) => TEXT_SETTINGS[o].env), TLS_ENV];

/** How a connection authenticates: for messages (never a credential). */
type NatsAuthMethod = "none" | "user/password" | "token" | "nkey" | "creds file";

/** The resolved, checked settings of one NATS connection. Holds secrets: never log it. */
export interface NatsAuth {
  /** The servers, without credentials. */
  readonly servers: readonly string[];
  /** The servers as one comma-separated URL without credentials: what messages show. */
  readonly url: string;
  readonly method: NatsAuthMethod;
  /** The values that apply (those from the URL included); TLS is on when `tls` is true. */
  readonly values: Readonly<NatsAuthOptions> & { readonly tls: boolean };
}

/** `servers` of a URL list, with the credentials each carried (`user:password@` or `token@`) taken out. */
interface ParsedUrl {
  readonly servers: string[];
  readonly userinfo?: string;
  readonly tls: boolean;
}

const SERVER = /^(?:([a-z][a-z0-9+.-]*):\/\/)?(?:([^/?#]*)@)?(.*)$/i;

function parseUrl(owner: string, url: string): ParsedUrl {
  const servers: string[] = [];
  const userinfos = new Set<string>();
  let tls = false;
  for (const server of natsServers(url)) {
    const [, scheme, userinfo, rest = ""] = SERVER.exec(server) ?? [];
    if (scheme?.toLowerCase() === "tls") tls = true;
    if (userinfo !== undefined && userinfo !== "") userinfos.add(userinfo);
    servers.push(scheme === undefined ? rest : `${scheme}://${rest}`);
  }
  if (servers.length === 0)
    throw new TypeError(
      `${owner}: the NATS URL names no server; give nats://host:port (several, comma-separated, for a cluster)`,
    );
  if (userinfos.size > 1) {
    throw new TypeError(
      `${owner}: the NATS URLs carry different credentials (not shown); give every server the same user:password@ or token@, or none and set them once (docs/security.md)`,
    );
  }
  const [userinfo] = userinfos;
  return { servers, tls, ...(userinfo === undefined ? {} : { userinfo }) };
}

/** The credentials of a URL's user part: `user:password` or a lone token, percent-decoded. */
function fromUserinfo(userinfo: string): Pick<NatsAuthOptions, "user" | "password" | "token"> {
  const decode = (text: string): string => {
    try {
      return decodeURIComponent(text);
    } catch {
      return text;
    }
  };
  const colon = userinfo.indexOf(":");
  if (colon < 0) return { token: decode(userinfo) };
  return { user: decode(userinfo.slice(0, colon)), password: decode(userinfo.slice(colon + 1)) };
}

/**
 * Resolve and check the NATS settings of `owner` (`serveRanksOverNats`, `joinRun`…): each option,
 * else its environment variable; credentials in `url` when no user or token setting is given.
 * Throws a TypeError saying what is wrong (two ways to authenticate, a password without a user, a
 * certificate without its key, a file that cannot be read, a seed that is not one) — never showing
 * a secret.
 */
export function resolveNatsAuth(
  owner: string,
  url: string,
  options: NatsAuthOptions = {},
  env: NodeJS.ProcessEnv = process.env,
): NatsAuth {
  if (options === null || typeof options !== "object")
    throw new TypeError(`${owner}: auth must be an object of NATS settings (${NATS_AUTH_OPTIONS.join(", ")})`);
  for (const key of Object.keys(options)) {
    if (!NATS_AUTH_OPTIONS.includes(key))
      throw new TypeError(`${owner}: unknown NATS auth option "${key}"; valid: ${NATS_AUTH_OPTIONS.join(", ")}`);
  }
  const parsed = parseUrl(owner, url);
  const values: Partial<Record<TextOption, string>> = {};
  for (const option of TEXT_OPTIONS) {
    const { env: variable, kind, secret } = TEXT_SETTINGS[option];
    const setting: Setting<string | undefined> = {
      owner,
      option,
      env: variable,
      kind,
      fallback: undefined,
      ...(secret === true ? { secret } : {}),
    };
    const value = resolveSetting(setting, options[option], env);
    if (value !== undefined) values[option] = value;
  }
  if (parsed.userinfo !== undefined) {
    if (values.user === undefined && values.token === undefined) Object.assign(values, fromUserinfo(parsed.userinfo));
    else
      warn(
        `nats.urlCredentials:${owner}`,
        `${owner}: the credentials in the NATS URL are ignored: a user or token was given as a setting, which wins`,
      );
  }
  const tlsFiles =
    values.tlsCaFile !== undefined || values.tlsCertFile !== undefined || values.tlsKeyFile !== undefined;
  const tlsSetting = resolveSetting(
    { owner, option: "tls", env: TLS_ENV, kind: flagKind, fallback: undefined },
    options.tls,
    env,
  );
  if (tlsSetting === false && (parsed.tls || tlsFiles))
    throw new TypeError(
      `${owner}: tls is false, but ${parsed.tls ? "the URL is tls://" : "TLS files are given"}; drop one of them`,
    );
  const checked = { ...values, tls: tlsSetting ?? (parsed.tls || tlsFiles) };
  const method = checkCombination(owner, checked);
  for (const option of FILE_OPTIONS) checkReadable(owner, option, checked[option]);
  checkKeyMaterial(owner, checked);
  return { servers: parsed.servers, url: parsed.servers.join(","), method, values: checked };
}

/** The one way to authenticate that `values` name (a TypeError for two, or for half of one). */
function checkCombination(owner: string, values: Readonly<NatsAuthOptions>): NatsAuthMethod {
  const given: NatsAuthMethod[] = [];
  if (values.user !== undefined) given.push("user/password");
  if (values.token !== undefined) given.push("token");
  if (values.nkeySeed !== undefined || values.nkeySeedFile !== undefined) given.push("nkey");
  if (values.credsFile !== undefined) given.push("creds file");
  const where = `(options, RANKSCOPE_NATS_* variables and the URL's user part together)`;
  if (given.length > 1)
    throw new TypeError(`${owner}: give one way to authenticate to NATS, got ${given.join(" and ")} ${where}`);
  if (values.password !== undefined && values.user === undefined)
    throw new TypeError(`${owner}: a NATS password needs a user (user / RANKSCOPE_NATS_USER)`);
  if (values.nkeySeed !== undefined && values.nkeySeedFile !== undefined)
    throw new TypeError(`${owner}: give the nkey seed or its file, not both (nkeySeed / nkeySeedFile)`);
  if ((values.tlsCertFile === undefined) !== (values.tlsKeyFile === undefined)) {
    throw new TypeError(
      `${owner}: a TLS client certificate needs its key and the key its certificate: give both tlsCertFile and tlsKeyFile (RANKSCOPE_NATS_TLS_CERT_FILE, RANKSCOPE_NATS_TLS_KEY_FILE)`,
    );
  }
  return given[0] ?? "none";
}

function checkReadable(owner: string, option: TextOption, path: string | undefined): void {
  if (path === undefined) return;
  try {
    accessSync(path, constants.R_OK);
  } catch (error) {
    throw new TypeError(
      `${owner}: ${option} (${TEXT_SETTINGS[option].env}) names ${JSON.stringify(path)}, which cannot be read: ${describeError(error)}`,
      { cause: error },
    );
  }
}

/** A seed file must hold a user seed, and a creds file a JWT and seed the client can use (checked now, not at the first connection). */
function checkKeyMaterial(owner: string, values: Readonly<NatsAuthOptions>): void {
  if (values.nkeySeedFile !== undefined && !isUserSeed(readFileSync(values.nkeySeedFile, "utf8").trim())) {
    throw new TypeError(
      `${owner}: nkeySeedFile ${JSON.stringify(values.nkeySeedFile)} does not hold a user nkey seed (58 characters starting with SU; its content is not shown)`,
    );
  }
  if (values.credsFile !== undefined) {
    try {
      nats.credsAuthenticator(readFileSync(values.credsFile))("rankscope-check");
    } catch (error) {
      throw new TypeError(
        `${owner}: credsFile ${JSON.stringify(values.credsFile)} is not a NATS creds file (a user JWT and its nkey seed, as nsc writes it): ${describeError(error)}`,
        { cause: error },
      );
    }
  }
}

function isUserSeed(text: string): boolean {
  if (!/^SU[A-Z2-7]{56}$/.test(text)) return false;
  try {
    nats.nkeys.fromSeed(new TextEncoder().encode(text));
    return true;
  } catch {
    return false;
  }
}

/**
 * The environment a process this one spawns needs to connect the way `auth` says (credentials and
 * TLS files): every variable of `NatsAuthOptions`, the unused ones empty, so nothing inherited adds
 * a second way to authenticate. Passed as environment, never on a command line (`ps` shows those).
 */
export function natsAuthEnv(auth: NatsAuth): Record<string, string> {
  const env: Record<string, string> = {};
  for (const option of TEXT_OPTIONS) env[TEXT_SETTINGS[option].env] = auth.values[option] ?? "";
  env[TLS_ENV] = auth.values.tls ? "true" : "";
  return env;
}

/** How `auth` authenticates, for messages: the method, the user name, TLS (never a secret). */
export function describeNatsAuth(auth: NatsAuth): string {
  const { method, values } = auth;
  const who =
    method === "user/password" && values.user !== undefined
      ? `user/password (user ${JSON.stringify(values.user)})`
      : method === "none"
        ? "no credentials"
        : method;
  return `${who}${values.tls ? `, TLS${values.tlsCertFile !== undefined ? " with a client certificate" : ""}` : ""}`;
}
