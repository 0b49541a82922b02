// The dashboard's web app: built into dist/ui/web, which `rankscope ui` serves.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const here = fileURLToPath(new URL(".", import.meta.url));

export default defineConfig({
  root: here,
  base: "./",
  logLevel: "warn",
  build: {
    outDir: fileURLToPath(new URL("../../../dist/ui/web", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    // One small app; no need to warn about a chunk that is mostly uPlot.
    chunkSizeWarningLimit: 400,
  },
});
