// A fresh consumer project type-checks against the packed tarball: `strict`, `skipLibCheck: false`,
// NodeNext, importing every subpath export; and the config typos a newcomer makes are compile
// errors (test/fixtures/consumer/index.ts: each `@ts-expect-error -- TEXT` line must be an error
// whose message contains TEXT). Network-free: the tarball is unpacked into the project and our
// runtime dependencies are linked from this checkout's node_modules (never the devDependencies).
// Every check's file is one root of a single TypeScript program, built once from the project's
// tsconfig.json (what `tsc -p` does, in this process): the declaration files, checked in full
// (skipLibCheck: false), are loaded and checked once instead of once per check.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import ts from "typescript";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const fixture = join(root, "test", "fixtures", "consumer", "index.ts");
let scratch = "";
let project = "";
/** The consumer's program: every check's root file, type-checked once in `before`. */
let program: ts.Program | undefined;
/** tsc's report (`file(line,col): error TSxxxx: …`, continuation lines indented) per root file; "" for a clean one. */
const reports = new Map<string, string>();

const EXPORTS = [
  "rankscope",
  "rankscope/store",
  "rankscope/ui",
  "rankscope/tensorboard",
  "rankscope/wandb",
  "rankscope/nats",
];

/** The check's files, roots of the one program (each a module: their imports do not mix). */
const FILES = {
  exports: "exports.ts",
  fixture: "index.ts",
  stripped: "stripped.ts",
  docs: "docs.ts",
} as const;

/** Every check's file, then one program over them from the project's tsconfig.json, as `tsc -p` reads it; its diagnostics in tsc's format, per file. */
function typecheckAll(): void {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(project, "tsconfig.json"),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => assert.fail(ts.flattenDiagnosticMessageText(d.messageText, "\n")),
    },
  );
  assert.ok(parsed !== undefined);
  program = ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options });
  const format: ts.FormatDiagnosticsHost = {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => project,
    getNewLine: () => "\n",
  };
  const all = ts.getPreEmitDiagnostics(program);
  for (const file of Object.values(FILES)) {
    const path = join(project, file);
    reports.set(
      file,
      ts.formatDiagnostics(
        all.filter((d) => d.file?.fileName === path),
        format,
      ),
    );
  }
  // Diagnostics of no check's file (a declaration file of the package, the options): every check fails on them.
  reports.set(
    "",
    ts.formatDiagnostics(
      all.filter((d) => !Object.values(FILES).some((f) => d.file?.fileName === join(project, f))),
      format,
    ),
  );
}

/** tsc's report for `file` and for what no file owns (the package's declarations). */
function report(file: string): string {
  return `${reports.get("") ?? ""}${reports.get(file) ?? ""}`;
}

/** The option types whose fields must keep their doc comments: named exports, and every built-in backend's entry of BackendOptionsMap (what a config literal's hover shows). */
const DOCUMENTED = {
  named: [
    "CommonBackendOptions",
    "BackendConfigBase",
    "ConsoleBackendOptions",
    "JsonlBackendOptions",
    "StoreBackendOptions",
    "TensorboardBackendOptions",
    "WandbBackendOptions",
  ],
  mapped: ["console", "jsonl", "store", "tensorboard", "wandb", "prometheus", "prometheus_remote_write", "otlp"],
};

/** The fixture without its `// @ts-expect-error -- TEXT` lines (blank in their place), and TEXT by the 1-based line that must fail. */
function stripDirectives(source: string): { lines: string[]; stripped: string; expected: Map<number, string> } {
  const lines = source.split("\n");
  const expected = new Map<number, string>();
  const stripped = lines.map((line, i) => {
    const m = /^\s*\/\/ @ts-expect-error -- (.+)$/.exec(line);
    if (m === null) return line;
    expected.set(i + 2, (m[1] as string).trim()); // tsc's lines are 1-based: the next line
    return "";
  });
  return { lines, stripped: stripped.join("\n"), expected };
}

