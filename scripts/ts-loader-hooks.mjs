// The module hooks of scripts/ts-loader.mjs: `./x.js` resolves to `./x.ts` when only the source
// exists (the sources import by their built names), and a `.ts`/`.mts`/`.cts` file loads as the
// JavaScript it compiles to. Each compiled file is kept in node_modules/.cache/rankscope-ts under
// the hash of its text and the Node.js version, so a file is compiled once per change, not once
// per process. Node 22.15 and later strip the types themselves (`module.stripTypeScriptTypes`:
// every line and column stays where it was); a file they cannot strip (an enum, a parameter
// property) or whose JavaScript V8 may not parse yet (a decorator, `await using`), and every file
// on Node 20, is compiled by esbuild for the running Node, with an inline source map that stack
// traces follow.
import module from "node:module";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const CACHE = fileURLToPath(new URL("../node_modules/.cache/rankscope-ts/", import.meta.url));
const TS = /\.[cm]?ts$/;
const JS = /\.([cm]?)js$/;
/** Syntax a Node it runs on may not parse once the types are gone: decorators, `using` (V8 12). */
const LOWERED = [/^\s*@[A-Za-z_$]/m, /\b(?:await\s+)?using\s+[A-Za-z_$][\w$]*\s*=/];
const MAPPED = "//# sourceMappingURL=data:";
/** Part of every cached file's name: change it when what `compile` makes changes. */
const FORMAT = "3";
let esbuild;

/** A relative, absolute or file: specifier ending in .js/.mjs/.cjs: it may name a .ts source. */
function builtName(specifier) {
  return (
    JS.test(specifier) && (specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("file:"))
  );
}

/** The path of a TypeScript file: URL (a query string or hash ignored), or "" for anything else. */
function sourcePath(url) {
  if (!url.startsWith("file:")) return "";
  const path = fileURLToPath(url);
  return TS.test(path) ? path : "";
}

/**
 * Node's own type stripping, where it has one and the file needs nothing more (no enum, no
 * parameter property, no decorator, no `using`); its "experimental feature" warning is not printed (it is
 * the loader's, not the test's). Otherwise null.
 */
function stripped(source) {
  const strip = module.stripTypeScriptTypes;
  if (typeof strip !== "function" || LOWERED.some((pattern) => pattern.test(source))) return null;
  const emit = process.emitWarning;
  process.emitWarning = (warning, ...rest) => {
    if (!String(warning?.message ?? warning).startsWith("stripTypeScriptTypes")) emit.call(process, warning, ...rest);
  };
  try {
    return strip(source, { mode: "strip" });
  } catch (error) {
    if (error?.code === "ERR_UNSUPPORTED_TYPESCRIPT_SYNTAX") return null;
    throw error;
  } finally {
    process.emitWarning = emit;
  }
}

function compile(source, path) {
  const code = stripped(source);
  if (code !== null) return code;
  esbuild ??= module.createRequire(import.meta.url)("esbuild");
  return esbuild.transformSync(source, {
    loader: "ts",
    format: "esm",
    target: `node${process.versions.node}`,
    sourcemap: "inline",
    sourcesContent: false,
    sourcefile: path,
  }).code;
}

/** The JavaScript of one source file, from the cache or compiled into it. */
function javaScript(path) {
  const source = readFileSync(path, "utf8");
  const name = `${CACHE}${createHash("sha1").update(FORMAT).update(process.version).update(path).update(source).digest("hex")}.js`;
  try {
    return readFileSync(name, "utf8");
  } catch {
    const code = compile(source, path);
    mkdirSync(CACHE, { recursive: true });
    const partial = `${name}.${process.pid}.${Math.random().toString(36).slice(2)}`;
    writeFileSync(partial, code);
    renameSync(partial, name);
    return code;
  }
}

function loaded(path) {
  const source = javaScript(path);
  // esbuild's output moved lines: stack traces follow its source map (Node 20 enables them up front).
  if (source.includes(MAPPED) && !process.sourceMapsEnabled) process.setSourceMapsEnabled(true);
  return { format: path.endsWith(".cts") ? "commonjs" : "module", source, shortCircuit: true };
}

/** In-thread hooks for `module.registerHooks` (Node 22.15 and later). */
export function syncHooks() {
  return {
    resolve(specifier, context, next) {
      try {
        return next(specifier, context);
      } catch (error) {
        if (error?.code !== "ERR_MODULE_NOT_FOUND" || !builtName(specifier)) throw error;
        return next(specifier.replace(JS, ".$1ts"), context);
      }
    },
    load(url, context, next) {
      const path = sourcePath(url);
      return path ? loaded(path) : next(url, context);
    },
  };
}

/** Off-thread hooks for `module.register` (Node 20). */
export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (error) {
    if (error?.code !== "ERR_MODULE_NOT_FOUND" || !builtName(specifier)) throw error;
    return next(specifier.replace(JS, ".$1ts"), context);
  }
}

export async function load(url, context, next) {
  const path = sourcePath(url);
  return path ? loaded(path) : next(url, context);
}
