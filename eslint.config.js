// Lint: typescript-eslint's recommended rules over sources, tests and benchmarks, plus the
// type-aware promise rules (a promise nobody awaits or handles loses its error silently), with
// Node's globals for Node code and the browser's for the dashboard's web app. Layout is Prettier's
// (.prettierrc.json): eslint-config-prettier, last, turns off any rule that would fight it.
import js from "@eslint/js";
import eslintConfigPrettier from "eslint-config-prettier/flat";
import globals from "globals";
import tseslint from "typescript-eslint";

/** The dashboard's web app, bundled by Vite for the browser (its vite.config.ts runs in Node). */
const browser = ["src/ui/web/**/*.ts"];
const browserExceptions = ["src/ui/web/vite.config.ts"];

// TypeScript checks every file against both Node's and the DOM's types (one tsconfig), and
// typescript-eslint turns `no-undef` off for TypeScript, so each side's own globals are refused
// by name on the other side.
const nodeOnly = Object.keys(globals.node).filter((name) => !(name in globals.browser));
const browserOnly = Object.keys(globals.browser).filter((name) => !(name in globals.node));
const refuse = (names, where) => [
  "error",
  ...names.map((name) => ({ name, message: `${name} does not exist in ${where}` })),
];

export default tseslint.config(
  { ignores: ["dist/**", "dist-check/**", "node_modules/**", "runs/**", "test-artifacts/**", "src/ui/web/dist/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      // Types from tsconfig.json, found per file by the project service (what the editor uses).
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "error",
      // A promise is awaited, returned, handled with .catch/.then(_, onRejected) that reports, or
      // marked `void` where fire-and-forget is meant (its errors handled inside).
      // node:test's test/describe/it return promises the runner itself awaits and reports.
      "@typescript-eslint/no-floating-promises": [
        "error",
        {
          allowForKnownSafeCalls: [
            {
              from: "package",
              package: "node:test",
              name: ["test", "describe", "it", "suite", "before", "after", "beforeEach", "afterEach"],
            },
          ],
        },
      ],
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      // A cast the compiler already agrees with only hides the next real change of type.
      "@typescript-eslint/no-unnecessary-type-assertion": "error",
    },
  },
  // Node code: everything but the web app (whose Vite config runs in Node too).
  { ignores: browser, languageOptions: { globals: globals.node } },
  { files: browserExceptions, languageOptions: { globals: globals.node } },
  {
    files: ["src/**/*.ts"],
    ignores: browser,
    rules: {
      "no-restricted-globals": refuse(browserOnly, "Node (this file runs in Node; the browser's code is src/ui/web)"),
    },
  },
  {
    files: browser,
    ignores: browserExceptions,
    languageOptions: { globals: globals.browser },
    rules: { "no-restricted-globals": refuse(nodeOnly, "the browser (src/ui/web is bundled for the dashboard page)") },
  },
  {
    // Outside any tsconfig (plain JavaScript, the packed-tarball consumer): no type information.
    files: ["**/*.js", "**/*.mjs", "**/*.cjs", "test/fixtures/consumer/**"],
    ...tseslint.configs.disableTypeChecked,
  },
  eslintConfigPrettier,
);
