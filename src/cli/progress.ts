/**
 * The CLI's one progress line on stderr (`export`, `traces merge`, `wandb sync`).
 *
 * On a terminal it is redrawn in place (`\r`), at most every 100 ms and at the end. Anywhere else
 * (a file, a pipe, CI logs) redrawing would print one line per update, so only the final state is
 * printed, once, by `end()`.
 */

/** `[#####-----]  50%`: a bar of `width` cells for a fraction in [0, 1]. */
export function progressBar(fraction: number, width = 30): string {
  const f = Number.isFinite(fraction) ? Math.min(1, Math.max(0, fraction)) : 1;
  const filled = Math.round(f * width);
  return `[${"#".repeat(filled)}${"-".repeat(width - filled)}] ${String(Math.floor(f * 100)).padStart(3)}%`;
}

/** A progress line: `update` as often as you like, `end` once. */
export class ProgressLine {
  private last = "";
  private drawn = "";
  private lastDrawAt = 0;

  constructor(
    private readonly stream: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr,
    private readonly tty: boolean = stream.isTTY === true,
  ) {}

  /** The current state; drawn now on a terminal (unless drawn less than 100 ms ago and not `final`). */
  update(line: string, final = false): void {
    this.last = line;
    if (!this.tty || line === this.drawn) return;
    const now = Date.now();
    if (!final && now - this.lastDrawAt < 100) return;
    this.lastDrawAt = now;
    this.drawn = line;
    this.stream.write(`\r${line}`);
  }

  /** Finish the line: on a terminal, draw the last state and end the line; elsewhere print the last state once. */
  end(): void {
    if (this.last === "") return;
    if (this.tty) {
      if (this.drawn !== this.last) this.stream.write(`\r${this.last}`);
      this.stream.write("\n");
    } else this.stream.write(`${this.last}\n`);
    this.last = "";
    this.drawn = "";
  }
}
