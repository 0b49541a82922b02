/**
 * Live updates: every second, each on-screen line of a live run asks for the points after its
 * cursor (one request per run and kind, up to 100 lines each) and appends them; a line past
 * LIVE_POINT_CAP points thins its older part, so a long watch keeps the page's memory flat.
 */
import { api, isStreamData } from "./api.js";
import type { ChartCard } from "./chart.js";
import { API_KIND, FETCH_CONCURRENCY, batches, pollable, pool, streamHooks } from "./fetching.js";
import { hooks, isLive, state } from "./state.js";
import { thinPoints } from "./thin.js";

/** Lines per request when polling a live run (the server takes at most 200). */
const POLL_BATCH = 100;

let polling = false;

/** Bytes of JSON the last poll downloaded and points it brought (for the benchmark and the live badge). */
const pollStats = { polls: 0, bytes: 0, points: 0, lastBytes: 0, lastPoints: 0 };

export async function poll(liveBox: HTMLElement): Promise<void> {
  if (polling || document.hidden) return;
  polling = true;
  const generation = state.generation;
  let grew = 0;
  const bytesBefore = api.bytesReceived();
  try {
    const sources = pollable();
    state.finalPoll.clear();
    const changed = new Set<ChartCard>();
    const groups = batches(sources, (s) => `${s.run}\u0000${s.kind}`, POLL_BATCH);
    await pool(groups, FETCH_CONCURRENCY, async (group) => {
      const first = group[0];
      if (first === undefined) return;
      const answers = await api.lines(
        first.run,
        API_KIND[first.kind],
        group.map((s) => [s.key, s.rank ?? null, s.cursor]),
      );
      if (generation !== state.generation) return;
      group.forEach((source, i) => {
        const answer = answers[i];
        if (answer === undefined || "error" in answer || answer.values.length === 0) return;
        if (source.kind === "stream") {
          if (!isStreamData(answer)) return;
          const data = answer;
          if (data.cursor !== null) source.cursor = data.cursor;
          if (streamHooks.addStreamPoints(source.card, source, data)) {
            grew += data.values.length;
            for (const line of source.card.getLines()) if (thinPoints(line)) line.downsampled = true;
            source.card.update();
          }
          return;
        }
        if (isStreamData(answer)) return;
        const data = answer;
        source.cursor = data.cursor ?? source.cursor;
        const line = source.line;
        line.steps.push(...data.steps);
        line.times.push(...data.times);
        line.values.push(...data.values);
        if (thinPoints(line)) line.downsampled = true;
        grew += data.values.length;
        changed.add(source.card);
      });
    });
    for (const card of changed) card.update();
    const live = state.selected.some(isLive);
    liveBox.textContent = live ? (grew > 0 ? `live · +${grew} points` : "live") : "";
  } catch (error) {
    hooks.showError(error);
  } finally {
    pollStats.polls++;
    pollStats.lastBytes = api.bytesReceived() - bytesBefore;
    pollStats.lastPoints = grew;
    pollStats.bytes += pollStats.lastBytes;
    pollStats.points += grew;
    document.body.dataset["polls"] = String(pollStats.polls);
    polling = false;
  }
}