/** Each check's file in the project. */
function writeChecks(): void {
  writeFileSync(
    join(project, FILES.exports),
    `${EXPORTS.map((e, i) => `import * as m${i} from "${e}";`).join("\n")}\nexport const modules = [${EXPORTS.map((_, i) => `m${i}`).join(", ")}];\n`,
  );
  const source = readFileSync(fixture, "utf8");
  writeFileSync(join(project, FILES.fixture), source);
  writeFileSync(join(project, FILES.stripped), stripDirectives(source).stripped);
  const { named, mapped } = DOCUMENTED;
  writeFileSync(
    join(project, FILES.docs),
    `import type { BackendOptionsMap, ${named.join(", ")} } from "rankscope";\n${named.map((n) => `export declare const v${n}: ${n};`).join("\n")}\n` +
      `${mapped.map((n) => `export declare const v${n}: BackendOptionsMap["${n}"];`).join("\n")}\n`,
  );
}

before(() => {
  assert.ok(
    existsSync(join(root, "dist", "index.d.ts")),
    "dist/ is missing: run `npm run build` first (npm test does)",
  );
  scratch = mkdtempSync(join(tmpdir(), "rankscope-consumer-"));
  const pack = spawnSync("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", scratch], {
    cwd: root,
    encoding: "utf8",
    timeout: 120_000,
  });
  assert.equal(pack.status, 0, pack.stderr);
  const tarball = readdirSync(scratch).find((f) => f.endsWith(".tgz"));
  assert.ok(tarball !== undefined, `npm pack wrote no tarball: ${pack.stdout}`);

  project = join(scratch, "app");
  const installed = join(project, "node_modules", "rankscope");
  mkdirSync(installed, { recursive: true });
  const untar = spawnSync("tar", ["-xzf", join(scratch, tarball), "-C", installed, "--strip-components=1"], {
    encoding: "utf8",
  });
  assert.equal(untar.status, 0, untar.stderr);
  // What `npm install <tarball>` would bring: the runtime dependencies, plus the user's @types/node
  // and the optional peers a user of every subpath installs (rankscope/nats, rankscope/otlp).
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
    dependencies: Record<string, string>;
    peerDependencies: Record<string, string>;
  };
  for (const dep of [...Object.keys(manifest.dependencies), ...Object.keys(manifest.peerDependencies), "@types/node"]) {
    const link = join(project, "node_modules", dep);
    mkdirSync(dirname(link), { recursive: true });
    symlinkSync(join(root, "node_modules", dep), link, "dir");
  }
  writeFileSync(
    join(project, "package.json"),
    JSON.stringify({ name: "app", version: "1.0.0", private: true, type: "module" }),
  );
  writeFileSync(
    join(project, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        skipLibCheck: false,
        module: "NodeNext",
        moduleResolution: "NodeNext",
        target: "ES2022",
        noEmit: true,
        types: ["node"],
      },
      files: Object.values(FILES),
    }),
  );
  writeChecks();
  typecheckAll();
});

after(() => {
  if (scratch !== "") rmSync(scratch, { recursive: true, force: true });
});

test("the tarball holds no devDependency's types, and every subpath export type-checks for a strict NodeNext consumer with skipLibCheck: false", () => {
  assert.equal(report(FILES.exports).trim(), "", "tsc reported errors");
});

test("the package ships what its README links, and no source maps naming files it does not ship", () => {
  const installed = join(project, "node_modules", "rankscope");
  const readme = readFileSync(join(installed, "README.md"), "utf8");
  const linked = [...new Set([...readme.matchAll(/\bexamples\/[\w./-]+\.ts\b/g)].map((m) => m[0]))];
  assert.ok(linked.length >= 3, `the README links ${linked.length} examples`);
  for (const file of linked)
    assert.ok(existsSync(join(installed, file)), `the README links ${file}, which is not in the package`);
  // Stack traces must name code the user has: the package ships no source maps (they would name
  // src/*.ts, which is not shipped, and under --enable-source-maps or tsx every stack trace pays
  // for parsing them), and no compiled file points at one.
  const compiled: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) walk(join(dir, entry.name));
      else compiled.push(join(dir, entry.name));
    }
  };
  walk(join(installed, "dist"));
  const scripts = compiled.filter((p) => p.endsWith(".js"));
  assert.ok(scripts.length > 10, `found ${scripts.length} compiled files (dist/ is a bundle: entry points and chunks)`);
  assert.deepEqual(
    compiled.filter((p) => p.endsWith(".map")),
    [],
    "the package ships source maps",
  );
  for (const path of scripts)
    assert.ok(!readFileSync(path, "utf8").includes("sourceMappingURL="), `${path} points at a source map`);
});

