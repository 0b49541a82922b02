/**
 * What the NATS security tests share: certificates made with `openssl`, nkeys and creds files
 * made with the NATS libraries, the authorization template read from docs/security.md, and a
 * plain NATS client that collects the server's permission violations.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  encodeAccount,
  encodeOperator,
  encodeUser,
  fmtCreds,
  createAccount,
  createOperator,
  createUser,
} from "@nats-io/jwt";
import { connect, errors, nkeys, type NatsConnection } from "@nats-io/transport-node";
import { REPO_ROOT, tempDir } from "../helpers.js";

/** PEM files of a test CA, a server certificate for `ips`, and a client certificate. */
export interface TestCertificates {
  readonly ca: string;
  readonly serverCert: string;
  readonly serverKey: string;
  readonly clientCert: string;
  readonly clientKey: string;
}

function openssl(dir: string, ...args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
}

/** Make a CA and, signed by it, a server certificate valid for `ips` and a client certificate (`CN=rankscope-client`), with `openssl`. */
export function makeCertificates(ips: readonly string[] = ["127.0.0.1"]): TestCertificates {
  const dir = tempDir("rankscope-certs-");
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  openssl(
    dir,
    "req",
    "-x509",
    ...ec,
    "-keyout",
    "ca.key",
    "-out",
    "ca.pem",
    "-days",
    "2",
    "-subj",
    "/CN=rankscope-test-ca",
  );
  const sign = (name: string, subject: string, extensions: string): void => {
    openssl(dir, "req", ...ec, "-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", subject);
    writeFileSync(join(dir, `${name}.ext`), extensions);
    openssl(
      dir,
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      `${name}.pem`,
      "-days",
      "2",
      "-extfile",
      `${name}.ext`,
    );
  };
  sign(
    "server",
    "/CN=nats-server",
    `subjectAltName=${ips.map((ip) => `IP:${ip}`).join(",")}\nextendedKeyUsage=serverAuth,clientAuth\n`,
  );
  sign("client", "/CN=rankscope-client", "extendedKeyUsage=clientAuth\n");
  const path = (file: string): string => join(dir, file);
  return {
    ca: path("ca.pem"),
    serverCert: path("server.pem"),
    serverKey: path("server.key"),
    clientCert: path("client.pem"),
    clientKey: path("client.key"),
  };
}

/** A user nkey: its public key (for the server's configuration) and its seed, also in a file. */
export interface TestNkey {
  readonly publicKey: string;
  readonly seed: string;
  readonly seedFile: string;
}

export function makeNkey(): TestNkey {
  const kp = nkeys.createUser();
  const seed = new TextDecoder().decode(kp.getSeed());
  const seedFile = join(tempDir("rankscope-nkey-"), "user.nk");
  writeFileSync(seedFile, `${seed}\n`, { mode: 0o600 });
  return { publicKey: kp.getPublicKey(), seed, seedFile };
}

/**
 * Operator mode: an operator, one account and one user, signed as `nsc` would. Returns the
 * server's configuration (a memory resolver preloaded with the account) and the user's creds file.
 */
export async function makeOperatorAccount(): Promise<{ config: string; credsFile: string }> {
  const operator = createOperator();
  const account = createAccount();
  const user = createUser();
  const operatorJwt = await encodeOperator("rankscope-test", operator);
  // Unlimited (-1) connections, subscriptions and data: an account without limits admits nobody.
  const limits = {
    conn: -1,
    subs: -1,
    data: -1,
    payload: -1,
    imports: -1,
    exports: -1,
    leaf: -1,
    wildcards: true,
    disallow_bearer: false,
  };
  const accountJwt = await encodeAccount("RANKSCOPE", account, { limits }, { signer: operator });
  const userJwt = await encodeUser("rankscope-user", user, account);
  const dir = tempDir("rankscope-jwt-");
  const operatorFile = join(dir, "operator.jwt");
  writeFileSync(operatorFile, operatorJwt);
  const credsFile = join(dir, "user.creds");
  writeFileSync(credsFile, fmtCreds(userJwt, user), { mode: 0o600 });
  const config = `operator: ${JSON.stringify(operatorFile)}\nresolver: MEMORY\nresolver_preload: {\n  ${account.getPublicKey()}: ${JSON.stringify(accountJwt)}\n}\n`;
  return { config, credsFile };
}

/** The per-run block of docs/security.md ("Authorization templates"), exactly as the page shows it. */
export function authorizationTemplate(): string {
  const page = readFileSync(join(REPO_ROOT, "docs", "security.md"), "utf8");
  const found = /<!-- authorization-template[^>]*-->\n```conf\n([\s\S]*?)\n```/.exec(page);
  if (found?.[1] === undefined) throw new Error("docs/security.md has no authorization-template block");
  return found[1];
}

/** The passwords of one run's four roles, as the template reads them from nats-server's environment. */
export const ROLE_PASSWORD_ENV = {
  controller: "RS_CONTROLLER_PASSWORD",
  rack: "RS_RACK_PASSWORD",
  host: "RS_HOST_PASSWORD",
  rank: "RS_RANK_PASSWORD",
} as const;

/**
 * A server configuration with one account per run, each the template with `<run>` replaced —
 * what docs/security.md says to write. The template reads passwords from the environment by one
 * name per role, so every run here shares them; users and permissions still differ per run.
 */
export function accountsFor(runIds: readonly string[]): string {
  const template = authorizationTemplate();
  return `accounts: {\n${runIds.map((run) => template.replaceAll("<run>", run)).join("\n")}\n}\n`;
}

/** A plain NATS client (an attacker, or a check) and the permission violations the server told it of. */
export interface PlainClient {
  readonly nc: NatsConnection;
  readonly violations: Array<{ operation: string; subject: string }>;
}

export async function plainClient(
  url: string,
  options: { user?: string; pass?: string; token?: string } = {},
): Promise<PlainClient> {
  // noEcho: what it reads is what others sent, never its own publishes.
  const nc = await connect({ servers: url, timeout: 5000, maxReconnectAttempts: 0, noEcho: true, ...options });
  const violations: PlainClient["violations"] = [];
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === "error" && status.error instanceof errors.PermissionViolationError)
        violations.push({ operation: status.error.operation, subject: status.error.subject });
    }
  })();
  return { nc, violations };
}
