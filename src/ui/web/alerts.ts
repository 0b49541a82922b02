/**
 * A run's alert events as episodes: each `firing` event with its `resolved` one (they share an
 * `id`), firing ones first, newest first. Pure: the banner and the Alerts tab draw from it.
 */
import type { AlertEntry } from "./api.js";

/** One episode: its firing event and, once it ended, its resolved one (or `ended`: the run ended while it fired). */
export interface AlertEpisode {
  readonly id: string;
  readonly firing: AlertEntry;
  readonly resolved: AlertEntry | null;
}

/** Episodes of `entries` (events in `seq` order): firing first, then by when they started, newest first. */
export function alertEpisodes(entries: readonly AlertEntry[]): AlertEpisode[] {
  const byId = new Map<string, { firing: AlertEntry | null; resolved: AlertEntry | null }>();
  for (const entry of entries) {
    const episode = byId.get(entry.id) ?? { firing: null, resolved: null };
    if (entry.state === "firing") episode.firing = entry;
    else episode.resolved = entry;
    byId.set(entry.id, episode);
  }
  const out: AlertEpisode[] = [];
  for (const [id, { firing, resolved }] of byId) {
    // A resolve whose firing is older than the events read (the newest 1000) is left out.
    if (firing !== null) out.push({ id, firing, resolved });
  }
  return out.sort((a, b) => Number(a.resolved !== null) - Number(b.resolved !== null) || b.firing.seq - a.firing.seq);
}

/** What an alert is about: its key, its rank (with host), or the job. */
export function alertSubject(entry: AlertEntry): string {
  if (entry.key !== undefined) return entry.key;
  if (entry.rankName !== undefined) {
    const who = entry.rank === undefined ? entry.rankName : `rank ${entry.rank} (${entry.rankName})`;
    return entry.host === undefined ? who : `${who} on ${entry.host}`;
  }
  return entry.rule === "user" ? (entry.title ?? "") : "the job";
}
