/**
 * The layers of `src/` (docs/DESIGN.md, "Layout"), enforced over every file of it:
 *
 * - each top-level folder of `src/` (and each entry-point file at its root) sits in one layer of
 *   `LAYERS`, and imports only from layers below its own — never up, never sideways into another
 *   folder of the same layer;
 * - no file reaches itself again through its imports (no cycle between files);
 * - no folder reaches itself again through its files' imports (no cycle between folders), a
 *   folder's imports of its own subfolders and back aside: a folder and its subfolders are one
 *   part (`backends/builtin.ts` declares the backends of `backends/<name>/`, which implement
 *   `backends/backend.ts`);
 * - inside `src/transport/`, the rank side never imports the controller side, and the protocol
 *   imports neither.
 *
 * Every import counts: static, dynamic `import()`, re-exports, and type-only ones. A type is part
 * of the contract between two files just as a value is, so `import type` from a layer above is an
 * edge against the table, and a cycle that is type-only on one side is a cycle: the shared type
 * goes to a file both may import (as `KeyState` went to `core/key-state.ts`, below the collector
 * that produces it and every side that carries it). Modules started by URL (`startModuleWorker`
 * with `packageModule`) are not imports.
 *
 * Imports are read with TypeScript's own `preProcessFile`, the parser `tsc` uses for module
 * resolution, not with a regular expression.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../src");

/**
 * The layers, lowest first. A unit (a top-level folder of `src/`, or an entry-point file at its
 * root) may import from units of lower layers only. Written from what the code needs: adding an
 * import that goes up means the code is in the wrong place, or the table (and DESIGN.md) changes.
 */
const LAYERS: ReadonlyArray<{ readonly units: readonly string[]; readonly what: string }> = [
  {
    units: ["core"],
    what: "recording (collector, reductions, accumulators, KeyState) and the one mechanism per job (settings, lifecycle, deadlines, diagnostics, process-wide state)",
  },
  { units: ["io"], what: "the file writers" },
  { units: ["run"], what: "run directories and run files" },
  {
    units: ["store", "stream", "stats", "trace", "textlog", "inference"],
    what: "the store's file format, writer and reading API; the raw stream; AReaL stats; tracers; text logs; the inference request API",
  },
  { units: ["alerts", "ui"], what: "alert rules and delivery; the dashboard server and web app (over the store)" },
  { units: ["sync"], what: "sending a run's store to a team server" },
  { units: ["backends", "server"], what: "the backends (the store backend starts the live sync); the team server" },
  {
    units: ["pipeline", "import"],
    what: "what both ends of a flush share: RankRuntime, BackendSet, merge and reduce, config checks, the rank handle, the default-logger lookup; runs logged elsewhere brought in (over the store's writer and the backends' file formats)",
  },
  {
    units: ["transport", "controller"],
    what: "carrying messages between controller and ranks; the MetricLogger — neither imports the other",
  },
  { units: ["system"], what: "the GPU/CPU monitor (logs through the MetricLogger)" },
  { units: ["facade"], what: "NeMo's Logger face" },
  { units: ["cli"], what: "the rankscope command" },
  {
    units: ["index.ts", "nats.ts", "host.ts"],
    what: "the package's entry points (rankscope, rankscope/nats, rankscope/host): re-exports, and loading the controller the carriers fall back to",
  },
];

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
  return info.importedFiles
    .map((f) => f.fileName)
    .filter((s) => s.startsWith("."))
    .map((s) => resolve(dirname(file), s.replace(/\.js$/, ".ts")));
}

/** Every cycle's member list (Tarjan's strongly connected components of size > 1, or a self-import). */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let index = 0;
  const stack: string[] = [];
  const onStack = new Set<string>();
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const found: string[][] = [];
  const lowOf = (v: string): number => low.get(v) ?? Infinity;
  const visit = (v: string): void => {
    indices.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      const seen = indices.get(w);
      if (seen === undefined) {
        visit(w);
        low.set(v, Math.min(lowOf(v), lowOf(w)));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(lowOf(v), seen));
      }
    }
    if (low.get(v) === indices.get(v)) {
      const component: string[] = [];
      for (let w = stack.pop(); w !== undefined; w = stack.pop()) {
        onStack.delete(w);
        component.push(w);
        if (w === v) break;
      }
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component);
    }
  };
  for (const v of graph.keys()) if (!indices.has(v)) visit(v);
  return found;
}

/** The layer of each unit of `layers`. */
function layerIndex(layers: typeof LAYERS): Map<string, number> {
  return new Map(layers.flatMap((layer, i) => layer.units.map((unit): [string, number] => [unit, i])));
}

