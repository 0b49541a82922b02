/**
 * The request API of this checkout against an earlier commit's, in one process, interleaved:
 * `npx tsx bench/inference-against.ts [commit]` (default e1b0cef, before client chunk times were
 * held and appended at the request's end). The earlier `src/inference/requests.ts` is loaded from
 * `git show`, its imports pointed at this checkout's `src/`, so both record into the same
 * collector with the same accumulators: only the request API differs. Prints the minimum over 6
 * passes of each figure's median of 5 runs, the two versions alternating within each pass.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath, pathToFileURL } from "node:url";
import { inferenceModel } from "../src/inference/requests.js";
import { nsPerCall, printTable } from "./harness.js";
import { chunkMarkAtCall, chunkMarksWithAppend, requests, type BenchModel } from "./inference-loops.js";

const commit = process.argv[2] ?? "e1b0cef";
const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const source = execFileSync("git", ["show", `${commit}:src/inference/requests.ts`], { cwd: root, encoding: "utf8" })
  .replaceAll('"../core/', `"${join(root, "src/core")}/`)
  .replaceAll('"./conventions.js"', `"${join(root, "src/inference/conventions.js")}"`);
const dir = mkdtempSync(join(tmpdir(), "rankscope-inference-against-"));
const file = join(dir, "requests.ts");
writeFileSync(file, source);
const earlier: unknown = await import(pathToFileURL(file).href);
rmSync(dir, { recursive: true });

function isModel(value: unknown): value is BenchModel {
  return typeof value === "object" && value !== null && "start" in value && typeof value.start === "function";
}

function boundWith(module: unknown, side: "client" | "server"): BenchModel {
  const bind =
    typeof module === "object" && module !== null && "inferenceModel" in module ? module.inferenceModel : null;
  const model: unknown = typeof bind === "function" ? bind({ model: "llama-3.1-8b", provider: "bench", side }) : null;
  if (!isModel(model)) throw new Error(`${commit}'s requests.ts has no inferenceModel binding a model`);
  return model;
}

const versions: Record<string, { client: BenchModel; server: BenchModel }> = {
  [commit]: { client: boundWith(earlier, "client"), server: boundWith(earlier, "server") },
  "this checkout": {
    client: inferenceModel({ model: "llama-3.1-8b", provider: "bench", side: "client" }),
    server: inferenceModel({ model: "llama-3.1-8b", provider: "bench" }),
  },
};
const figures: Record<string, (v: { client: BenchModel; server: BenchModel }) => number> = {
  "the clock: perf_hooks' performance.now()": () =>
    nsPerCall(
      (n) => {
        let sum = 0;
        for (let i = 0; i < n; i++) sum += performance.now();
        if (sum < 0) throw new Error("unreachable");
      },
      { n: 2_000_000, runs: 5 },
    ),
  "client chunk mark, at the call": (v) => chunkMarkAtCall(v.client, 1_000_000),
  "client chunk mark with its append (one request of 2,000,000)": (v) =>
    nsPerCall(chunkMarksWithAppend(v.client), { n: 2_000_000, runs: 5 }),
  "client request, 16 chunks": (v) => nsPerCall(requests(v.client, 16), { n: 100_000, runs: 5, warmup: 25_000 }),
  "server request, 16 tokens": (v) => nsPerCall(requests(v.server, 16), { n: 100_000, runs: 5, warmup: 25_000 }),
};
const names = Object.keys(versions);
const best = new Map<string, number>();
for (let pass = 0; pass < 6; pass++)
  for (const [figure, measure] of Object.entries(figures))
    for (const name of pass % 2 === 0 ? names : [...names].reverse()) {
      const version = versions[name];
      if (version === undefined) continue;
      const ns = measure(version);
      const id = `${figure}\0${name}`;
      best.set(id, Math.min(best.get(id) ?? Infinity, ns));
    }
const at = (figure: string, name: string): number => best.get(`${figure}\0${name}`) ?? NaN;
const clock = "the clock: perf_hooks' performance.now()";
const rows = Object.keys(figures).map((figure) => [figure, ...names.map((name) => at(figure, name))]);
rows.push([
  "client chunk mark at the call − the clock",
  ...names.map((name) => at("client chunk mark, at the call", name) - at(clock, name)),
]);
process.stdout.write(`${process.version}, ${commit} against this checkout (ns per call)\n\n`);
printTable(["", ...names], rows);
