/**
 * `import { recordMetric } from "rankscope"` must not load the NATS client: it is reached only by
 * dynamic `import()` (joinRun with a NATS URL) or the `rankscope/nats` subpath. Nor any other
 * optional peer dependency (core/optional-packages.ts): a module that loads one is never in the
 * main entry's static graph, so a user without them imports rankscope. Checked on the static import
 * graph of src/index.ts.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const STATIC_IMPORT = /^\s*(?:import|export)\s[^;]*?from\s+"([^"]+)"|^\s*import\s+"([^"]+)"/gm;

function staticGraph(entry: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.pop() as string;
    if (graph.has(file)) continue;
    const text = readFileSync(file, "utf8");
    const specifiers: string[] = [];
    for (const match of text.matchAll(STATIC_IMPORT)) {
      const line = match[0];
      if (/^\s*(import|export)\s+type\s/.test(line)) continue; // erased at compile time
      specifiers.push((match[1] ?? match[2]) as string);
    }
    graph.set(file, specifiers);
    for (const s of specifiers) if (s.startsWith(".")) queue.push(resolve(dirname(file), s.replace(/\.js$/, ".ts")));
  }
  return graph;
}

test("the package's main entry does not statically import the NATS client", () => {
  const entry = resolve(dirname(fileURLToPath(import.meta.url)), "../../src/index.ts");
  const graph = staticGraph(entry);
  assert.ok(graph.size > 10, "the graph was walked");
  const offenders = [...graph]
    .filter(([, specifiers]) => specifiers.some((s) => s.startsWith("@nats-io/")))
    .map(([file]) => file);
  assert.deepEqual(offenders, []);
  assert.ok(
    ![...graph.keys()].some((f) => /transport\/(controller|rank|protocol)\/nats\.ts$/.test(f)),
    "the NATS carrier modules are loaded only on demand",
  );
});

test("the package's main entry loads no optional peer dependency", () => {
  const entry = resolve(dirname(fileURLToPath(import.meta.url)), "../../src/index.ts");
  const loaders = [...staticGraph(entry)]
    .filter(([, specifiers]) => specifiers.some((s) => s.endsWith("/optional-packages.js")))
    .map(([file]) => file);
  assert.deepEqual(loaders, []);
});

test("the package's main entry does not load zod: option shapes and the config check load at initBackends", () => {
  const entry = resolve(dirname(fileURLToPath(import.meta.url)), "../../src/index.ts");
  const zodUsers = [...staticGraph(entry)]
    .filter(([, specifiers]) => specifiers.some((s) => s === "zod" || s.startsWith("zod/")))
    .map(([file]) => file);
  assert.deepEqual(zodUsers, []);
});
