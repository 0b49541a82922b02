/**
 * `jsonl`: one JSON object per line, per metric.
 *
 * Reduced metrics: `{"key","value","reduce","step","timestamp"}` plus `"rankName"` in per-rank
 * modes (and `"role":"controller"` for the controller's own); stream records:
 * `{"key","value","step","timestamp","rank","rankName"}`, the controller's with `"role":"controller"`
 * instead of `"rank"`, a user worker thread's with `"thread"` (docs/DESIGN.md, "Identity"). NaN and ±Infinity
 * are written as the strings "NaN", "Infinity", "-Infinity" (the proto3 JSON mapping for doubles),
 * so `parseNumber` — or `Number()` — reads them back as themselves; magnitudes from 2^53 up in
 * exponent form, bigints in samples exactly (`jsonText`). Timestamps are milliseconds since the epoch.
 *
 * Options: `file`, the path relative to the run directory (default `metrics.jsonl` on the
 * controller, `metrics-{rankName}.jsonl` per rank).
 */
import { recorderJsonFields, roleOf } from "../../core/rank-identity.js";
import { isAbsolute, join } from "node:path";
import { jsonNumberText, jsonText } from "../../core/json.js";
import type { HistogramMetric, Metric, SampleBatch, StreamRecord } from "../../core/metric.js";
import { AppendFile } from "../../io/append-file.js";
import type { Backend, BackendContext, BackendOptions } from "../backend.js";
import { registerBackend } from "../backend.js";
import { stringOption } from "../option-values.js";
import { JSONL_OPTIONS } from "./options.js";

class JsonlBackend implements Backend {
  private file: AppendFile | null = null;
  private rankField = "";

  constructor(private readonly options: BackendOptions) {}

  init(context: BackendContext): void {
    const name = stringOption(
      this.options,
      "file",
      context.role === "controller" ? "metrics.jsonl" : `metrics-${context.identity.rankName}.jsonl`,
    );
    this.file = new AppendFile(isAbsolute(name) ? name : join(context.runDir, name));
    // Per-rank lines say whose they are; the controller's own are `"role":"controller"`, never rank 0's.
    this.rankField =
      context.role === "rank"
        ? `,"rankName":${JSON.stringify(context.identity.rankName)}${roleOf(context.identity) === "controller" ? `,"role":"controller"` : ""}`
        : "";
  }

  logBatch(metrics: readonly Metric[], step: number): void {
    let text = "";
    for (const m of metrics) {
      text += `{"key":${JSON.stringify(m.key)},"value":${jsonNumberText(m.value)},"reduce":${JSON.stringify(m.reduce)},"step":${step},"timestamp":${m.timestamp}${this.rankField}}\n`;
    }
    this.file?.append(text);
  }

  logStream(batch: readonly StreamRecord[]): void {
    let text = "";
    for (const r of batch) {
      text += `{"key":${JSON.stringify(r.key)},"value":${jsonNumberText(r.value)},"step":${r.step},"timestamp":${r.timestamp},${recorderJsonFields(r)},"rankName":${JSON.stringify(r.rankName)}}\n`;
    }
    this.file?.append(text);
  }

  logSamples(samples: SampleBatch, step: number): void {
    let text = "";
    for (const key of Object.keys(samples).sort()) {
      text += `${jsonText({ key, samples: samples[key], step, timestamp: Date.now() })}\n`;
    }
    this.file?.append(text);
  }

  logHistograms(histograms: readonly HistogramMetric[], step: number): void {
    let text = "";
    for (const h of histograms)
      text += `${jsonText({ key: h.key, histogram: h.histogram, step, timestamp: h.timestamp })}\n`;
    this.file?.append(text);
  }

  async flushed(): Promise<void> {
    await this.file?.drain();
  }

  async finish(): Promise<void> {
    await this.file?.drain();
  }
}

registerBackend("jsonl", (options) => new JsonlBackend(options), { options: JSONL_OPTIONS, pathOptions: ["file"] });
