/**
 * A real Prometheus for the tests: Debian's `prometheus` binary on 127.0.0.1 with a free port, a
 * temporary TSDB, the given scrape targets (every 1 s) and the remote write receiver, queried
 * through its HTTP API.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../transport/support.js";
import { waitFor } from "../../helpers.js";

/** Why the Prometheus tests cannot run here, or undefined when the binary is there. */
export function prometheusMissing(): string | undefined {
  const found = spawnSync("prometheus", ["--version"], { encoding: "utf8" });
  return found.error === undefined && found.status === 0
    ? undefined
    : "Debian's prometheus binary is not installed (scripts/install-system-deps.sh installs it)";
}

/** One value as Prometheus' API writes it: `NaN`, `+Inf`, `-Inf` or a decimal. */
export function promValue(text: string): number {
  if (text === "NaN") return NaN;
  if (text === "+Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  return Number(text);
}

/** A series of a query result. */
export interface PromSeries {
  metric: Record<string, string>;
  value?: [number, string];
  values?: [number, string][];
}

export class PrometheusServer {
  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
    private readonly dir: string,
  ) {}

  /** Start Prometheus scraping `targets` (job name → host:port) every second. */
  static async start(targets: Readonly<Record<string, string>> = {}): Promise<PrometheusServer> {
    const dir = mkdtempSync(join(tmpdir(), "openstd-prometheus-"));
    const port = await freePort();
    const jobs = Object.entries(targets)
      .map(
        ([job, target]) =>
          `  - job_name: ${job}\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    static_configs:\n      - targets: ["${target}"]\n`,
      )
      .join("");
    writeFileSync(join(dir, "prometheus.yml"), `global:\n  scrape_interval: 1s\nscrape_configs:\n${jobs || "  []\n"}`);
    const child = spawn(
      "prometheus",
      [
        `--config.file=${join(dir, "prometheus.yml")}`,
        `--storage.tsdb.path=${join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
        "--web.enable-remote-write-receiver",
        "--log.level=warn",
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    const server = new PrometheusServer(child, `http://127.0.0.1:${port}`, dir);
    try {
      await waitFor(
        async () => {
          if (child.exitCode !== null) throw new Error(`prometheus exited (${child.exitCode}): ${stderr}`);
          return (await fetch(`${server.url}/-/ready`).catch(() => undefined))?.ok === true;
        },
        { timeoutMs: 30_000, what: "prometheus to be ready" },
      );
    } catch (error) {
      await server.stop();
      throw error;
    }
    return server;
  }

  /** `/api/v1/query` at `time` (seconds; default now): the result series. */
  async query(promql: string, time?: number): Promise<PromSeries[]> {
    const params = new URLSearchParams({ query: promql });
    if (time !== undefined) params.set("time", String(time));
    const response = await fetch(`${this.url}/api/v1/query?${params}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await response.json()) as { status: string; error?: string; data: { result: PromSeries[] } };
    if (body.status !== "success") throw new Error(`query ${promql}: ${body.error}`);
    return body.data.result;
  }

  /** `/api/v1/query_range` from `start` to `end` (seconds) every `step` seconds: the result series. */
  async queryRange(promql: string, start: number, end: number, step: number): Promise<PromSeries[]> {
    const params = new URLSearchParams({ query: promql, start: String(start), end: String(end), step: String(step) });
    const response = await fetch(`${this.url}/api/v1/query_range?${params}`, { signal: AbortSignal.timeout(10_000) });
    const body = (await response.json()) as { status: string; error?: string; data: { result: PromSeries[] } };
    if (body.status !== "success") throw new Error(`query_range ${promql}: ${body.error}`);
    return body.data.result;
  }

  /** The scrape targets' health and last error, for failure messages. */
  async targets(): Promise<string> {
    const body = (await (await fetch(`${this.url}/api/v1/targets`)).json()) as {
      data: { activeTargets: { scrapeUrl: string; health: string; lastError: string }[] };
    };
    return JSON.stringify(body.data.activeTargets.map((t) => [t.scrapeUrl, t.health, t.lastError]));
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const exited = new Promise((resolve) => this.child.once("exit", resolve));
      this.child.kill("SIGTERM");
      const timer = setTimeout(() => this.child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
