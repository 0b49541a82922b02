/** Helpers of the transport tests: a real nats-server on 127.0.0.1, free ports, polling. */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createConnection, createServer } from "node:net";
import { after, before } from "node:test";
import { tempDir, waitFor, TS_LOADER } from "../helpers.js";

/** The rank module every transport test spawns. */
export const SUM_RANK = new URL("../fixtures/sum-rank.ts", import.meta.url);
/**
 * The host agent's process on the built package (`node dist/transport/host/main.js`, as a launcher
 * starts it: docs/scale.md), and a rank that joins it (fixtures/built/host-rank.mjs): both start
 * with plain node, without tsx loading the sources (`npm test` builds first).
 */
export const AGENT_MAIN = new URL("../../dist/transport/host/main.js", import.meta.url);
export const HOST_RANK = new URL("../fixtures/built/host-rank.mjs", import.meta.url);

const NATS_SERVER =
  ["/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].find((p) => existsSync(p)) ??
  "nats-server";

/** A child process a test started: what it printed so far, and its exit code. */
export interface TestChild {
  readonly process: ChildProcess;
  stdout: string;
  stderr: string;
  readonly exited: Promise<number | null>;
}

/**
 * Start a module (a fixture, or the host agent's entry) with `env` added to this process's
 * environment, capturing its output, and add it to `children` for `killChildren`: a TypeScript
 * one under tsx, a JavaScript one (the built package's) with plain node.
 */
export function startChild(file: URL, env: Record<string, string>, children: TestChild[]): TestChild {
  const tsx = /\.[cm]?ts$/.test(file.pathname) ? ["--import", TS_LOADER] : [];
  const child = spawn(process.execPath, [...tsx, file.pathname], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const c: TestChild = {
    process: child,
    stdout: "",
    stderr: "",
    exited: new Promise((resolve) => child.once("exit", (code) => resolve(code))),
  };
  child.stdout?.on("data", (d: Buffer) => (c.stdout += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (c.stderr += d.toString()));
  children.push(c);
  return c;
}

/** SIGKILL every child still running (a SIGSTOPped one is continued first, so the kill is delivered at once). */
export function killChildren(children: readonly TestChild[]): void {
  for (const c of children) {
    if (c.process.exitCode !== null || c.process.signalCode !== null) continue;
    c.process.kill("SIGCONT");
    c.process.kill("SIGKILL");
  }
}

/** Is `port` free on 127.0.0.1 (a listen there succeeds)? */
function isFreePort(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
}

/**
 * `count` consecutive ports nothing listens on (127.0.0.1); resolves with the first. Drawn at
 * random below the kernel's ephemeral range (`ip_local_port_range`), never from it: the kernel
 * hands those to every connection's local end and to every `listen(0)`, so a port a test took
 * from there could be handed to another test while its server was down for a restart (a
 * restarted team server or PostgreSQL then answered on another test's port, four files at a
 * time), and a kernel-chosen port's neighbours were often taken.
 */
export async function freePortRun(count: number): Promise<number> {
  const ephemeral = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/)[0]);
  const bottom = 10_000;
  const top = (Number.isFinite(ephemeral) ? ephemeral : 32_768) - count;
  for (let attempt = 0; attempt < 200; attempt++) {
    const base = top > bottom ? bottom + Math.floor(Math.random() * (top - bottom)) : await kernelPort();
    let free = base + count <= 65_536;
    for (let i = 0; free && i < count; i++) free = await isFreePort(base + i);
    if (free) return base;
  }
  throw new Error(`found no ${count} consecutive free ports in 200 tries`);
}

/** A port nothing listens on right now (127.0.0.1), outside the kernel's ephemeral range (`freePortRun`). */
export function freePort(): Promise<number> {
  return freePortRun(1);
}

/** A port the kernel chose for `listen(0)`: where the machine leaves no room below its ephemeral range. */
function kernelPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/** How a test's nats-server is configured (authentication, authorization, TLS). */
export interface NatsServerOptions {
  /** A nats-server configuration file's text; the address and port still come from the command line. */
  readonly config?: string;
  /** Variables of the server's environment (the configuration's `$NAME` values). */
  readonly env?: Readonly<Record<string, string>>;
}

/** A nats-server on 127.0.0.1 that the test can stop and start again on the same port. */
export class NatsServer {
  private process: ChildProcess | null = null;
  private readonly configFile: string | undefined;

  /** The server's process id while it runs (benchmarks read its CPU time). */
  get pid(): number | undefined {
    return this.process?.pid;
  }
  private constructor(
    readonly port: number,
    private readonly options: NatsServerOptions,
  ) {
    if (options.config === undefined) return;
    this.configFile = join(tempDir(), "nats-server.conf");
    writeFileSync(this.configFile, options.config, { mode: 0o600 });
  }

  static async start(options: NatsServerOptions = {}): Promise<NatsServer> {
    const server = new NatsServer(await freePort(), options);
    await server.restart();
    return server;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Start (again) on the same port; resolves when it accepts connections. */
  async restart(): Promise<void> {
    const config = this.configFile === undefined ? [] : ["-c", this.configFile];
    const child = spawn(NATS_SERVER, [...config, "-a", "127.0.0.1", "-p", String(this.port)], {
      stdio: "ignore",
      env: { ...process.env, ...this.options.env },
    });
    const failed = new Promise<never>((_, reject) =>
      child.once("error", (e) =>
        reject(
          new Error(
            `cannot start nats-server (${NATS_SERVER}): ${e.message}; install it (Debian: apt-get install nats-server)`,
          ),
        ),
      ),
    );
    this.process = child;
    await Promise.race([
      failed,
      waitFor(() => canConnect(this.port), { timeoutMs: 10_000, what: `nats-server on port ${this.port}` }),
    ]);
  }

  /** Stop the server and wait until it is gone. */
  async stop(): Promise<void> {
    const child = this.process;
    this.process = null;
    if (child === null || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
  }
}

/**
 * One nats-server for the tests of a file or a `describe` (call it at its top level): started
 * before them and stopped after. `nats.server` is the running server.
 */
export function natsServerForSuite(): { readonly server: NatsServer } {
  let running: NatsServer | undefined;
  before(async () => {
    running = await NatsServer.start();
  });
  after(async () => {
    await running?.stop();
  });
  return {
    get server(): NatsServer {
      if (running === undefined)
        throw new Error("the suite's nats-server is not started yet (use nats.server inside a test)");
      return running;
    },
  };
}

/** True if a process with this pid exists. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const CONSOLE_LINE = [
  /=== \[[^\]]+\] - (METRICS|SAMPLE LOGS) STEP \d+ ===$/,
  /={15}$/,
  /^[\w/.-]+:\s+\S+$/,
  /\[\d+\] \[[\w-]+-\d+\/\d+\] \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} INFO [\w/.-]+: \S+$/,
];

/**
 * The console backend's lines in captured stdout. Under `node --test` the runner writes its own
 * events to stdout too, interleaved with what the job printed; this keeps only the job's lines.
 */
export function consoleOutput(captured: string): string {
  // A runner frame may precede a job line without a newline between them: take the match itself.
  const lines: string[] = [];
  for (const line of captured.split("\n")) {
    for (const re of CONSOLE_LINE) {
      const found = re.exec(line);
      if (found !== null) {
        lines.push(found[0]);
        break;
      }
    }
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
}

/**
 * A run secret for tests whose controller and ranks start separately (the controller and every
 * rank or agent get it as `RANKSCOPE_RUN_SECRET`, as a launcher would hand it out).
 */
export const TEST_RUN_SECRET = "rankscope-test-run-secret-0123456789abcdef";

/** Whether every thread of process `pid` is stopped (true without /proc, where it cannot be told). */
function stopped(pid: number): boolean {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return true;
  }
  return tasks.every((task) => {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${task}/stat`, "utf8");
      return /^[Tt]$/.test(stat.charAt(stat.lastIndexOf(")") + 2));
    } catch {
      return true; // the thread ended
    }
  });
}

/**
 * A NATS cluster of `size` nodes on 127.0.0.1 (routes between every pair, each node with its
 * monitoring port), for tests that lose a node: `pause` a node (SIGSTOP: it holds what it was
 * given, forwards nothing) and `kill` it (SIGKILL: what it held is gone).
 */
export class NatsCluster {
  private constructor(
    private readonly nodes: ReadonlyArray<{ port: number; monitor: number; process: ChildProcess }>,
  ) {}

  static async start(size = 3): Promise<NatsCluster> {
    const ports = await Promise.all(
      Array.from({ length: size }, async () => ({
        port: await freePort(),
        monitor: await freePort(),
        cluster: await freePort(),
      })),
    );
    const nodes = ports.map(({ port, monitor, cluster }, i) => {
      const routes = ports.filter((_p, j) => j !== i).map((p) => `nats://127.0.0.1:${p.cluster}`);
      const args = ["-a", "127.0.0.1", "-p", String(port), "-m", String(monitor), "--cluster_name", "rs-test"];
      args.push("--cluster", `nats://127.0.0.1:${cluster}`, "--routes", routes.join(","));
      return { port, monitor, process: spawn(NATS_SERVER, args, { stdio: "ignore" }) };
    });
    const cluster = new NatsCluster(nodes);
    try {
      // A deadline for a hang: at load average 22 on 2 cores the routes took over 20 s.
      await waitFor(
        async () => (await Promise.all(nodes.map((_n, i) => cluster.routes(i)))).every((r) => r === size - 1),
        { timeoutMs: 90_000, what: `a ${size}-node NATS cluster with its routes` },
      );
    } catch (error) {
      // Its nodes would keep the test's process alive (and the run waiting) after the failure.
      await cluster.stop();
      throw error;
    }
    return cluster;
  }

  /** Node `i`'s client URL. */
  url(i: number): string {
    return `nats://127.0.0.1:${this.node(i).port}`;
  }

  /** The routes node `i` has to other nodes (-1 when it cannot be asked). */
  async routes(i: number): Promise<number> {
    const body = await this.monitor(i, "routez");
    return typeof body?.["num_routes"] === "number" ? body["num_routes"] : -1;
  }

  /** Whether node `i` serves a client connection named `name` now. */
  async serves(i: number, name: string): Promise<boolean> {
    const connections = (await this.monitor(i, "connz?limit=100000"))?.["connections"];
    return Array.isArray(connections) && connections.some((c: { name?: unknown }) => c.name === name);
  }

  /**
   * Stop node `i` where it stands (SIGSTOP): it keeps what it received and forwards nothing.
   * Returns once every thread of the node is stopped (/proc says so; a signal lands in its own
   * time, tens of ms on a busy machine), so whatever is sent to it next stays inside it. Synchronous:
   * a test may stop a node between two steps of one turn of the event loop.
   */
  pause(i: number): void {
    const { process: child } = this.node(i);
    child.kill("SIGSTOP");
    const deadline = Date.now() + 10_000;
    while (!stopped(child.pid ?? 0)) {
      if (Date.now() > deadline) throw new Error(`nats-server node ${i} did not stop within 10 s of SIGSTOP`);
    }
  }

  /** Kill node `i` (SIGKILL; continued first so the kill lands at once) and wait until it is gone. */
  async kill(i: number): Promise<void> {
    const child = this.node(i).process;
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    child.kill("SIGCONT");
    await exited;
  }

  async stop(): Promise<void> {
    for (let i = 0; i < this.nodes.length; i++) await this.kill(i);
  }

  private node(i: number): { port: number; monitor: number; process: ChildProcess } {
    const node = this.nodes[i];
    if (node === undefined) throw new RangeError(`the cluster has no node ${i}`);
    return node;
  }

  /** A monitoring page of node `i` (undefined when the node does not answer within 2 s). */
  private async monitor(i: number, page: string): Promise<Record<string, unknown> | undefined> {
    try {
      const response = await fetch(`http://127.0.0.1:${this.node(i).monitor}/${page}`, {
        signal: AbortSignal.timeout(2000),
      });
      const body: unknown = await response.json();
      return body !== null && typeof body === "object" && !Array.isArray(body) ? { ...body } : undefined;
    } catch {
      return undefined;
    }
  }
}
