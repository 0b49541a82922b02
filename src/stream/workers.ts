/**
 * Start one of the stream's worker modules (the writer, its file thread) from this folder:
 * `.js` from dist; under tsx (tests, `.ts` sources) the worker loads it through tsx's API, since
 * Node 20 workers ignore `--import` hooks for their entry. Works from the main thread and from the
 * writer (whose own URL tsx may give a query string, hence the pathname).
 */
import { Worker, type TransferListItem } from "node:worker_threads";

export function startStreamWorker(module: "writer" | "file-thread", workerData: unknown, transferList: readonly TransferListItem[]): Worker {
  const options = { workerData, transferList: [...transferList], stdout: false, stderr: false };
  if (!new URL(import.meta.url).pathname.endsWith(".ts")) return new Worker(new URL(`./${module}.js`, import.meta.url), options);
  const api = import.meta.resolve("tsx/esm/api");
  const entry = new URL(`./${module}.ts`, import.meta.url).href;
  const code = `import(${JSON.stringify(api)}).then((tsx) => tsx.tsImport(${JSON.stringify(entry)}, ${JSON.stringify(entry)}))`;
  return new Worker(code, { ...options, eval: true });
}
