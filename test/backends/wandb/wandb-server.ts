/**
 * A strict local W&B server for contract tests.
 *
 * The W&B cloud cannot be reached from here, so the `wandb` backend is tested against this server
 * on 127.0.0.1: it implements the part of W&B's HTTP API rankscope uses (the `UpsertBucket` and
 * `RunResumeStatus` GraphQL operations, and the file-stream endpoint) and is stricter than the real
 * one: every request must carry the basic-auth header, GraphQL shapes are checked, file-stream
 * offsets must be contiguous per client (a retry may resend the same lines at the same offset,
 * nothing else may overlap), every history line must parse and carry `_step`, `_timestamp` and
 * `_runtime`, `_step` must increase per client, and nothing may arrive after `complete`. Anything
 * else is answered with a 4xx and recorded in `violations`, which every test expects to be empty.
 *
 * Faults are injected per request (`injectFaults`): HTTP 500, 429 with `Retry-After`, a response
 * that never comes in time (the request is applied, the answer is late: the client's retry must be
 * idempotent), and a reset connection. `stop()` / `start()` make the port refuse connections and
 * come back with the same data.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { parseHistoryJson } from "../../../src/backends/wandb/client/history.js";

/** One history line, parsed. */
export type HistoryRow = Record<string, number | string | boolean | null | object>;

/** What the server knows about a run. */
export interface ServerRun {
  readonly id: string;
  readonly entity: string;
  readonly project: string;
  readonly name: string;
  displayName: string;
  groupName: string | null;
  jobType: string | null;
  config: Record<string, unknown>;
  tags: string[] | null;
  /** History lines per client ("" for a run that is not shared). */
  readonly history: Map<string, string[]>;
  summary: Record<string, unknown>;
  complete: boolean;
  exitcode: number | null;
  shared: boolean | null;
  upserts: number;
  /** Run files: name → content, as uploaded to the URL `CreateRunFiles` handed out. */
  readonly files: Map<string, Buffer>;
  /** Names the client reported `uploaded` in the file stream (each must have been uploaded first). */
  readonly uploaded: Set<string>;
}

export type Fault =
  | { readonly kind: "status"; readonly status: number; readonly retryAfter?: string }
  | { readonly kind: "late"; readonly ms: number }
  | { readonly kind: "reset" };

/** Which requests a fault applies to. */
export type FaultTarget = "graphql" | "file_stream" | "any";

/** W&B history JSON with bare `NaN` / `Infinity` / `-Infinity` tokens: the backend's one parser. */
export const parseWandbJson = parseHistoryJson;

export class StrictWandbServer {
  readonly runs = new Map<string, ServerRun>();
  readonly violations: string[] = [];
  /** Every request: method, path, status answered. */
  readonly requests: { path: string; status: number; kind: FaultTarget; clientId: string | null }[] = [];
  private readonly faults: { target: FaultTarget; fault: Fault }[] = [];
  private server: Server | null = null;
  private nextId = 1;
  port = 0;

