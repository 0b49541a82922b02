/** `/api/keys`' answer for one run: its metric, stream, system and histogram keys, and every line's label. */
import { lineDisplayLabel } from "../core/rank-identity.js";
import { isInternalKey } from "../core/internal-keys.js";
import type { DashboardSource } from "./source.js";

/** A run's keys, and every line's label. */
export async function runKeys(source: DashboardSource, runDir: string): Promise<unknown> {
  const [metrics, streams, system, histograms, rankNames] = await Promise.all([
    source.keys(runDir),
    source.streamKeys(runDir),
    source.systemKeys(runDir),
    source.histogramKeys?.(runDir) ?? [],
    source.rankNames?.(runDir) ?? {},
  ]);
  // Every line's label, by the one naming rule (docs/DESIGN.md, "Identity").
  const rankLabels: Record<string, string> = {};
  for (const line of [...Object.keys(rankNames).map(Number), ...metrics.flatMap((k) => k.ranks)]) {
    if (Number.isInteger(line)) rankLabels[String(line)] = lineDisplayLabel(line, rankNames[String(line)]);
  }
  return {
    metrics: metrics.map((k) => ({ ...k, internal: isInternalKey(k.key) })),
    streams,
    system,
    histograms,
    rankNames,
    rankLabels,
  };
}
