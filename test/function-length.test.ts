/**
 * No function in src/ is longer than 80 lines (docs/DESIGN.md, "Layout"): a longer one is split
 * into named steps, each doing one thing. A function's length runs from its first line to its
 * closing brace, nested arrow functions and closures included; the methods of an object literal
 * are measured on their own, as a class's methods are, not as lines of the function that builds
 * the object. This test lists every offender as `file:line name (N lines)`.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SRC = join(ROOT, "src");
const MAX_LINES = 80;

/** Every TypeScript source below `dir` (no declaration files, nothing built). */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== "dist" && entry.name !== "node_modules") out.push(...sources(path));
    } else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) {
      out.push(path);
    }
  }
  return out;
}

/** The name a reader would search for: the function's own, or the variable or property it is assigned to. */
function nameOf(node: ts.SignatureDeclaration, file: ts.SourceFile): string {
  if (node.name !== undefined) return node.name.getText(file);
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    return parent.name.getText(file);
  }
  return "(anonymous)";
}

const isObjectLiteralMethod = (node: ts.Node): boolean =>
  ts.isObjectLiteralExpression(node.parent) &&
  (ts.isMethodDeclaration(node) || ts.isGetAccessorDeclaration(node) || ts.isSetAccessorDeclaration(node));

interface Measured {
  where: string;
  lines: number;
}

/** Each function-like with a body in `path`, with its length in lines. */
function measure(path: string): Measured[] {
  const file = ts.createSourceFile(path, readFileSync(path, "utf8"), ts.ScriptTarget.Latest, true);
  const lineOf = (pos: number): number => file.getLineAndCharacterOfPosition(pos).line;
  const out: Measured[] = [];
  /** The lines of `node` that belong to object-literal methods nested in it (measured on their own). */
  const methodLines = (node: ts.Node): number => {
    let lines = 0;
    const visit = (child: ts.Node): void => {
      if (isObjectLiteralMethod(child)) {
        lines += lineOf(child.getEnd()) - lineOf(child.getStart(file)) + 1;
        return;
      }
      ts.forEachChild(child, visit);
    };
    ts.forEachChild(node, visit);
    return lines;
  };
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && "body" in node && node.body !== undefined) {
      const lines = lineOf(node.getEnd()) - lineOf(node.getStart(file)) + 1 - methodLines(node);
      const rel = relative(ROOT, path).split(sep).join("/");
      out.push({ where: `${rel}:${lineOf(node.getStart(file)) + 1} ${nameOf(node, file)}`, lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return out;
}

test(`no function in src/ is over ${MAX_LINES} lines`, () => {
  const measured = sources(SRC).flatMap(measure);
  assert.ok(measured.length > 1000, `found only ${measured.length} functions under ${SRC}`);
  const offenders = measured
    .filter((fn) => fn.lines > MAX_LINES)
    .sort((a, b) => b.lines - a.lines)
    .map((fn) => `${fn.where} (${fn.lines} lines)`);
  assert.deepEqual(offenders, [], `split these into named steps, each doing one thing:\n${offenders.join("\n")}`);
});
