/** Shared test helpers: capture stdout, collect diagnostics, make temp dirs. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setDiagnosticHandler, resetDiagnostics, type Diagnostic } from "../src/core/diagnostics.js";

/** Run `fn` with process.stdout.write captured; returns what was written. */
export async function captureStdout(fn: () => unknown): Promise<string> {
  const original = process.stdout.write.bind(process.stdout);
  let out = "";
  process.stdout.write = ((chunk: string | Uint8Array) => {
    out += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    return true;
  }) as typeof process.stdout.write;
  try {
    await fn();
  } finally {
    process.stdout.write = original;
  }
  return out;
}

/** Collect every diagnostic reported while `fn` runs. */
export async function collectDiagnostics(fn: () => unknown): Promise<Diagnostic[]> {
  resetDiagnostics();
  const seen: Diagnostic[] = [];
  const restore = setDiagnosticHandler((d) => seen.push(d), { everyTime: true });
  try {
    await fn();
  } finally {
    restore();
  }
  return seen;
}

/** A fresh temporary directory. */
export function tempDir(prefix = "rankscope-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}
