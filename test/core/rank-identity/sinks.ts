/**
 * Reading what each sink received, for the identity tests: TensorBoard runs through TensorBoard's
 * own reader (the test venv, test/helpers/python.ts), an OTLP/HTTP receiver decoding with the
 * official OTLP protos, and the console's stream lines.
 */
import { spawnSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync } from "node:zlib";
import protobuf from "protobufjs";
import { freePort } from "../../transport/support.js";

const here = dirname(fileURLToPath(import.meta.url));

/** Every run under each of `logdirs` as TensorBoard's Python reader gives it, one Python process for all: run → tag → [step, value][]. */
export function readTensorBoard(
  python: string,
  logdirs: readonly string[],
): Record<string, Record<string, [number, number][]>>[] {
  const result = spawnSync(python, [join(here, "python", "read_tensorboard.py"), ...logdirs], {
    encoding: "utf8",
    timeout: 120_000,
    maxBuffer: 64 << 20,
  });
  if (result.status !== 0) throw new Error(`read_tensorboard.py failed (${result.status}): ${result.stderr}`);
  return JSON.parse(result.stdout) as Record<string, Record<string, [number, number][]>>[];
}

const protoRoot = join(here, "..", "..", "fixtures", "opentelemetry-proto");
const root = new protobuf.Root();
root.resolvePath = (_origin, target) => join(protoRoot, target);
root.loadSync("opentelemetry/proto/collector/metrics/v1/metrics_service.proto", { keepCase: true });
const ExportRequest = root.lookupType("opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest");
const ExportResponse = root.lookupType("opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceResponse");

type AnyValue = { string_value?: string; int_value?: string; double_value?: number };
type KeyValue = { key: string; value: AnyValue };
type NumberPoint = { as_double?: number; time_unix_nano: string };
type OtlpMetric = { name: string; gauge?: { data_points: NumberPoint[] }; sum?: { data_points: NumberPoint[] } };
/** One export, decoded (protobufjs's toObject: longs as strings). */
export type OtlpRequest = {
  resource_metrics: { resource: { attributes: KeyValue[] }; scope_metrics: { metrics: OtlpMetric[] }[] }[];
};

/** A resource's attributes as a plain object. */
export function otlpAttributes(list: readonly KeyValue[]): Record<string, string | number> {
  return Object.fromEntries(
    list.map((kv) => [kv.key, kv.value.string_value ?? Number(kv.value.int_value ?? kv.value.double_value)]),
  );
}

/** The data points' values of metric `name` in one resource's metrics. */
export function otlpValues(metrics: readonly OtlpMetric[], name: string): number[] {
  const m = metrics.find((x) => x.name === name);
  return (m?.sum ?? m?.gauge)?.data_points.map((p) => p.as_double ?? NaN) ?? [];
}

/** A local OTLP/HTTP receiver (127.0.0.1) that decodes every export with the official protos. */
export class OtlpReceiver {
  readonly requests: OtlpRequest[] = [];
  url = "";
  private server: Server | undefined;

  async start(): Promise<void> {
    const port = await freePort();
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        let body = Buffer.concat(chunks);
        if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
        this.requests.push(
          ExportRequest.toObject(ExportRequest.decode(body), {
            longs: String,
            enums: String,
            defaults: true,
          }) as OtlpRequest,
        );
        res.writeHead(200, { "content-type": "application/x-protobuf" });
        res.end(ExportResponse.encode(ExportResponse.create({})).finish());
      });
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${port}/v1/metrics`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server === undefined ? resolve() : this.server.close(() => resolve())));
  }
}

/**
 * The console's stream lines, `{prefix} date time INFO key: value`, by prefix: `[controller] [Name]`
 * for the controller, Forge's `[l] [Process-l/w]` for a rank, and ` [thread t]` after either for a
 * user worker's.
 */
export function consoleStreams(stdout: string, key: string): Map<string, number[]> {
  const out = new Map<string, number[]>();
  // Not anchored at the line's start: under `--test` the runner's own events share stdout.
  const line = new RegExp(
    `(\\[(?:controller|\\d+)\\] \\[[^\\]]+\\](?: \\[thread \\d+\\])?) \\S+ \\S+ INFO ${key}: (\\S+)$`,
    "gm",
  );
  for (const m of stdout.matchAll(line)) {
    const prefix = m[1] ?? "";
    const values = out.get(prefix) ?? [];
    values.push(Number(m[2]));
    out.set(prefix, values);
  }
  return out;
}
