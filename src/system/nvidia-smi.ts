/**
 * GPUs through `nvidia-smi`: one query per sample, one CSV line per GPU.
 *
 * `nvidia-smi --query-gpu=index,name,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits`
 * prints `0, NVIDIA A100-SXM4-80GB, 87, 65432, 81920`; a field a GPU cannot report prints as
 * `[N/A]` or `[Not Supported]`, and is left out of that sample rather than logged as 0.
 */
import { execFile } from "node:child_process";

/** The arguments rankscope passes to nvidia-smi. */
export const NVIDIA_SMI_ARGS: readonly string[] = [
  "--query-gpu=index,name,utilization.gpu,memory.used,memory.total",
  "--format=csv,noheader,nounits",
];

/** One GPU in one sample; a field the GPU did not report is undefined. */
export interface GpuSample {
  readonly index: number;
  readonly name: string;
  readonly utilizationPercent?: number;
  readonly memoryUsedMiB?: number;
  readonly memoryTotalMiB?: number;
}

function field(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text.trim());
  return text.trim() === "" || !Number.isFinite(n) ? undefined : n;
}

/** Parse nvidia-smi's CSV (no header, no units). Lines that are not a GPU are skipped. */
export function parseNvidiaSmi(stdout: string): GpuSample[] {
  const gpus: GpuSample[] = [];
  for (const raw of stdout.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === "") continue;
    const parts = line.split(",").map((p) => p.trim());
    if (parts.length < 5) continue;
    // A name with a comma in it: everything between the index and the last three fields.
    const index = field(parts[0]);
    if (index === undefined) continue;
    const tail = parts.slice(-3);
    const sample: { -readonly [K in keyof GpuSample]: GpuSample[K] } = { index, name: parts.slice(1, -3).join(", ") };
    const utilization = field(tail[0]);
    const used = field(tail[1]);
    const total = field(tail[2]);
    if (utilization !== undefined) sample.utilizationPercent = utilization;
    if (used !== undefined) sample.memoryUsedMiB = used;
    if (total !== undefined) sample.memoryTotalMiB = total;
    gpus.push(sample);
  }
  return gpus;
}

/** What one query returned: the GPUs, or why there are none. */
export type NvidiaSmiResult =
  | { readonly kind: "ok"; readonly gpus: GpuSample[] }
  | { readonly kind: "missing" }
  | { readonly kind: "failed"; readonly message: string };

/** Run nvidia-smi once (found on PATH unless `command` is a path), within `timeoutMs`. Never throws. */
export function queryNvidiaSmi(command = "nvidia-smi", timeoutMs = 10_000): Promise<NvidiaSmiResult> {
  return new Promise((resolvePromise) => {
    execFile(command, [...NVIDIA_SMI_ARGS], { timeout: timeoutMs, windowsHide: true }, (error, stdout, stderr) => {
      if (error === null) {
        resolvePromise({ kind: "ok", gpus: parseNvidiaSmi(stdout) });
        return;
      }
      if (error.code === "ENOENT") {
        resolvePromise({ kind: "missing" });
        return;
      }
      const detail = `${String(stderr).trim() || String(stdout).trim() || error.message}`.split("\n")[0] ?? "";
      resolvePromise({
        kind: "failed",
        message: `${command} exited with ${String(error.code ?? error.signal)}: ${detail}`,
      });
    });
  });
}
