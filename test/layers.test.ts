/**
 * The transport is split by side — `protocol/` (shared), `controller/`, `rank/` — and its modules
 * form no import cycle: the rank side never imports the controller side, the protocol imports
 * neither, and no module reaches itself again through its imports (static or dynamic `import()`;
 * type-only imports count too, they tie the files together just the same).
 *
 * Imports are read with TypeScript's own `preProcessFile`, the parser `tsc` uses for module
 * resolution, not with a regular expression.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../src");
const TRANSPORT = join(SRC, "transport");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.ts$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [path] : [];
  });
}

/** Relative imports of one file (static, dynamic, type-only, re-exports), resolved to `.ts` paths. */
function importsOf(file: string): string[] {
  const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
  return info.importedFiles.map((f) => f.fileName).filter((s) => s.startsWith(".")).map((s) => resolve(dirname(file), s.replace(/\.js$/, ".ts")));
}

/** Every cycle's member list (Tarjan's strongly connected components of size > 1, or a self-import). */
function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const stack: string[] = [];
  const onStack = new Set<string>();
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    indices.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!indices.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) as number, indices.get(w) as number));
      }
    }
    if (low.get(v) === indices.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop() as string;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component);
    }
  };
  for (const v of graph.keys()) if (!indices.has(v)) visit(v);
  return found;
}

const graph = new Map(sourceFiles(TRANSPORT).map((file) => [file, importsOf(file).filter((f) => f.startsWith(TRANSPORT))]));
const name = (file: string): string => relative(TRANSPORT, file);

test("src/transport has no import cycle", () => {
  assert.ok(graph.size >= 10, `the transport's modules were found (${graph.size})`);
  assert.deepEqual(cycles(graph).map((c) => c.map(name).sort()), []);
});

test("the rank side never imports the controller side, and the protocol imports neither", () => {
  const crossings: string[] = [];
  for (const [file, imports] of graph) {
    const side = name(file).split("/")[0];
    for (const target of imports) {
      const to = name(target).split("/")[0];
      if ((side === "rank" && to === "controller") || (side === "protocol" && to !== "protocol")) crossings.push(`${name(file)} → ${name(target)}`);
    }
  }
  assert.deepEqual(crossings, []);
});

test("the cycle finder finds a cycle (a -> b -> a) and a self-import", () => {
  const found = cycles(new Map([["a", ["b"]], ["b", ["a", "c"]], ["c", []], ["d", ["d"]]]));
  assert.deepEqual(found.map((c) => c.sort()).sort(), [["a", "b"], ["d"]]);
});
