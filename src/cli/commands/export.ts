/**
 * `rankscope export RUN --format csv|jsonl [--out FILE]`: every numeric point of a run (scalars of
 * every rank, stream values, system metrics) as CSV or JSON Lines, with a progress bar on stderr.
 *
 * rankscope's own keys (`…__count`, `rankscope/…`) are left out unless `--internal` is given.
 *
 * Columns / fields: key, kind, rank, step, wall (ms since the epoch), value. NaN and ±Infinity are
 * written as `NaN`, `Infinity`, `-Infinity` (in JSONL as the proto3 JSON strings).
 */
import type { Command } from "commander";
import { createWriteStream, type WriteStream } from "node:fs";
import { once } from "node:events";
import { isInternalKey } from "../../core/internal-keys.js";
import { jsonNumberText, numberText } from "../../core/json.js";
import * as store from "../../store/reader.js";
import type { SeriesKind } from "../../store/reader.js";
import { resolveRunArg, ROOT_OPTION_HELP } from "../run-arg.js";
import { ProgressLine, progressBar } from "../progress.js";

/** The formats `export` writes. */
export const EXPORT_FORMATS = ["csv", "jsonl"] as const;

/** A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180). */
function csvField(text: string): string {
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** `[#####-----]  50%  3/6 series, 12,000 points`. */
function exportProgress(done: number, total: number, points: number): string {
  return `${progressBar(total === 0 ? 1 : done / total)}  ${done}/${total} series, ${points.toLocaleString("en-US")} points`;
}

async function write(out: WriteStream | NodeJS.WriteStream, text: string): Promise<void> {
  if (!out.write(text)) await once(out, "drain");
}

export function registerExportCommand(program: Command): void {
  program
    .command("export")
    .description("write every point of a run (scalars, streams, system metrics) as CSV or JSON Lines")
    .argument("<run>", "a run directory, or experiment/trial under --root")
    .requiredOption("--format <format>", `output format: ${EXPORT_FORMATS.join(" or ")}`)
    .option("--out <file>", "write to this file instead of stdout")
    .option("--root <dir>", ROOT_OPTION_HELP)
    .option("--internal", "also export rankscope's own keys (…__count, rankscope/…), left out by default")
    .action(async (run: string, options: { format: string; out?: string; root?: string; internal?: boolean }) => {
      const format = EXPORT_FORMATS.find((f) => f === options.format);
      if (format === undefined) {
        throw new Error(
          `--format ${JSON.stringify(options.format)} is not supported; valid: ${EXPORT_FORMATS.join(", ")}`,
        );
      }
      const runDir = resolveRunArg(run, options.root);
      const series: { key: string; kind: SeriesKind; rank: number }[] = [];
      for (const k of store.keys(runDir)) {
        if (k.kind === "sample" || k.kind === "histogram") continue;
        if (options.internal !== true && isInternalKey(k.key)) continue;
        for (const rank of k.ranks) series.push({ key: k.key, kind: k.kind, rank });
      }
      const file = options.out === undefined ? undefined : createWriteStream(options.out);
      const out = file ?? process.stdout;
      const bar = new ProgressLine();
      let points = 0;
      if (format === "csv") await write(out, "key,kind,rank,step,wall,value\n");
      bar.update(exportProgress(0, series.length, 0));
      for (const [i, s] of series.entries()) {
        const result = store.series(runDir, s.key, {
          kind: s.kind,
          rank: s.rank,
          maxPoints: Infinity,
          x: s.kind === "scalar" ? "step" : "wall",
        });
        const keyText = format === "csv" ? csvField(s.key) : JSON.stringify(s.key);
        let text = "";
        for (const p of result.points) {
          text +=
            format === "csv"
              ? `${keyText},${s.kind},${s.rank},${p.step},${p.wall},${numberText(p.value)}\n`
              : `{"key":${keyText},"kind":"${s.kind}","rank":${s.rank},"step":${p.step},"wall":${p.wall},"value":${jsonNumberText(p.value)}}\n`;
          if (text.length > 1 << 20) {
            await write(out, text);
            text = "";
          }
        }
        await write(out, text);
        points += result.points.length;
        bar.update(exportProgress(i + 1, series.length, points), i + 1 === series.length);
      }
      bar.end();
      if (file !== undefined) {
        file.end();
        await once(file, "finish");
        process.stderr.write(
          `wrote ${points.toLocaleString("en-US")} points of ${series.length} series to ${options.out ?? ""}\n`,
        );
      }
    });
}
