/**
 * A real PostgreSQL (Debian's, `scripts/install-system-deps.sh` installs it) for the team server's
 * tests and benchmark: `initdb` in a temporary folder, `postgres` on a free 127.0.0.1 port with its
 * unix socket in that folder. PostgreSQL refuses to run as root, so as root it runs as the
 * `postgres` user (`runuser -u postgres --`); the folder is handed to that user. It can be killed
 * and started again on the same port and data (a database restart).
 *
 * Never orphaned: PostgreSQL runs as the leader of a process group of its own (`detached`: the
 * postmaster and every backend in it), and until `close` a lifecycle drain (`registerDrain`, run
 * at exit, after SIGINT/SIGTERM and after an uncaught exception — a test that fails or times out
 * included) kills that whole group with SIGKILL and removes the temporary folder.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync } from "node:fs";
import { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before } from "node:test";
import pg from "pg";
import { registerDrain } from "../../src/core/lifecycle.js";
import { waitFor, within } from "../helpers.js";
import { freePort } from "../transport/support.js";

/** The newest `…/postgresql/N/bin` holding initdb and postgres, or null. */
export function postgresBinDir(): string | null {
  const base = "/usr/lib/postgresql";
  const versions = existsSync(base)
    ? readdirSync(base)
        .filter((v) => /^\d+$/.test(v))
        .sort((a, b) => Number(b) - Number(a))
    : [];
  for (const v of versions) {
    const dir = join(base, v, "bin");
    if (existsSync(join(dir, "initdb")) && existsSync(join(dir, "postgres"))) return dir;
  }
  try {
    const dir = execFileSync("pg_config", ["--bindir"], { encoding: "utf8" }).trim();
    if (existsSync(join(dir, "initdb"))) return dir;
  } catch {
    // No pg_config either.
  }
  return null;
}

/** Why PostgreSQL cannot run here, or null when it can (tests skip with this message). */
export function postgresMissing(): string | null {
  if (postgresBinDir() === null)
    return "PostgreSQL is not installed (Debian: apt-get install postgresql, or bash scripts/install-system-deps.sh)";
  return null;
}

const asRoot = process.getuid?.() === 0;

function postgresUser(): { uid: number; gid: number } {
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return { uid, gid };
}

/** The command line that runs `bin` as the user PostgreSQL accepts. */
function asPostgres(bin: string, args: string[]): [string, string[]] {
  return asRoot ? ["runuser", ["-u", "postgres", "--", bin, ...args]] : [bin, args];
}

/**
 * A freshly initdb'd cluster every test server starts from a copy of, made once per machine and
 * PostgreSQL build (in the temporary folder; a half-made one is never seen: it is renamed into
 * place whole, and a racing test file's copy is dropped).
 */
function templateCluster(bin: string): string {
  const key = bin.replace(/[^A-Za-z0-9]+/g, "_");
  const template = join(tmpdir(), `rankscope-pg-template-${process.getuid?.() ?? 0}-${key}`);
  if (existsSync(join(template, "PG_VERSION"))) return template;
  const making = mkdtempSync(join(tmpdir(), "rankscope-pg-making-"));
  chmodSync(making, 0o700);
  if (asRoot) {
    const { uid, gid } = postgresUser();
    chownSync(making, uid, gid);
  }
  const [cmd, args] = asPostgres(join(bin, "initdb"), [
    "-D",
    join(making, "data"),
    "-U",
    "postgres",
    "--auth=trust",
    "-E",
    "UTF8",
    "--no-sync",
    "--no-instructions",
  ]);
  execFileSync(cmd, args, { stdio: ["ignore", "ignore", "pipe"], timeout: 60_000 });
  try {
    renameSync(join(making, "data"), template);
  } catch {
    // Another test file made it first.
  }
  rmSync(making, { recursive: true, force: true });
  return template;
}

/** A PostgreSQL server of a test. */
export class Postgres {
  private child: ChildProcess | null = null;
  private exited: Promise<unknown> = Promise.resolve();
  output = "";
  /** The process groups of every start (a postmaster killed with SIGKILL may leave backends in its group). */
  private readonly groups = new Set<number>();
  /** Removes the exit drain (at `close`). */
  private readonly unregister: () => void;

  private constructor(
    readonly dir: string,
    readonly port: number,
    private readonly bin: string,
  ) {
    this.unregister = registerDrain({ name: `PostgreSQL of a test (${dir})`, exit: () => this.killNow() });
  }

