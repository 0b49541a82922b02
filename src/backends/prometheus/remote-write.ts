/**
 * Prometheus remote write 1.0: `WriteRequest` protobuf (prompb `remote.proto`/`types.proto`, the
 * fields used here), Snappy block-compressed, POSTed with `Content-Encoding: snappy` and
 * `X-Prometheus-Remote-Write-Version: 0.1.0`.
 *
 * Samples wait in a bounded queue (oldest dropped first when full, counted and reported) and go
 * out in requests of at most `maxSamplesPerSend`, one at a time; each request has a deadline,
 * 5xx/429/network failures are retried with backoff within a budget (the one retry loop,
 * `core/retry.ts`),
 * and a request that fails for good is reported with the number of samples lost. Nothing is
 * dropped without a count.
 */
import protobuf from "protobufjs/light.js";
import { compress } from "snappyjs";
import { describeError, reportError } from "../../core/diagnostics.js";
import { DEADLINE, withDeadline } from "../../core/deadline.js";
import { retry, type AttemptOutcome } from "../../core/retry.js";
import type { Sample } from "./exposition.js";

const descriptor = {
  nested: {
    prometheus: {
      nested: {
        WriteRequest: {
          fields: {
            timeseries: { rule: "repeated", type: "TimeSeries", id: 1 },
            metadata: { rule: "repeated", type: "MetricMetadata", id: 3 },
          },
        },
        TimeSeries: {
          fields: {
            labels: { rule: "repeated", type: "Label", id: 1 },
            samples: { rule: "repeated", type: "Sample", id: 2 },
          },
        },
        Label: { fields: { name: { type: "string", id: 1 }, value: { type: "string", id: 2 } } },
        Sample: { fields: { value: { type: "double", id: 1 }, timestamp: { type: "int64", id: 2 } } },
        MetricMetadata: {
          fields: {
            type: { type: "MetricType", id: 1 },
            metric_family_name: { type: "string", id: 2 },
            help: { type: "string", id: 4 },
            unit: { type: "string", id: 5 },
          },
          nested: {
            MetricType: {
              values: {
                UNKNOWN: 0,
                COUNTER: 1,
                GAUGE: 2,
                HISTOGRAM: 3,
                GAUGEHISTOGRAM: 4,
                SUMMARY: 5,
                INFO: 6,
                STATESET: 7,
              },
            },
          },
        },
      },
    },
  },
};

const WriteRequest = protobuf.Root.fromJSON(descriptor).lookupType("prometheus.WriteRequest");

/** The `WriteRequest` message type (protobufjs), e.g. to decode a request in a test. */
export function writeRequestType(): protobuf.Type {
  return WriteRequest;
}

/** Series metadata sent along (Prometheus shows it in `/api/v1/metadata`). */
export interface SeriesMetadata {
  readonly type: "gauge" | "counter" | "histogram" | "summary";
  readonly name: string;
  readonly help: string;
  /** The unit's word (`seconds`), or `` when none is known. */
  readonly unit?: string;
}

const METADATA_TYPE = { counter: 1, gauge: 2, histogram: 3, summary: 5 } as const;

/** Encode samples as a `WriteRequest` (labels sorted by name, one series per label set, samples by time). */
export function encodeWriteRequest(samples: readonly Sample[], metadata: readonly SeriesMetadata[] = []): Uint8Array {
  const series = new Map<
    string,
    { labels: { name: string; value: string }[]; samples: { value: number; timestamp: number }[] }
  >();
  for (const s of samples) {
    const labels = Object.entries(s.labels)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([name, value]) => ({ name, value }));
    const id = JSON.stringify(labels);
    let entry = series.get(id);
    if (entry === undefined) {
      entry = { labels, samples: [] };
      series.set(id, entry);
    }
    entry.samples.push({ value: s.value, timestamp: s.timestamp });
  }
  const timeseries = [...series.values()].map((t) => ({
    labels: t.labels,
    samples: t.samples.sort((a, b) => a.timestamp - b.timestamp),
  }));
  const meta = metadata.map((m) => ({
    type: METADATA_TYPE[m.type],
    metric_family_name: m.name,
    help: m.help,
    unit: m.unit ?? "",
  }));
  return WriteRequest.encode(WriteRequest.create({ timeseries, metadata: meta })).finish();
}

/** Snappy block compression of a request body, as remote write wants it. */
export function snappyCompress(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  const out = compress(bytes);
  // snappyjs allocates a plain ArrayBuffer (what fetch takes as a body): a view of it, no copy.
  return out.buffer instanceof ArrayBuffer
    ? new Uint8Array(out.buffer, out.byteOffset, out.byteLength)
    : Uint8Array.from(out);
}

/** Options of a `RemoteWriter`. */
interface RemoteWriterOptions {
  /** The receiver, e.g. `http://127.0.0.1:9090/api/v1/write`. */
  readonly url: string;
  /** Extra request headers (e.g. `Authorization`); never logged. */
  readonly headers: Readonly<Record<string, string>>;
  /** Deadline of one request. */
  readonly timeoutMs: number;
  /** How long failed requests are retried before their samples are given up. */
  readonly retryBudgetMs: number;
  readonly maxQueuedSamples: number;
  readonly maxSamplesPerSend: number;
  /** Name used in diagnostics, e.g. `prometheus_remote_write`. */
  readonly name: string;
}