/** `from → to` edges (paths relative to src, "/"-separated) that go up a layer or sideways into a peer. */
function edgesAgainst(edges: ReadonlyArray<readonly [string, string]>, layers: typeof LAYERS): string[] {
  const layerOf = layerIndex(layers);
  const against: string[] = [];
  for (const [from, to] of edges) {
    const a = from.split("/")[0] ?? from;
    const b = to.split("/")[0] ?? to;
    if (a === b) continue;
    const la = layerOf.get(a);
    const lb = layerOf.get(b);
    if (la === undefined || lb === undefined) continue; // reported by the "every unit has a layer" test
    if (lb > la) against.push(`${from} → ${to} (${b} is above ${a})`);
    else if (lb === la) against.push(`${from} → ${to} (${a} and ${b} are peers in one layer)`);
  }
  return against;
}

const name = (file: string): string => relative(SRC, file).split(sep).join("/");
const files = sourceFiles(SRC);
const graph = new Map(files.map((file) => [file, importsOf(file).filter((f) => f.startsWith(SRC + sep))]));
const edges = [...graph].flatMap(([file, imports]) =>
  imports.map((target): [string, string] => [name(file), name(target)]),
);

test("every top-level folder and root file of src/ has a layer", () => {
  assert.ok(files.length > 200, `src/'s modules were found (${files.length})`);
  const units = new Set(files.map((file) => name(file).split("/")[0] ?? ""));
  const placed = new Set(LAYERS.flatMap((layer) => layer.units));
  assert.deepEqual(
    [...units].filter((u) => !placed.has(u)).sort(),
    [],
    'add the new folder to LAYERS in test/layers.test.ts and to DESIGN.md\'s layer table ("Layout")',
  );
  assert.deepEqual(
    [...placed].filter((u) => !units.has(u)).sort(),
    [],
    "these units of LAYERS no longer exist in src/",
  );
});

test("no import goes up a layer or sideways into a peer", () => {
  assert.deepEqual(edgesAgainst(edges, LAYERS), []);
});

test("no cycle between files of src/ (type-only imports included)", () => {
  assert.deepEqual(
    cycles(graph).map((c) => c.map(name).sort()),
    [],
  );
});

test("no cycle between folders of src/ (a folder and its own subfolders aside)", () => {
  const nested = (a: string, b: string): boolean => a === b || a.startsWith(`${b}/`) || b.startsWith(`${a}/`);
  const folders = new Map<string, Set<string>>();
  for (const [from, to] of edges) {
    const a = dirname(from);
    const b = dirname(to);
    const out = folders.get(a) ?? new Set<string>();
    folders.set(a, out);
    if (!folders.has(b)) folders.set(b, new Set());
    if (!nested(a, b)) out.add(b);
  }
  assert.ok(folders.size > 30, `src/'s folders were found (${folders.size})`);
  assert.deepEqual(
    cycles(new Map([...folders].map(([k, v]) => [k, [...v]]))).map((c) => c.sort()),
    [],
  );
});

test("in src/transport the rank side never imports the controller side, and the protocol imports neither", () => {
  const crossings = edges
    .filter(([from, to]) => from.startsWith("transport/") && to.startsWith("transport/"))
    .filter(([from, to]) => {
      const side = from.split("/")[1];
      const target = to.split("/")[1];
      return (side === "rank" && target === "controller") || (side === "protocol" && target !== "protocol");
    })
    .map(([from, to]) => `${from} → ${to}`);
  assert.deepEqual(crossings, []);
});

test("the checks find what they look for: a cycle, a self-import, an edge up and one between peers", () => {
  const found = cycles(
    new Map([
      ["a", ["b"]],
      ["b", ["a", "c"]],
      ["c", []],
      ["d", ["d"]],
    ]),
  );
  assert.deepEqual(found.map((c) => c.sort()).sort(), [["a", "b"], ["d"]]);
  const layers = [
    { units: ["low"], what: "" },
    { units: ["mid", "peer"], what: "" },
    { units: ["top"], what: "" },
  ];
  const against = edgesAgainst(
    [
      ["top/x.ts", "low/y.ts"],
      ["mid/x.ts", "top/y.ts"],
      ["mid/x.ts", "peer/y.ts"],
      ["low/x.ts", "low/y.ts"],
    ],
    layers,
  );
  assert.deepEqual(against, [
    "mid/x.ts → top/y.ts (top is above mid)",
    "mid/x.ts → peer/y.ts (mid and peer are peers in one layer)",
  ]);
});