  /**
   * Synchronously: SIGKILL to every process PostgreSQL's group holds (the postmaster, its
   * backends, any left by a killed postmaster) and remove the folder. What the exit drain runs.
   */
  killNow(): void {
    for (const pgid of this.groups) {
      try {
        process.kill(-pgid, "SIGKILL");
      } catch {
        // The group is gone already.
      }
    }
    this.groups.clear();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** initdb and start; `settings` are extra `-c name=value` server settings. */
  static async start(settings: Record<string, string> = {}): Promise<Postgres> {
    const bin = postgresBinDir();
    if (bin === null) throw new Error(postgresMissing() ?? "no PostgreSQL");
    const dir = mkdtempSync(join(tmpdir(), "rankscope-pg-"));
    chmodSync(dir, 0o700);
    if (asRoot) {
      const { uid, gid } = postgresUser();
      chownSync(dir, uid, gid);
    }
    // A copy of one initdb'd cluster (cp -a keeps the postgres user's ownership): initdb costs
    // seconds per server, a copy a fraction of one.
    execFileSync("cp", ["-a", templateCluster(bin), join(dir, "data")], {
      stdio: ["ignore", "ignore", "pipe"],
      timeout: 60_000,
    });
    const server = new Postgres(dir, await freePort(), bin);
    server.settings = settings;
    await server.startServer();
    return server;
  }

  private settings: Record<string, string> = {};

  /** `postgres://` URL of a database (default `postgres`). */
  url(database = "postgres"): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** Start the server process (again) on the same port and data, and wait until it answers. */
  async startServer(): Promise<void> {
    const extra = Object.entries({
      fsync: "off",
      synchronous_commit: "off",
      full_page_writes: "off",
      max_connections: "200",
      ...this.settings,
    }).flatMap(([k, v]) => ["-c", `${k}=${v}`]);
    const [cmd, args] = asPostgres(join(this.bin, "postgres"), [
      "-D",
      join(this.dir, "data"),
      "-p",
      String(this.port),
      "-k",
      this.dir,
      "-c",
      "listen_addresses=127.0.0.1",
      ...extra,
    ]);
    // A process group of its own, so that `killNow` reaches every process PostgreSQL forks.
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"], detached: true });
    this.child = child;
    if (child.pid !== undefined) this.groups.add(child.pid);
    // Never what keeps a test's process alive: a test that timed out leaves its process free to
    // end, and the exit drain then kills the group.
    child.unref();
    for (const stream of [child.stdout, child.stderr]) if (stream instanceof Socket) stream.unref();
    this.exited = new Promise((resolve) => child.once("exit", resolve));
    child.stdout?.on("data", (d: Buffer) => (this.output = (this.output + d.toString()).slice(-20_000)));
    child.stderr?.on("data", (d: Buffer) => (this.output = (this.output + d.toString()).slice(-20_000)));
    await waitFor(() => this.answers(), {
      timeoutMs: 30_000,
      what: `PostgreSQL on port ${this.port} to accept connections (${this.output.slice(-500)})`,
      intervalMs: 100,
    });
  }

  private async answers(): Promise<boolean> {
    if (this.child?.exitCode !== null) throw new Error(`PostgreSQL exited: ${this.output.slice(-1000)}`);
    const client = new pg.Client({ connectionString: this.url(), connectionTimeoutMillis: 2000 });
    client.on("error", () => undefined);
    try {
      await client.connect();
      await client.query("SELECT 1");
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** Create a database for one test (isolation between tests sharing a server). */
  async createDatabase(name: string): Promise<string> {
    const client = new pg.Client({ connectionString: this.url() });
    await client.connect();
    try {
      await client.query(`CREATE DATABASE "${name.replace(/"/g, "")}"`);
    } finally {
      await client.end();
    }
    return this.url(name);
  }

  /** Stop the server: fast shutdown (`SIGINT`), or `SIGKILL` of the postmaster (a crash). */
  async stopServer(how: "fast" | "kill" = "fast"): Promise<void> {
    const child = this.child;
    if (child === null || child.exitCode !== null) return;
    // The postmaster by its pid file (as root the child is runuser, which does not forward SIGINT
    // or SIGKILL): SIGINT is PostgreSQL's fast shutdown, SIGKILL a crash.
    const signal = how === "kill" ? "SIGKILL" : "SIGINT";
    let pid = child.pid ?? 0;
    try {
      pid = Number(readFileSync(join(this.dir, "data", "postmaster.pid"), "utf8").split("\n")[0]);
    } catch {
      // No pid file yet: the child itself.
    }
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
    await within(this.exited, { timeoutMs: 30_000, what: "PostgreSQL to stop" });
    this.child = null;
  }

  /** Stop, remove the data folder, and drop the exit drain. */
  async close(): Promise<void> {
    await this.stopServer("fast").catch(() => undefined);
    // Whatever a fast shutdown left (backends of a postmaster killed earlier), and the folder.
    this.killNow();
    this.unregister();
  }
}

/**
 * One PostgreSQL for the tests of a `describe` (call it inside one): started before them and
 * stopped after. `pg.server` is the running server.
 */
export function postgresForSuite(): { readonly server: Postgres } {
  let running: Postgres | undefined;
  before(async () => {
    running = await Postgres.start();
  });
  after(async () => {
    await running?.close();
  });
  return {
    get server(): Postgres {
      if (running === undefined)
        throw new Error("the suite's PostgreSQL is not started yet (use pg.server inside a test)");
      return running;
    },
  };
}
