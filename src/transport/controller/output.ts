/**
 * A spawned rank's stdout/stderr, forwarded line by line to this process's own streams (so the
 * job's output is one console, and tests can capture it), with two extras: `sync` markers that
 * let the controller wait until a rank's output so far has arrived, and the last lines of stderr
 * kept for error messages when a rank fails to start.
 */
import type { Readable } from "node:stream";

const MARKER_PREFIX = "\u001b[rankscope-sync:";
const TAIL_LINES = 20;

/** Forwards one readable stream of a rank, line by line. */
export class OutputForwarder {
  private partial = "";
  private readonly tail: string[] = [];
  private readonly waiters = new Map<string, () => void>();
  private held = "";
  /** Resolves when the stream has ended (everything the rank wrote has been read). */
  readonly ended: Promise<void>;

  /**
   * With `hold`, lines are kept until `release()` instead of written as they come, so the
   * controller can print several ranks' output in rank order.
   */
  constructor(
    source: Readable,
    private readonly write: (text: string) => void,
    private readonly hold = false,
  ) {
    this.ended = new Promise((resolve) => source.once("end", () => resolve()));
    source.setEncoding("utf8");
    source.on("data", (chunk: string) => this.take(chunk));
    source.on("end", () => {
      if (this.partial.length > 0) this.emit(`${this.partial}\n`);
      this.partial = "";
      this.release();
    });
  }

  /** A unique line the rank writes when asked to `sync`; resolves when the line arrives here. */
  expect(id: string): { marker: string; arrived: Promise<void> } {
    const marker = `${MARKER_PREFIX}${id}]`;
    const arrived = new Promise<void>((resolve) => this.waiters.set(marker, resolve));
    return { marker, arrived };
  }

  /** Write the lines held so far (with `hold`). */
  release(): void {
    const text = this.held;
    this.held = "";
    if (text.length > 0) this.write(text);
  }

  /** The last lines seen (for error messages). */
  lastLines(): string {
    return this.tail.join("\n");
  }

  private take(chunk: string): void {
    const text = this.partial + chunk;
    const end = text.lastIndexOf("\n");
    if (end < 0) {
      this.partial = text;
      return;
    }
    this.partial = text.slice(end + 1);
    this.emit(text.slice(0, end + 1));
  }

  private emit(block: string): void {
    let out = "";
    // `block` ends with a newline; its last split element is not a line.
    for (const line of block.slice(0, -1).split("\n")) {
      if (line.startsWith(MARKER_PREFIX)) {
        const resolve = this.waiters.get(line);
        if (resolve !== undefined) {
          this.waiters.delete(line);
          resolve();
        }
        continue;
      }
      if (this.hold) this.held += `${line}\n`;
      else out += `${line}\n`;
      this.tail.push(line);
      if (this.tail.length > TAIL_LINES) this.tail.shift();
    }
    // Whole lines in one write, so a rank's table is never interleaved with another rank's line.
    if (out.length > 0) this.write(out);
  }
}
