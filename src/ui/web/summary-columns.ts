/**
 * Which summary columns (the last value of a metric) the runs table shows.
 *
 * By default, the keys a user watches come first: those whose last part (`train/loss` → `loss`)
 * is one of the names training jobs log their headline numbers under, in this order — loss,
 * reward, return, score, accuracy, perplexity, KL, entropy, learning rate; a name that contains
 * one of them as a word (`policy_loss`, `mean_reward`) right after it. Then the keys logged by
 * the most runs, then by name. At most `MAX_SUMMARY_COLUMNS`.
 *
 * A user's own choice (the *Columns* picker) replaces the rule until reset; it is kept in the
 * address (`col=`) and in the browser's storage, so it survives a reload and a new tab.
 */

/** Summary columns shown at most by default (narrow or change them with the search or the picker). */
const MAX_SUMMARY_COLUMNS = 16;

/** The names watched first, most important first; matched against a key's last `/` part. */
const WATCHED = [
  "loss",
  "reward",
  "return",
  "score",
  "accuracy|acc",
  "perplexity|ppl",
  "kl",
  "entropy",
  "lr|learning_rate",
];
const EXACT = WATCHED.map((names) => new RegExp(`^(${names})$`, "i"));
const WORD = WATCHED.map((names) => new RegExp(`(^|[^a-z])(${names})($|[^a-z])`, "i"));

/** How much a key's name says "watch me": 0 for `loss`, 1 for `policy_loss`, 2 for `reward`, …; unwatched names last. */
export function watchRank(key: string): number {
  const last = key.slice(key.lastIndexOf("/") + 1);
  for (let i = 0; i < WATCHED.length; i++) {
    if (EXACT[i]?.test(last) === true) return 2 * i;
    if (WORD[i]?.test(last) === true) return 2 * i + 1;
  }
  return 2 * WATCHED.length;
}

/** Keys in the order the rule puts them: watched names first, then the keys most runs have, then by name. */
export function orderSummaryKeys(
  summaries: readonly Readonly<Record<string, number>>[],
  keys: readonly string[],
): string[] {
  const runs = new Map<string, number>();
  for (const summary of summaries) for (const key of Object.keys(summary)) runs.set(key, (runs.get(key) ?? 0) + 1);
  return [...keys].sort(
    (a, b) => watchRank(a) - watchRank(b) || (runs.get(b) ?? 0) - (runs.get(a) ?? 0) || (a < b ? -1 : a > b ? 1 : 0),
  );
}

/** The columns to show: the user's choice (those of them still there) or the rule's first `max`. */
export function summaryColumns(
  summaries: readonly Readonly<Record<string, number>>[],
  candidates: readonly string[],
  chosen: readonly string[] | null,
  max = MAX_SUMMARY_COLUMNS,
): string[] {
  const ordered = orderSummaryKeys(summaries, candidates);
  if (chosen === null) return ordered.slice(0, max);
  const picked = new Set(chosen);
  return ordered.filter((k) => picked.has(k));
}

const STORAGE_KEY = "rankscope.summaryColumns";

/** The choice kept in the browser, or null (the rule) when there is none or storage is off. */
export function loadChosenColumns(): string[] | null {
  try {
    const raw = localStorage.getItem(STORAGE_KEY);
    if (raw === null) return null;
    const parsed: unknown = JSON.parse(raw);
    return Array.isArray(parsed) && parsed.every((k) => typeof k === "string") ? parsed : null;
  } catch {
    return null;
  }
}

/** Keep the choice in the browser (null: forget it). Storage that is off or full is not an error. */
export function saveChosenColumns(chosen: readonly string[] | null): void {
  try {
    if (chosen === null) localStorage.removeItem(STORAGE_KEY);
    else localStorage.setItem(STORAGE_KEY, JSON.stringify(chosen));
  } catch {
    // The choice then lasts as long as the address holds it.
  }
}