  constructor(
    readonly apiKey: string,
    readonly defaultEntity = "test-entity",
  ) {}

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Listen on 127.0.0.1 (a free port the first time, the same port after `stop()`). */
  async start(): Promise<void> {
    const server = createServer((req, res) => void this.handle(req, res));
    server.keepAliveTimeout = 1000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, "127.0.0.1", () => resolve());
    });
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Close the port and every open connection: clients now get "connection refused". */
  async stop(): Promise<void> {
    const server = this.server;
    if (server === null) return;
    this.server = null;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Queue faults for the next matching requests, in order. */
  injectFaults(target: FaultTarget, ...faults: Fault[]): void {
    for (const fault of faults) this.faults.push({ target, fault });
  }

  /** Faults not yet used. */
  get pendingFaults(): number {
    return this.faults.length;
  }

  /** A run by its id (whatever the entity/project). */
  run(name: string): ServerRun | undefined {
    return [...this.runs.values()].find((r) => r.name === name);
  }

  /** Parsed history of a run: one client's, or every client's concatenated. */
  history(name: string, clientId?: string): HistoryRow[] {
    const run = this.run(name);
    if (run === undefined) return [];
    const lines = clientId === undefined ? [...run.history.values()].flat() : (run.history.get(clientId) ?? []);
    return lines.map((l) => parseWandbJson(l) as HistoryRow);
  }

  /** Requests to the file-stream endpoint so far. */
  get fileStreamRequests(): number {
    return this.requests.filter((r) => r.kind === "file_stream").length;
  }

  private violation(res: ServerResponse, status: number, message: string): void {
    this.violations.push(message);
    this.answer(res, status, { error: message });
  }

  private answer(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString("utf8");
    const path = req.url ?? "";
    const kind: FaultTarget = path === "/graphql" ? "graphql" : path.endsWith("/file_stream") ? "file_stream" : "any";
    const clientHeader = req.headers["x-wandb-async-client-id"];
    const record = { path, status: 0, kind, clientId: typeof clientHeader === "string" ? clientHeader : null };
    this.requests.push(record);
    const original = res.writeHead.bind(res);
    res.writeHead = (status: number, ...rest: never[]) => {
      record.status = status;
      return original(status, ...rest);
    };

    const index = this.faults.findIndex((f) => f.target === "any" || f.target === kind);
    const fault = index >= 0 ? this.faults.splice(index, 1)[0]?.fault : undefined;
    if (fault?.kind === "reset") {
      record.status = -1;
      req.socket.destroy();
      return;
    }
    if (fault?.kind === "status") {
      this.answer(
        res,
        fault.status,
        { error: "injected fault" },
        fault.retryAfter === undefined ? {} : { "retry-after": fault.retryAfter },
      );
      return;
    }
    const upload = /^\/upload\/([^/]+)\/([^/]+)\/([^/]+)\/(.+)$/.exec(path);
    if (upload !== null)
      return this.upload(
        upload.slice(1).map((m) => decodeURIComponent(m)) as [string, string, string, string],
        req,
        Buffer.concat(chunks),
        res,
      );
    if (req.method !== "POST")
      return this.violation(res, 405, `${req.method} ${path}: only POST is used (PUT only to an upload URL)`);
    const expected = `Basic ${Buffer.from(`api:${this.apiKey}`).toString("base64")}`;
    if (req.headers.authorization !== expected)
      return this.violation(res, 401, `${path}: missing or wrong basic auth (user "api", password = API key)`);
    if (!String(req.headers["content-type"] ?? "").includes("application/json"))
      return this.violation(res, 415, `${path}: content-type must be application/json`);
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return this.violation(res, 400, `${path}: body is not JSON`);
    }
    // A late answer: the request is applied now, the client hears back only after `ms`.
    const respond =
      fault?.kind === "late"
        ? (status: number, payload: unknown) => {
            const timer = setTimeout(() => {
              if (!res.destroyed) this.answer(res, status, payload);
            }, fault.ms);
            res.on("close", () => clearTimeout(timer));
          }
        : (status: number, payload: unknown) => this.answer(res, status, payload);
    if (kind === "graphql") return this.graphql(body, req, res, respond);
    const match = /^\/files\/([^/]+)\/([^/]+)\/([^/]+)\/file_stream$/.exec(path);
    if (match === null) return this.violation(res, 404, `${path}: unknown endpoint`);
    const [, entity, project, name] = match.map((m) => decodeURIComponent(m)) as [string, string, string, string];
    return this.fileStream(entity, project, name, body, req, res, respond);
  }

  /**
   * A file PUT to an upload URL `CreateRunFiles` handed out (like a signed storage URL: no W&B
   * auth header needed, but the URL must have been issued for that run and file).
   */
  private upload(
    [entity, project, name, file]: [string, string, string, string],
    req: IncomingMessage,
    content: Buffer,
    res: ServerResponse,
  ): void {
    if (req.method !== "PUT") return this.violation(res, 405, `upload of ${file}: must be PUT`);
    const run = this.runs.get(`${entity}/${project}/${name}`);
    if (run === undefined || !this.issuedUploads.has(`${entity}/${project}/${name}/${file}`))
      return this.violation(res, 403, `upload of ${file}: no upload URL was issued for it`);
    run.files.set(file, content);
    res.writeHead(200);
    res.end();
  }

  private readonly issuedUploads = new Set<string>();

  private graphql(
    body: Record<string, unknown>,
    req: IncomingMessage,
    res: ServerResponse,
    respond: (s: number, p: unknown) => void,
  ): void {
    const query = body["query"];
    // A query without variables may leave them out (wandb-core's ServerFeaturesQuery does).
    const variables = (body["variables"] ?? {}) as Record<string, unknown>;
    if (typeof query !== "string" || variables === null || typeof variables !== "object" || Array.isArray(variables)) {
      return this.violation(res, 400, "graphql: body must be { query: string, variables?: object }");
    }
    if (/query ServerFeaturesQuery\s*\{/.test(query)) {
      // The official SDK (wandb-core) asks which server features exist; this server has none of the optional ones.
      if (!/serverInfo\s*\{\s*features\s*\{\s*name\s+isEnabled/.test(query))
        return this.violation(
          res,
          400,
          "ServerFeaturesQuery: selection must be serverInfo { features { name isEnabled } }",
        );
      return respond(200, { data: { serverInfo: { features: [] } } });
    }
    if (/mutation CreateRunFiles\s*\(/.test(query)) {
      if (
        !/createRunFiles\(input:\s*\{\s*entityName:\s*\$entity,\s*projectName:\s*\$project,\s*runName:\s*\$run,\s*files:\s*\$files\s*\}\)/.test(
          query,
        )
      ) {
        return this.violation(
          res,
          400,
          "CreateRunFiles: input must be { entityName: $entity, projectName: $project, runName: $run, files: $files }",
        );
      }
      for (const field of ["runID", "uploadHeaders", "name", "uploadUrl"])
        if (!query.includes(field)) return this.violation(res, 400, `CreateRunFiles: selection must include ${field}`);
      const {
        entity,
        project,
        run: runName,
        files,
      } = variables as { entity?: unknown; project?: unknown; run?: unknown; files?: unknown };
      if (typeof entity !== "string" || typeof project !== "string" || typeof runName !== "string")
        return this.violation(res, 400, "CreateRunFiles: entity, project and run are required strings");
      if (
        !Array.isArray(files) ||
        files.length === 0 ||
        files.some((f) => typeof f !== "string" || f.length === 0 || f.startsWith("/") || f.split("/").includes(".."))
      ) {
        return this.violation(
          res,
          400,
          `CreateRunFiles: files must be relative run paths, got ${JSON.stringify(files)}`,
        );
      }
      const run = this.runs.get(`${entity}/${project}/${runName}`);
      if (run === undefined)
        return this.violation(res, 404, `CreateRunFiles: no run ${entity}/${project}/${runName} (UpsertBucket first)`);
      const base = `${this.baseUrl}/upload/${encodeURIComponent(entity)}/${encodeURIComponent(project)}/${encodeURIComponent(runName)}`;
      for (const f of files as string[]) this.issuedUploads.add(`${entity}/${project}/${runName}/${f}`);
      return respond(200, {
        data: {
          createRunFiles: {
            runID: run.id,
            uploadHeaders: [],
            files: (files as string[]).map((f) => ({ name: f, uploadUrl: `${base}/${encodeURIComponent(f)}` })),
          },
        },
      });
    }
    if (/mutation UpsertBucket\s*\(/.test(query)) {
      if (
        !/upsertBucket\(input:\s*\{[^}]*name:\s*\$name[^}]*modelName:\s*\$project[^}]*entityName:\s*\$entity/.test(
          query,
        )
      ) {
        return this.violation(
          res,
          400,
          "UpsertBucket: input must map name, modelName ($project) and entityName ($entity)",
        );
      }
      for (const field of ["bucket", "inserted", "project", "entity"]) {
        if (!query.includes(field)) return this.violation(res, 400, `UpsertBucket: selection must include ${field}`);
      }
      const name = variables["name"];
      const project = variables["project"];
      if (typeof name !== "string" || !/^[A-Za-z0-9_.-]+$/.test(name))
        return this.violation(res, 400, `UpsertBucket: name must be a run id, got ${JSON.stringify(name)}`);
      if (typeof project !== "string" || project.length === 0)
        return this.violation(res, 400, "UpsertBucket: project is required");
      const entityVar = variables["entity"];
      if (entityVar !== null && entityVar !== undefined && typeof entityVar !== "string")
        return this.violation(res, 400, "UpsertBucket: entity must be a string or null");
      let config: Record<string, unknown> = {};
      if (variables["config"] !== undefined && variables["config"] !== null) {
        if (typeof variables["config"] !== "string")
          return this.violation(res, 400, "UpsertBucket: config must be a JSONString");
        config = JSON.parse(variables["config"]) as Record<string, unknown>;
        for (const [k, v] of Object.entries(config)) {
          if (v === null || typeof v !== "object" || !("value" in v))
            return this.violation(res, 400, `UpsertBucket: config key ${k} must be { value }`);
        }
      }
      for (const field of [
        "summaryMetrics",
        "description",
        "host",
        "program",
        "repo",
        "commit",
        "state",
        "sweep",
        "id",
      ]) {
        const v = variables[field];
        if (v !== undefined && v !== null && typeof v !== "string")
          return this.violation(res, 400, `UpsertBucket: ${field} must be a string or null`);
      }
      const entity = typeof entityVar === "string" ? entityVar : this.defaultEntity;
      const key = `${entity}/${project}/${name}`;
      let run = this.runs.get(key);
      const inserted = run === undefined;
      if (run === undefined) {
        run = {
          id: `run-${this.nextId++}`,
          entity,
          project,
          name,
          displayName: name,
          groupName: null,
          jobType: null,
          config: {},
          tags: null,
          history: new Map(),
          summary: {},
          complete: false,
          exitcode: null,
          shared: null,
          upserts: 0,
          files: new Map(),
          uploaded: new Set(),
        };
        this.runs.set(key, run);
      }
      run.upserts++;
      // Upserting a finished run resumes it (W&B marks it running again).
      run.complete = false;
      if (typeof variables["displayName"] === "string") run.displayName = variables["displayName"];
      if (typeof variables["groupName"] === "string") run.groupName = variables["groupName"];
      if (typeof variables["jobType"] === "string") run.jobType = variables["jobType"];
      if (Array.isArray(variables["tags"])) run.tags = variables["tags"] as string[];
      run.config = { ...run.config, ...config };
      void req;
      return respond(200, {
        data: {
          upsertBucket: {
            bucket: {
              id: run.id,
              name: run.name,
              displayName: run.displayName,
              description: null,
              config: JSON.stringify(run.config),
              sweepName: null,
              historyLineCount: (run.history.get("") ?? []).length,
              project: {
                id: `project-${run.project}`,
                name: run.project,
                entity: { id: `entity-${run.entity}`, name: run.entity },
              },
            },
            inserted,
          },
        },
      });
    }
    if (/query RunResumeStatus\(/.test(query)) {
      if (typeof variables["name"] !== "string") return this.violation(res, 400, "RunResumeStatus: name is required");
      const entity = typeof variables["entity"] === "string" ? variables["entity"] : this.defaultEntity;
      const run = this.runs.get(`${entity}/${String(variables["project"])}/${variables["name"]}`);
      if (run === undefined) return respond(200, { data: { model: { bucket: null } } });
      const lines = run.history.get("") ?? [];
      return respond(200, {
        data: {
          model: {
            bucket: {
              id: run.id,
              name: run.name,
              historyLineCount: lines.length,
              historyTail: JSON.stringify(lines.slice(-10)),
            },
          },
        },
      });
    }
    return this.violation(res, 400, `graphql: unexpected operation ${query.slice(0, 60)}`);
  }

  private fileStream(
    entity: string,
    project: string,
    name: string,
    body: Record<string, unknown>,
    req: IncomingMessage,
    res: ServerResponse,
    respond: (s: number, p: unknown) => void,
  ): void {
    const run = this.runs.get(`${entity}/${project}/${name}`);
    if (run === undefined)
      return this.violation(res, 404, `file_stream for ${entity}/${project}/${name}: no such run (UpsertBucket first)`);
    const async = req.headers["x-wandb-use-async-filestream"] === "true";
    const clientId = req.headers["x-wandb-async-client-id"];
    if (async && typeof clientId !== "string")
      return this.violation(res, 400, "shared mode needs X-WANDB-ASYNC-CLIENT-ID");
    if (run.shared !== null && run.shared !== async)
      return this.violation(res, 409, `run ${name}: shared-mode and plain writers mixed`);
    run.shared = async;
    const client = async ? (clientId as string) : "";
    for (const key of Object.keys(body)) {
      if (!["files", "complete", "exitcode", "uploaded", "preempting"].includes(key))
        return this.violation(res, 400, `file_stream: unknown field ${key}`);
    }
    const files = (body["files"] ?? {}) as Record<string, { offset?: unknown; content?: unknown }>;
    if (run.complete && (files["wandb-history.jsonl"] !== undefined || body["complete"] !== undefined)) {
      return this.violation(res, 409, `run ${name}: data after complete`);
    }
    const history = files["wandb-history.jsonl"];
    let append: string[] = [];
    const lines = run.history.get(client) ?? [];
    if (history !== undefined) {
      const { offset, content } = history;
      if (typeof offset !== "number" || !Number.isInteger(offset) || offset < 0)
        return this.violation(res, 400, "history offset must be a non-negative integer");
      if (!Array.isArray(content) || content.some((c) => typeof c !== "string"))
        return this.violation(res, 400, "history content must be an array of strings");
      if (offset > lines.length)
        return this.violation(
          res,
          400,
          `run ${name}${client ? ` client ${client}` : ""}: history offset ${offset} leaves a gap after ${lines.length} lines`,
        );
      for (let i = 0; i < content.length && offset + i < lines.length; i++) {
        if (lines[offset + i] !== content[i])
          return this.violation(res, 409, `run ${name}: line ${offset + i} rewritten with different content`);
      }
      append = (content as string[]).slice(lines.length - offset);
      let lastStep =
        lines.length > 0
          ? ((parseWandbJson(lines[lines.length - 1] as string) as HistoryRow)["_step"] as number)
          : -Infinity;
      for (const line of append) {
        let row: HistoryRow;
        try {
          row = parseWandbJson(line) as HistoryRow;
        } catch {
          return this.violation(res, 400, `history line is not JSON: ${line.slice(0, 80)}`);
        }
        for (const field of ["_step", "_timestamp", "_runtime"]) {
          if (typeof row[field] !== "number")
            return this.violation(res, 400, `history line lacks numeric ${field}: ${line.slice(0, 80)}`);
        }
        const step = row["_step"] as number;
        if (!Number.isInteger(step) || step <= lastStep)
          return this.violation(res, 400, `run ${name}: _step ${step} after ${lastStep} does not increase`);
        lastStep = step;
      }
    }
    const summary = files["wandb-summary.json"];
    let summaryRow: Record<string, unknown> | undefined;
    if (summary !== undefined) {
      if (summary.offset !== 0 || !Array.isArray(summary.content) || summary.content.length !== 1)
        return this.violation(res, 400, "summary must be { offset: 0, content: [one line] }");
      summaryRow = parseWandbJson(summary.content[0] as string) as Record<string, unknown>;
    }
    const uploaded = body["uploaded"];
    if (uploaded !== undefined) {
      if (!Array.isArray(uploaded) || uploaded.some((f) => typeof f !== "string"))
        return this.violation(res, 400, "file_stream: uploaded must be a list of file names");
      const missing = (uploaded as string[]).filter((f) => !run.files.has(f));
      if (missing.length > 0)
        return this.violation(
          res,
          409,
          `file_stream: ${missing.join(", ")} reported uploaded but never PUT to its upload URL`,
        );
    }
    if (body["complete"] !== undefined) {
      if (body["complete"] !== true || typeof body["exitcode"] !== "number")
        return this.violation(res, 400, "complete must be true with an integer exitcode");
    }
    run.history.set(client, [...lines, ...append]);
    for (const f of (uploaded ?? []) as string[]) run.uploaded.add(f);
    if (summaryRow !== undefined) run.summary = run.shared === true ? { ...run.summary, ...summaryRow } : summaryRow;
    if (body["complete"] === true) {
      run.complete = true;
      run.exitcode = body["exitcode"] as number;
    }
    respond(200, { exitcode: null, limits: {} });
  }
}
