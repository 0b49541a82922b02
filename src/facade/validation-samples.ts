/**
 * NeMo-RL's pretty printing of validation samples: the best and the worst by reward (and the
 * median when an odd number is asked for), each in a titled box readable in a terminal.
 *
 * ```
 * Validation samples: top 1, median, bottom 1 of 5 by reward
 * ┌─ Sample 1 | Reward: 1.0000 ───────────────────────────────────────────────────
 * │ prompt: What is 2 + 2?
 * │ response:
 * │   Let me think.
 * │   4
 * └───────────────────────────────────────────────────────────────────────────────
 * ```
 */
import { describeValue } from "../core/collector.js";

/** A validation sample: any fields, one of them the reward (`reward` unless told otherwise). */
export type ValidationSample = Readonly<Record<string, unknown>>;

/** Options of `formatValidationSamples`. */
export interface ValidationSampleOptions {
  /** The numeric field to rank by (default `reward`). */
  rewardKey?: string;
  /** Width of the box rules (default 80). */
  width?: number;
}

/**
 * The `n` samples to show, in the order shown: the top ⌊n/2⌋ by reward (best first), the median
 * when `n` is odd, then the bottom ⌊n/2⌋. All of them, best first, when there are no more than `n`.
 */
export function selectValidationSamples<T extends ValidationSample>(
  samples: readonly T[],
  n: number,
  rewardKey = "reward",
): T[] {
  if (!Number.isInteger(n) || n < 0)
    throw new TypeError(`the number of validation samples to print must be a non-negative integer, got ${String(n)}`);
  const ranked = samples.map((sample, i) => ({ sample, reward: rewardOf(sample, rewardKey, i) }));
  const sorted = ranked.sort((a, b) => b.reward - a.reward).map((r) => r.sample);
  if (n >= sorted.length) return sorted;
  const half = Math.floor(n / 2);
  const picked = sorted.slice(0, half);
  const median = sorted[Math.floor((sorted.length - 1) / 2)];
  if (n % 2 === 1 && median !== undefined) picked.push(median);
  picked.push(...sorted.slice(sorted.length - half));
  return picked;
}

/** The sample's reward; a TypeError naming the sample when it has none. */
function rewardOf(sample: ValidationSample | undefined, rewardKey: string, index: number): number {
  const reward = sample?.[rewardKey];
  if (typeof reward !== "number") {
    throw new TypeError(
      `validation sample ${index} has no numeric "${rewardKey}" field (got ${describeValue(reward)}); each sample needs one to be ranked`,
    );
  }
  return reward;
}

function valueLines(value: unknown): string[] {
  const text = typeof value === "string" ? value : (JSON.stringify(value, null, 2) ?? String(value));
  return text.split(/\r?\n/);
}

/** The text `printValidationSamples` prints. */
export function formatValidationSamples(
  samples: readonly ValidationSample[],
  n: number,
  options: ValidationSampleOptions = {},
): string {
  const rewardKey = options.rewardKey ?? "reward";
  const width = options.width ?? 80;
  const picked = selectValidationSamples(samples, n, rewardKey);
  if (picked.length === 0) return "";
  const half = Math.floor(n / 2);
  const header =
    picked.length === samples.length
      ? `Validation samples: all ${samples.length} by reward`
      : `Validation samples: top ${half}${n % 2 === 1 ? ", median" : ""}, bottom ${half} of ${samples.length} by reward`;
  const lines = [header];
  picked.forEach((sample, i) => {
    const title = `┌─ Sample ${i + 1} | Reward: ${rewardOf(sample, rewardKey, i).toFixed(4)} `;
    lines.push(title + "─".repeat(Math.max(3, width - title.length)));
    for (const [key, value] of Object.entries(sample)) {
      if (key === rewardKey) continue;
      const body = valueLines(value);
      if (body.length === 1) lines.push(`│ ${key}: ${body[0]}`);
      else {
        lines.push(`│ ${key}:`);
        for (const l of body) lines.push(`│   ${l}`);
      }
    }
    lines.push(`└${"─".repeat(width - 1)}`);
  });
  return `${lines.join("\n")}\n`;
}

/** Print `n` validation samples (top and bottom halves by reward, plus the median for odd `n`) to stdout; returns the text. */
export function printValidationSamples(
  samples: readonly ValidationSample[],
  n: number,
  options: ValidationSampleOptions = {},
): string {
  const text = formatValidationSamples(samples, n, options);
  if (text.length > 0) process.stdout.write(text);
  return text;
}
