/**
 * The server's own metrics on `/metrics` (prom-client, Prometheus text format): ingest rate, the
 * sync lag of what arrives, rejections by reason, requests by outcome, and the pool's use.
 */
import type pg from "pg";
import { Counter, Gauge, Histogram, Registry } from "prom-client";

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

  constructor(pool: pg.Pool) {
    new Gauge({
      name: "rankscope_server_db_pool_connections",
      help: "The PostgreSQL pool's connections: total, idle, and requests waiting for one",
      labelNames: ["state"],
      registers: [this.registry],
      collect() {
        this.set({ state: "total" }, pool.totalCount);
        this.set({ state: "idle" }, pool.idleCount);
        this.set({ state: "waiting" }, pool.waitingCount);
      },
    });
  }
}
