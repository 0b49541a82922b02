/**
 * Worker threads on rankscope's own modules (the stream writer and its file thread, the store
 * writer, thread ranks), started the same way whether rankscope runs from dist or from source.
 *
 * From dist, `new Worker(url)` on the `.js` module. From source (tests, tsx), the worker first
 * registers tsx's loader, then imports the `.ts` module: Node 20 workers do not inherit the
 * parent's module hooks, and `--import tsx` in `execArgv` does not reach them.
 */
import { Worker, type WorkerOptions } from "node:worker_threads";
import { errorCode } from "./errors.js";

/** Is this module URL TypeScript source (`.ts`, `.mts`, `.cts`, `.tsx`; any query string ignored)? */
export function isTypeScript(url: string | URL): boolean {
  return /\.[cm]?tsx?$/.test(new URL(url).pathname);
}

/**
 * This package's root folder (where its package.json is), found through the package's own name:
 * the same from source, from dist/ and from dist/'s bundle, where a module's code no longer sits
 * at its source path (`scripts/bundle.mjs`).
 */
export function packageRoot(): URL {
  return new URL("./", import.meta.resolve("rankscope/package.json"));
}

/**
 * One of rankscope's modules started by URL (a worker, a rank entry), by its path under `src/`
 * without extension: `src/<path>.ts` when running from source, `dist/<path>.js` from the build
 * (an entry point of the bundle, kept at that path).
 */
export function packageModule(path: string): URL {
  const source = isTypeScript(import.meta.url);
  return new URL(source ? `src/${path}.ts` : `dist/${path}.js`, packageRoot());
}

/**
 * The URL of a tsx entry point (`"tsx"` for `--import`, `"tsx/esm/api"` for `register`), or an
 * error that says how to run TypeScript.
 */
export function tsxUrl(specifier: "tsx" | "tsx/esm/api", what: string): string {
  try {
    return import.meta.resolve(specifier);
  } catch {
    throw new Error(
      `${what} is TypeScript, which needs the "tsx" package to run; install it (npm install tsx) or use compiled JavaScript`,
    );
  }
}

/** Flags of the main process that only make sense for its own entry (string input, REPL, syntax check). */
const ENTRY_ONLY_FLAGS = new Set([
  "-e",
  "--eval",
  "-p",
  "--print",
  "--input-type",
  "-i",
  "--interactive",
  "-c",
  "--check",
]);
/** Of those, the ones whose value may follow as the next argument. */
const ENTRY_ONLY_WITH_VALUE = new Set(["-e", "--eval", "-p", "--print", "--input-type"]);

/**
 * The flags a worker thread of ours starts with: the user's process's own (`--import`, `--require`,
 * `--conditions`, `--enable-source-maps`, memory limits, …), minus those that describe only the
 * main entry — a job started as `node --input-type=module -e "…"` would otherwise give every worker
 * "--input-type can only be used with string input" and no store, no stream.
 */
export function workerExecArgv(execArgv: readonly string[] = process.execArgv): string[] {
  const kept: string[] = [];
  const args = execArgv.values();
  for (const arg of args) {
    const eq = arg.indexOf("=");
    const name = arg.startsWith("--") && eq > 0 ? arg.slice(0, eq) : arg;
    if (!ENTRY_ONLY_FLAGS.has(name)) {
      kept.push(arg);
      continue;
    }
    // `-e code` / `--input-type module`: the value is the next argument (unless given with `=`).
    if (name === arg && ENTRY_ONLY_WITH_VALUE.has(name)) args.next();
  }
  return kept;
}

/**
 * Start a worker on `entry` with the user's process's flags. Node's default (no `execArgv`)
 * inherits them as they are, which is kept whenever that works; only when the process has flags of
 * its main entry (`-e`, `--input-type`, …) is `execArgv` given, as `workerExecArgv()`. An explicit
 * list is checked by Node, which rejects process-wide flags (`--expose-gc`, V8 heap sizes; they
 * already apply to the whole process): those are then left out. `typeScript` (default: whether
 * `entry` is a `.ts` file) says the worker needs tsx — also when the entry is JavaScript that
 * imports a user's TypeScript module.
 */
export function startModuleWorker(
  entry: URL,
  options: WorkerOptions & { typeScript?: boolean; what?: string } = {},
): Worker {
  const { typeScript = isTypeScript(entry), what = `the module ${entry.pathname}`, ...workerOptions } = options;
  if (workerOptions.execArgv === undefined) {
    const kept = workerExecArgv();
    if (kept.length !== process.execArgv.length) workerOptions.execArgv = kept;
  }
  if (!typeScript) return newWorker(entry, workerOptions);
  const api = tsxUrl("tsx/esm/api", what);
  const code = `import(${JSON.stringify(api)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); });`;
  return newWorker(code, { ...workerOptions, eval: true });
}

/** `new Worker`, leaving out of an explicit `execArgv` the process-wide flags Node refuses there. */
function newWorker(entry: URL | string, options: WorkerOptions): Worker {
  try {
    return new Worker(entry, options);
  } catch (error) {
    const execArgv = options.execArgv;
    if (errorCode(error) !== "ERR_WORKER_INVALID_EXEC_ARGV" || !(error instanceof Error) || execArgv === undefined)
      throw error;
    // "Initiated Worker with invalid execArgv flags: --expose-gc, --max-semi-space-size=128"
    const listed = /flags: (.*)$/.exec(error.message)?.[1]?.split(", ") ?? [];
    const refused = new Set(listed);
    const kept = execArgv.filter((a) => !refused.has(a));
    if (kept.length === execArgv.length) throw error;
    return new Worker(entry, { ...options, execArgv: kept });
  }
}
