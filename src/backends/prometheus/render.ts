/**
 * `/metrics`: the families of every live Prometheus backend of this process in the Prometheus text
 * format (0.0.4) or OpenMetrics 1.0, rendered by prom-client's `Registry`.
 *
 * Each family is handed to the registry as a metric object (`name`, `help`, `type`, `get()`), the
 * interface prom-client's own metric types implement, so prom-client does the escaping, label
 * formatting and counter naming. Two corrections: prom-client 15 writes NaN as `Nan`; Prometheus'
 * parser takes it (Go's ParseFloat ignores case) but OpenMetrics spells it `NaN`, so a value
 * `Nan` at the end of a line is rewritten. And it writes values with `String`, which gives a
 * magnitude from 2^53 up as zero-padded integer digits (`9223372036854776000`, beyond int64, and
 * not the double's own digits): such a value is rewritten in exponent form (`numberText`), which
 * every parser reads as the same double.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Metric, RegistryContentType } from "prom-client";
import { requireOptional } from "../../core/optional-packages.js";
import { numberText } from "../../core/json.js";
import { processWide } from "../../core/process-wide.js";
import { seriesValues, type Exposition, type Family } from "./exposition.js";
import { describeError } from "../../core/diagnostics.js";

/** prom-client, an optional peer dependency (`npm install prom-client`; core/optional-packages.ts). */
const client = requireOptional<typeof import("prom-client")>("prometheus", "prom-client");

/** A value of 16 or more integer digits at the end of a line (from 2^53 up, `String` writes those). */
const LONG_INTEGER = / -?\d{16,}$/m;
const LONG_INTEGERS = / (-?\d{16,})$/gm;

/** The expositions of every live Prometheus backend in this process, rendered together. */
export function liveExpositions(): Set<Exposition> {
  return processWide("prometheusExpositions", () => new Set<Exposition>());
}

interface PromValue {
  metricName?: string;
  /** Not copied: prom-client only reads labels (no default labels are set on this registry). */
  labels: Readonly<Record<string, string>>;
  value: number;
}

function valuesOf(family: Family): PromValue[] {
  const out: PromValue[] = [];
  for (const s of family.series.values()) {
    for (const v of seriesValues(family, s)) {
      // A counter's sample name is left to prom-client: `_total` in both formats.
      out.push(
        family.type === "counter"
          ? { labels: v.labels, value: v.value }
          : { metricName: v.metricName, labels: v.labels, value: v.value },
      );
    }
  }
  return out;
}

/** Render expositions (default: every live one) as text; `openMetrics` selects OpenMetrics 1.0. */
export async function renderMetrics(
  expositions: Iterable<Exposition> = liveExpositions(),
  openMetrics = false,
): Promise<string> {
  const registry = new client.Registry<RegistryContentType>();
  registry.setContentType(metricsContentType(openMetrics));
  const byName = new Map<string, { name: string; help: string; type: string; unit: string; values: PromValue[] }>();
  for (const exposition of expositions) {
    for (const family of exposition.families.values()) {
      const found = byName.get(family.name);
      if (found !== undefined && found.type === family.type) found.values.push(...valuesOf(family));
      else if (found === undefined)
        byName.set(family.name, {
          name: family.name,
          help: family.help,
          type: family.type,
          unit: family.unit,
          values: valuesOf(family),
        });
    }
  }
  for (const metric of [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
    // OpenMetrics names a counter family without `_total` and its sample with it (prom-client adds it).
    const name = openMetrics && metric.type === "counter" ? metric.name.replace(/_total$/, "") : metric.name;
    const data = { ...metric, name, aggregator: "sum" };
    // prom-client has no public way to register values computed elsewhere: its own cluster
    // aggregation registers the same duck-typed `{ get }` object, which its types do not describe.
    registry.registerMetric({ ...data, get: () => data } as unknown as Metric);
  }
  if (byName.size === 0) return openMetrics ? "# EOF\n" : "";
  const text = withUnits(await registry.metrics(), byName.values(), openMetrics);
  const spelled = text.includes(" Nan") ? text.replace(/ Nan$/gm, " NaN") : text;
  return LONG_INTEGER.test(spelled)
    ? spelled.replace(LONG_INTEGERS, (_match, digits: string) => ` ${numberText(Number(digits))}`)
    : spelled;
}

/**
 * OpenMetrics' `# UNIT` line after the `# TYPE` line of each family with a unit (prom-client
 * writes none); the 0.0.4 text format has no unit line. A counter's OpenMetrics family name is
 * without `_total`, so still ends with its unit.
 */
function withUnits(
  text: string,
  families: Iterable<{ readonly name: string; readonly type: string; readonly unit: string }>,
  openMetrics: boolean,
): string {
  if (!openMetrics) return text;
  const units = new Map<string, string>();
  for (const f of families) {
    if (f.unit !== "") units.set(f.type === "counter" ? f.name.replace(/_total$/, "") : f.name, f.unit);
  }
  if (units.size === 0) return text;
  return text.replace(/^# TYPE (\S+) \S+$/gm, (line, name: string) => {
    const unit = units.get(name);
    return unit === undefined ? line : `${line}\n# UNIT ${name} ${unit}`;
  });
}

/** The content type of a rendering. */
function metricsContentType(openMetrics: boolean): RegistryContentType {
  return openMetrics ? client.Registry.OPENMETRICS_CONTENT_TYPE : client.Registry.PROMETHEUS_CONTENT_TYPE;
}

/** Whether a scrape asked for OpenMetrics (its `Accept` header names `application/openmetrics-text`). */
function wantsOpenMetrics(accept: string | undefined): boolean {
  return accept !== undefined && accept.includes("application/openmetrics-text");
}

/**
 * A request handler serving `/metrics` of every Prometheus backend of this process (or of the given
 * expositions), to mount in your own HTTP server (`prometheus: { loggingMode, serve: false }`).
 * Answers any path it is given.
 */
export function metricsHandler(
  expositions: Iterable<Exposition> = liveExpositions(),
): (request: IncomingMessage, response: ServerResponse) => void {
  return (request, response) => {
    const openMetrics = wantsOpenMetrics(request.headers.accept);
    renderMetrics(expositions, openMetrics).then(
      (text) => {
        response.writeHead(200, { "content-type": metricsContentType(openMetrics) });
        response.end(text);
      },
      (error: unknown) => {
        response.writeHead(500, { "content-type": "text/plain; charset=utf-8" });
        response.end(`rendering /metrics failed: ${describeError(error)}\n`);
      },
    );
  };
}
