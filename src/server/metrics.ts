/**
 * The server's own metrics on `/metrics` (prom-client, Prometheus text format): ingest rate, the
 * sync lag of what arrives, rejections by reason, requests by outcome and time, and where a
 * request's time goes: each pool's use (connections, the wait for one, how long one is held), the
 * ingest batches waiting for a slot, and the event loop's delay.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import type pg from "pg";
import type { PoolObserver } from "./db.js";
import { requireOptional } from "../core/optional-packages.js";

const { Counter, Gauge, Histogram, Registry } = requireOptional<typeof import("prom-client")>("server", "prom-client");

/** The event loop's timer interval (ms). */
const LOOP_RESOLUTION_MS = 10;

/** Every metric of one server. */
export class ServerMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: "rankscope_server_requests_total",
    help: "HTTP requests answered, by kind and status class",
    labelNames: ["kind", "status"],
    registers: [this.registry],
  });
  readonly rejected = new Counter({
    name: "rankscope_server_rejected_total",
    help: "Requests refused, by reason",
    labelNames: ["reason"],
    registers: [this.registry],
  });
  readonly batches = new Counter({
    name: "rankscope_server_ingest_batches_total",
    help: "Ingest batches applied",
    registers: [this.registry],
  });
  readonly points = new Counter({
    name: "rankscope_server_ingest_points_total",
    help: "Points stored (re-sent points already applied are not counted)",
    registers: [this.registry],
  });
  readonly records = new Counter({
    name: "rankscope_server_ingest_records_total",
    help: "Samples and histograms stored",
    registers: [this.registry],
  });
  readonly fileBytes = new Counter({
    name: "rankscope_server_ingest_file_bytes_total",
    help: "Bytes of text logs and trace files stored",
    registers: [this.registry],
  });
  readonly bodyBytes = new Counter({
    name: "rankscope_server_ingest_body_bytes_total",
    help: "Compressed ingest bytes received",
    registers: [this.registry],
  });
  readonly tokenLookups = new Counter({
    name: "rankscope_server_token_lookups_total",
    help: "Queries of the tokens table (a token not in the cache, of a format the server makes)",
    registers: [this.registry],
  });
  readonly errors = new Counter({
    name: "rankscope_server_errors_total",
    help: "Requests that failed inside the server (500s)",
    registers: [this.registry],
  });
  readonly syncLag = new Histogram({
    name: "rankscope_server_sync_lag_seconds",
    help: "From a job's last store commit (the batch's updatedAt) to the batch being applied",
    buckets: [0.1, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600],
    registers: [this.registry],
  });
  readonly requestSeconds = new Histogram({
    name: "rankscope_server_request_seconds",
    help: "Time to answer a request, by kind (ingest, api, …)",
    labelNames: ["kind"],
    buckets: [0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
    registers: [this.registry],
  });
  readonly poolWaitSeconds = new Histogram({
    name: "rankscope_server_db_pool_wait_seconds",
    help: "Time a query or transaction waited for a connection, by pool (read: the dashboard, the API, token checks; ingest)",
    labelNames: ["pool"],
    buckets: [0.001, 0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
    registers: [this.registry],
  });
  readonly poolHeldSeconds = new Histogram({
    name: "rankscope_server_db_connection_held_seconds",
    help: "Time a connection was held: a query, or an ingest batch's whole transaction, by pool",
    labelNames: ["pool"],
    buckets: [0.001, 0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10],
    registers: [this.registry],
  });
  /** The event loop's delay since the last scrape: its timer's intervals, `LOOP_RESOLUTION_MS` apart when idle. */
  private readonly loop = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  readonly applySeconds = new Histogram({
    name: "rankscope_server_ingest_apply_seconds",
    help: "Time to apply one batch in PostgreSQL",
    buckets: [0.005, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2, 5],
    registers: [this.registry],
  });

  /** `rankscope_server_inflating_bytes`: what the ingest requests hold inflated now. */
  watchInflating(budget: { readonly used: number }): void {
    new Gauge({
      name: "rankscope_server_inflating_bytes",
      help: "Bytes of batches inflated and held by ingest requests now (bounded by the server's inflate budget)",
      registers: [this.registry],
      collect() {
        this.set(budget.used);
      },
    });
  }

  /** A pool's observer, feeding the wait and held histograms under its name. */
  poolObserver(name: "read" | "ingest"): PoolObserver {
    return {
      waited: (s) => this.poolWaitSeconds.observe({ pool: name }, s),
      held: (s) => this.poolHeldSeconds.observe({ pool: name }, s),
    };
  }

  /** `rankscope_server_db_pool_connections{pool,state}`: a pool's connections now. */
  watchPool(name: "read" | "ingest", pool: pg.Pool): void {
    this.poolConnections.push({ name, pool });
  }

  private readonly poolConnections: { name: string; pool: pg.Pool }[] = [];

  /** `rankscope_server_ingest_batches_active` and `…_waiting`: the ingest gate now. */
  watchIngestGate(gate: { readonly active: number; readonly waiting: number }): void {
    new Gauge({
      name: "rankscope_server_ingest_batches_in_progress",
      help: "Ingest batches being worked on (active, at most the ingest pool's size) and waiting for a slot",
      labelNames: ["state"],
      registers: [this.registry],
      collect() {
        this.set({ state: "active" }, gate.active);
        this.set({ state: "waiting" }, gate.waiting);
      },
    });
  }

  constructor() {
    const pools = this.poolConnections;
    new Gauge({
      name: "rankscope_server_db_pool_connections",
      help: "Each PostgreSQL pool's connections: total, idle, and requests waiting for one",
      labelNames: ["pool", "state"],
      registers: [this.registry],
      collect() {
        for (const { name, pool } of pools) {
          this.set({ pool: name, state: "total" }, pool.totalCount);
          this.set({ pool: name, state: "idle" }, pool.idleCount);
          this.set({ pool: name, state: "waiting" }, pool.waitingCount);
        }
      },
    });
    const loop = this.loop;
    loop.enable();
    new Gauge({
      name: "rankscope_server_event_loop_delay_seconds",
      help: "The event loop's delay since the last scrape (p50, p99, max): how long a ready request waited for the loop",
      labelNames: ["stat"],
      registers: [this.registry],
      collect() {
        // What the timer waited past its interval.
        const late = (ns: number): number => Math.max(0, ns / 1e9 - LOOP_RESOLUTION_MS / 1000);
        this.set({ stat: "p50" }, late(loop.percentile(50)));
        this.set({ stat: "p99" }, late(loop.percentile(99)));
        this.set({ stat: "max" }, late(loop.max));
        loop.reset();
      },
    });
  }

  /** Stop watching the event loop (the server stopped). */
  stop(): void {
    this.loop.disable();
  }
}