test("every relative link in the package's Markdown (README, docs/) names a file the package ships", () => {
  const installed = join(project, "node_modules", "rankscope");
  const pages = ["README.md", "BENCHMARKS.md", ...readdirSync(join(installed, "docs")).map((f) => `docs/${f}`)].filter(
    (f) => f.endsWith(".md"),
  );
  assert.ok(pages.length > 10, `found ${pages.length} pages`);
  const broken: string[] = [];
  for (const page of pages) {
    const text = readFileSync(join(installed, page), "utf8");
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (target === undefined || /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("#")) continue;
      const path = target.split("#")[0] ?? "";
      if (!existsSync(join(installed, dirname(page), decodeURIComponent(path)))) broken.push(`${page} → ${target}`);
    }
  }
  assert.deepEqual(broken, [], "links to files the package does not ship");
});

test("config typos, unknown backends and reduce names are compile errors; a registered backend's options are typed", () => {
  // As written: clean (an `@ts-expect-error` line that stopped being an error is itself an error, TS2578).
  assert.equal(report(FILES.fixture).trim(), "", "the fixture does not type-check as written");

  // Without the directives (stripped.ts): exactly the marked lines fail, each for the reason it names.
  const { lines, expected } = stripDirectives(readFileSync(fixture, "utf8"));
  assert.ok(expected.size >= 8, `the fixture marks ${expected.size} lines`);
  const output = report(FILES.stripped);
  const errors = new Map<number, string>();
  let last = 0;
  for (const line of output.split("\n")) {
    const m = /^stripped\.ts\((\d+),\d+\): error (.*)$/.exec(line);
    if (m !== null) {
      last = Number(m[1]);
      errors.set(last, `${errors.get(last) ?? ""}${m[2] as string}\n`);
    } else if (last !== 0 && line.startsWith(" ")) errors.set(last, `${errors.get(last) ?? ""}${line}\n`);
  }
  for (const [line, text] of expected) {
    const error = errors.get(line);
    assert.ok(error !== undefined, `line ${line} (${lines[line - 1]?.trim()}) is not an error`);
    assert.ok(error.includes(text), `line ${line}: the error does not mention ${text}:\n${error}`);
  }
  // A misspelt backend name is named by the error, which points at no other backend's options.
  const misspelt = [...expected].find(([, text]) => text.includes('tensorbaord\\" is not a backend name'));
  assert.ok(misspelt !== undefined, "the fixture has the misspelt backend line");
  assert.doesNotMatch(
    errors.get(misspelt[0]) ?? "",
    /wandb|Wandb/,
    "the error for a misspelt backend mentions wandb's options",
  );
  assert.deepEqual(
    [...errors.keys()].filter((l) => !expected.has(l)),
    [],
    `unexpected errors:\n${output}`,
  );
});

test("every field of the public option types keeps its doc comment for a consumer's editor (declared once, in a zod shape)", () => {
  const { named, mapped } = DOCUMENTED;
  const names = [...named, ...mapped];
  const file = join(project, FILES.docs);
  assert.ok(program !== undefined);
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  assert.ok(source !== undefined);
  const module = checker.getSymbolAtLocation(source);
  assert.ok(module !== undefined);
  for (const name of names) {
    const value = checker.getExportsOfModule(module).find((s) => s.name === `v${name}`);
    assert.ok(value !== undefined, name);
    const fields = checker.getTypeOfSymbol(value).getProperties();
    assert.ok(fields.length >= 1, `${name} has fields`);
    for (const field of fields) {
      const doc = ts.displayPartsToString(field.getDocumentationComment(checker));
      assert.ok(doc.length > 10, `${name}.${field.name} has no doc comment in the published types`);
    }
  }
});
