/**
 * The Inference tab's slowest replicas at one flush (docs/inference.md, "Slowest replicas"): the
 * replicas' own p50 TTFT judged against the median replica's with the straggler attribution's
 * rule (`core/stands-out.ts`), and the table that names the slowest.
 */
import { judgeFigures, STANDS_OUT_DEFAULTS, type Standing } from "../../../core/stands-out.js";
import { el } from "../dom.js";

/** One replica's TTFT lines: its p50 and p99 by step. */
export interface Replica {
  readonly rank: number;
  /** The name its process registered (`ModelServer_ab12_r0`). */
  readonly name: string;
  readonly p50: Map<number, number>;
  readonly p99: Map<number, number>;
}

export const ms = (seconds: number): string =>
  Number.isFinite(seconds) ? `${Number((seconds * 1000).toPrecision(3))} ms` : "–";
export const signedMs = (seconds: number): string => `${seconds >= 0 ? "+" : "−"}${ms(Math.abs(seconds))}`;

/** The replicas' p50 TTFT at `step` judged against each other (the straggler rule, floor 20 ms). */
export function judgeReplicas(replicas: readonly Replica[], step: number): ReturnType<typeof judgeFigures> {
  return judgeFigures(
    replicas.map((r) => r.p50.get(step) ?? NaN),
    STANDS_OUT_DEFAULTS.minExcessMs / 1000,
  );
}

/** One replica's row: who, its p50 TTFT against the median's, its p99, at how many recent flushes it stood out. */
export interface ReplicaRow {
  readonly replica: Replica;
  readonly standing: Standing;
  readonly slow: number;
}

/** The slowest replicas' table. */
export function replicaTable(
  rows: readonly ReplicaRow[],
  at: { readonly step: number; readonly median: number; readonly window: number },
): HTMLElement {
  const { step, median, window } = at;
  const head = ["replica", "p50", "vs median", "p99", `slow/${window}`];
  return el(
    "table",
    { className: "replicas" },
    el(
      "thead",
      {},
      el(
        "tr",
        {},
        ...head.map((h) =>
          el("th", h.startsWith("slow") ? { title: `flushes it stood out at, of the last ${window}` } : {}, h),
        ),
      ),
    ),
    el(
      "tbody",
      {},
      ...rows.map(({ replica, standing, slow }) =>
        el(
          "tr",
          {
            className: standing.standsOut ? "stands-out" : "",
            "data-rank": String(replica.rank),
            "data-value": String(standing.value),
            "data-stands-out": standing.standsOut ? "1" : "0",
          },
          el(
            "td",
            {},
            `rank ${replica.rank}`,
            standing.standsOut
              ? el("span", { className: "chip" }, slow * 2 >= window && window > 1 ? "chronic" : "stands out")
              : "",
            el("div", { className: "muted replica-name" }, replica.name),
          ),
          el("td", {}, ms(standing.value)),
          el(
            "td",
            {},
            signedMs(standing.excess),
            el("div", { className: "muted replica-name" }, `${(standing.value / median).toFixed(2)}×`),
          ),
          el("td", {}, ms(replica.p99.get(step) ?? NaN)),
          el("td", { title: `stood out at ${slow} of the last ${window} flushes` }, `${slow}/${window}`),
        ),
      ),
    ),
  );
}
