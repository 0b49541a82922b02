#!/usr/bin/env node
// Counts type assertions (`x as T`, `<T>x`; not `as const`) in the given folders (default: src),
// per 1,000 lines, per folder. `--max-per-1000 N` exits 1 when the ratio is above N, so the
// check in scripts/test.sh keeps the number from growing back; `--list` prints each cast as
// file:line. Uses the TypeScript parser, not a regex.
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";

const args = process.argv.slice(2);
const maxIndex = args.indexOf("--max-per-1000");
const max = maxIndex >= 0 ? Number(args.splice(maxIndex, 2)[1]) : undefined;
if (max !== undefined && !Number.isFinite(max))
  throw new TypeError("--max-per-1000 needs a number, e.g. --max-per-1000 5");
const listIndex = args.indexOf("--list");
const list = listIndex >= 0;
if (list) args.splice(listIndex, 1);
const roots = args.length > 0 ? args : ["src"];

const files = [];
const walk = (dir) => {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(p);
    else if (p.endsWith(".ts") && !p.endsWith(".d.ts")) files.push(p);
  }
};
for (const root of roots) {
  if (fs.statSync(root).isDirectory()) walk(root);
  else files.push(root);
}

const isCast = (node) =>
  (ts.isAsExpression(node) || ts.isTypeAssertionExpression(node)) &&
  !(ts.isTypeReferenceNode(node.type) && node.type.typeName.getText() === "const");

let casts = 0;
let lines = 0;
const byFolder = new Map();
for (const file of files) {
  const text = fs.readFileSync(file, "utf8");
  lines += text.split("\n").length;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  let n = 0;
  const visit = (node) => {
    if (isCast(node)) {
      n++;
      if (list)
        console.log(
          `${file}:${source.getLineAndCharacterOfPosition(node.getStart()).line + 1}: ${node.getText().replace(/\s+/g, " ").slice(0, 120)}`,
        );
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  casts += n;
  const folder = path.dirname(file);
  byFolder.set(folder, (byFolder.get(folder) ?? 0) + n);
}

const ratio = (casts * 1000) / Math.max(1, lines);
for (const [folder, n] of [...byFolder].filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]))
  console.log(`${String(n).padStart(5)}  ${folder}`);
console.log(`${casts} casts in ${lines} lines: ${ratio.toFixed(2)} per 1,000 lines`);
if (max !== undefined && ratio > max) {
  console.error(
    `count-casts: ${ratio.toFixed(2)} casts per 1,000 lines is over the budget of ${max}; type the value instead of asserting it`,
  );
  process.exit(1);
}