/** Counts of a `RemoteWriter`: what was sent, and every loss by cause. */
export interface RemoteWriterStats {
  sentSamples: number;
  requests: number;
  failedRequests: number;
  retries: number;
  /** Samples dropped because the queue was full. */
  droppedSamples: number;
  /** Samples in requests that failed for good, or still queued at the finish deadline. */
  lostSamples: number;
}

/** A bounded queue of samples with one sender. */
export class RemoteWriter {
  private queue: Sample[] = [];
  private metadata = new Map<string, SeriesMetadata>();
  private sending: Promise<void> | null = null;
  private readonly stop = new AbortController();
  readonly stats: RemoteWriterStats = {
    sentSamples: 0,
    requests: 0,
    failedRequests: 0,
    retries: 0,
    droppedSamples: 0,
    lostSamples: 0,
  };

  constructor(private readonly options: RemoteWriterOptions) {}

  /** Queue samples (and their families' metadata) and start sending if idle. Never waits. */
  push(samples: readonly Sample[], metadata: readonly SeriesMetadata[] = []): void {
    for (const m of metadata) this.metadata.set(m.name, m);
    for (const s of samples) this.queue.push(s);
    const excess = this.queue.length - this.options.maxQueuedSamples;
    if (excess > 0) {
      this.queue.splice(0, excess);
      this.stats.droppedSamples += excess;
      reportError(
        `${this.options.name}.queueFull`,
        `${this.options.name}: the send queue is full (${this.options.maxQueuedSamples} samples; the receiver is slow or down); dropped the ${excess} oldest samples (counted in its stats).`,
      );
    }
    this.sending ??= this.sendAll().finally(() => {
      this.sending = null;
    });
  }

  private async sendAll(): Promise<void> {
    while (this.queue.length > 0 && !this.stop.signal.aborted) {
      const batch = this.queue.splice(0, this.options.maxSamplesPerSend);
      const metadata = [...this.metadata.values()];
      this.metadata.clear();
      const body = snappyCompress(encodeWriteRequest(batch, metadata));
      this.stats.requests++;
      const result = await retry(() => this.post(body), {
        initialMs: 100,
        maxMs: 5000,
        deadlineMs: this.options.retryBudgetMs,
        stop: this.stop.signal,
        onRetry: () => {
          this.stats.retries++;
        },
      });
      if (result.ok) {
        this.stats.sentSamples += batch.length;
      } else {
        this.stats.failedRequests++;
        this.stats.lostSamples += batch.length;
        const why =
          result.why === "deadline"
            ? ` (retried for ${this.options.retryBudgetMs} ms)`
            : result.why === "stopped"
              ? " (stopped at the finish deadline)"
              : "";
        reportError(
          `${this.options.name}.send`,
          `${this.options.name}: ${batch.length} samples were not written: ${result.last.reason}${why}`,
        );
      }
    }
  }

  private async post(body: Uint8Array<ArrayBuffer>): Promise<AttemptOutcome<void>> {
    const url = this.options.url;
    let response: Response;
    try {
      response = await fetch(url, {
        method: "POST",
        headers: {
          ...this.options.headers,
          "content-type": "application/x-protobuf",
          "content-encoding": "snappy",
          "x-prometheus-remote-write-version": "0.1.0",
          "user-agent": "rankscope",
        },
        body,
        signal: AbortSignal.any([AbortSignal.timeout(this.options.timeoutMs), this.stop.signal]),
      });
    } catch (error) {
      const reason =
        error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")
          ? `timed out after ${this.options.timeoutMs} ms`
          : describeError(error);
      return { ok: false, retryable: true, reason: `POST ${url}: ${reason}` };
    }
    const text = await response.text().catch(() => "");
    if (response.ok) return { ok: true, value: undefined };
    const retryable = response.status >= 500 || response.status === 429;
    return { ok: false, retryable, reason: `POST ${url}: HTTP ${response.status} ${text.trim().slice(0, 200)}` };
  }

  /** Everything queued so far sent (or given up), within `deadlineMs`; what is left then is counted lost. */
  async drain(deadlineMs: number): Promise<void> {
    const end = Date.now() + deadlineMs;
    while (this.sending !== null && (await withDeadline(this.sending, Math.max(0, end - Date.now()))) !== DEADLINE);
    if (this.sending !== null || this.queue.length > 0) {
      this.stop.abort();
      const left = this.queue.length;
      this.queue = [];
      if (left > 0) {
        this.stats.lostSamples += left;
        reportError(
          `${this.options.name}.finishDeadline`,
          `${this.options.name}: ${left} queued samples were not sent within the finish deadline (${deadlineMs} ms).`,
        );
      }
      await this.sending?.catch(() => {});
    }
  }
}
