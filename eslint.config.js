// Lint: typescript-eslint's recommended rules over sources, tests and benchmarks.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/**", "dist-check/**", "node_modules/**", "runs/**", "test-artifacts/**", "src/ui/web/dist/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: { process: "readonly", console: "readonly", setTimeout: "readonly", clearTimeout: "readonly", setInterval: "readonly", clearInterval: "readonly", URL: "readonly", Buffer: "readonly", globalThis: "readonly", performance: "readonly", queueMicrotask: "readonly", setImmediate: "readonly", structuredClone: "readonly", SharedArrayBuffer: "readonly", Atomics: "readonly", TextEncoder: "readonly", TextDecoder: "readonly", fetch: "readonly", AbortController: "readonly", document: "readonly", window: "readonly", location: "readonly", history: "readonly", requestAnimationFrame: "readonly", HTMLElement: "readonly" },
    },
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "error",
    },
  },
);
