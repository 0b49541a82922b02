/** `rankscope runs`: list the runs under a root, newest first. */
import type { Command } from "commander";
import { isAbsolute, relative } from "node:path";
import { listRuns, type LostRank, type RunSummary } from "../../store/reader.js";
import { defaultRoot } from "../run-arg.js";

function formatTime(ms: number | null): string {
  if (ms === null) return "-";
  const d = new Date(ms);
  const pad = (n: number): string => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A duration for people: `42s`, `3m05s`, `2h07m`. */
function formatDuration(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms) || ms < 0) return "-";
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

/** A run's path relative to the working directory when it is below it, else absolute. */
function displayPath(runDir: string): string {
  const rel = relative(process.cwd(), runDir);
  return rel === "" ? "." : rel.startsWith("..") || isAbsolute(rel) ? runDir : rel;
}

/** A lost rank as a line under its run: `lost rank 1 (Rank_ab12_r1) after step 3: exited (killed by SIGKILL)`. */
function formatLostRank(lost: LostRank): string {
  const after = lost.step === null ? "" : ` after step ${lost.step}`;
  const back = lost.backStep === null ? "" : ` (back at step ${lost.backStep})`;
  return `lost rank ${lost.rank} (${lost.rankName})${after}: ${lost.reason}${back}`;
}

/** The table `rankscope runs` prints. */
export function formatRunsTable(runs: readonly RunSummary[], now = Date.now()): string {
  const rows = runs.map((r) => {
    // A running run lasts until now; one that stopped without saying so, until its last write.
    const end = r.endedAt ?? (r.status === "running" ? now : r.updatedAt);
    const duration = r.startedAt !== null && end !== null ? end - r.startedAt : null;
    return [
      r.experiment ?? "?",
      r.trial ?? "?",
      r.status,
      formatTime(r.startedAt),
      formatDuration(duration),
      displayPath(r.runDir),
    ];
  });
  const header = ["EXPERIMENT", "TRIAL", "STATUS", "STARTED", "DURATION", "PATH"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: readonly string[]): string =>
    cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join("  ");
  // A run that cannot be read says why, under its row; so does each rank it lost.
  const lines = runs.flatMap((r, i) => [
    line(rows[i] ?? []),
    ...(r.error === undefined ? [] : [`  ${r.error}`]),
    ...(r.lostRanks ?? []).map((l) => `  ${formatLostRank(l)}`),
  ]);
  return [line(header), ...lines].join("\n") + "\n";
}

export function registerRunsCommand(program: Command): void {
  program
    .command("runs")
    .description("list the runs under a root directory (those with a metrics.db), newest first")
    .option("--root <dir>", "the runs root (default: $RANKSCOPE_ROOT or ./runs)")
    .option("--json", "print JSON instead of a table")
    .action((options: { root?: string; json?: boolean }) => {
      const runs = listRuns(options.root ?? defaultRoot());
      if (options.json === true) {
        process.stdout.write(`${JSON.stringify(runs, null, 2)}\n`);
        return;
      }
      if (runs.length === 0) {
        process.stdout.write(
          `no runs under ${options.root ?? defaultRoot()} (a run appears once the "store" backend writes its metrics.db)\n`,
        );
        return;
      }
      process.stdout.write(formatRunsTable(runs));
    });
}
