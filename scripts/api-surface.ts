/**
 * The public surface: every name each entry point of package.json's `exports` gives a user, as
 * values (functions, classes, constants) and types, read with the TypeScript compiler from the
 * source each entry's `types` file is built from (`./dist/x.d.ts` ← `src/x.ts`).
 *
 *   npx tsx scripts/api-surface.ts          print it
 *   npx tsx scripts/api-surface.ts --write  write it to docs/api-surface.txt, the snapshot (shipped with docs/api.md)
 *                                           test/package-api.test.ts compares with
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** The committed snapshot of the surface. */
export const API_SNAPSHOT = join(ROOT, "docs", "api-surface.txt");

/** An entry point (".", "./store", …) and the source file its types are built from. */
export interface EntryPoint {
  readonly name: string;
  readonly source: string;
}

/** Every entry point of package.json's `exports` that has types. */
export function entryPoints(): EntryPoint[] {
  const manifest: unknown = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  const exportsMap =
    typeof manifest === "object" && manifest !== null && "exports" in manifest ? manifest.exports : undefined;
  if (typeof exportsMap !== "object" || exportsMap === null) throw new Error("package.json has no exports map");
  const entries: EntryPoint[] = [];
  for (const [name, target] of Object.entries(exportsMap)) {
    if (typeof target !== "object" || target === null || !("types" in target) || typeof target.types !== "string")
      continue;
    const source = target.types.replace(/^\.\/dist\//, "src/").replace(/\.d\.ts$/, ".ts");
    entries.push({ name, source: join(ROOT, source) });
  }
  return entries;
}

const byCodePoint = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The surface as text: per entry point a heading with its counts, then its values and its types, sorted. */
export function apiSurface(): string {
  const entries = entryPoints();
  const program = ts.createProgram(
    entries.map((e) => e.source),
    {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      skipLibCheck: true,
      noEmit: true,
      types: ["node"],
    },
  );
  const checker = program.getTypeChecker();
  const lines: string[] = [];
  for (const entry of entries) {
    const file = program.getSourceFile(entry.source);
    const module = file === undefined ? undefined : checker.getSymbolAtLocation(file);
    if (module === undefined) throw new Error(`entry point "${entry.name}": cannot read ${entry.source}`);
    const values: string[] = [];
    const types: string[] = [];
    for (const exported of checker.getExportsOfModule(module)) {
      const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const typeOnly = (exported.declarations ?? []).some(
        (d) => ts.isExportSpecifier(d) && (d.isTypeOnly || d.parent.parent.isTypeOnly),
      );
      (target.flags & ts.SymbolFlags.Value && !typeOnly ? values : types).push(exported.name);
    }
    lines.push(`${entry.name} (${values.length} values, ${types.length} types)`);
    for (const name of values.sort(byCodePoint)) lines.push(`  value ${name}`);
    for (const name of types.sort(byCodePoint)) lines.push(`  type ${name}`);
  }
  return lines.join("\n") + "\n";
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const text = apiSurface();
  if (process.argv.includes("--write")) {
    writeFileSync(API_SNAPSHOT, text);
    console.log(`wrote ${API_SNAPSHOT}`);
  } else {
    process.stdout.write(text);
  }
}
