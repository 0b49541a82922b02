/**
 * Reading per-rank trace files back, tolerating what a crash leaves: a missing `]`, and a last
 * line cut in the middle (everything up to the last full event loads).
 */
import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
import type { TraceEvent } from "./trace-events.js";

/** What reading a trace file found. */
export interface ParsedTrace {
  readonly events: TraceEvent[];
  /** True when the last line was cut short (a crash mid-write); the events before it are kept. */
  readonly truncated: boolean;
  /** Lines before the last that are not events (a corrupted file). */
  readonly badLines: number;
}

/** An event as far as reading needs: a JSON object with a string `ph` (other fields are read where used). */
function isTraceEvent(value: unknown): value is TraceEvent {
  return (
    value !== null &&
    typeof value === "object" &&
    !Array.isArray(value) &&
    "ph" in value &&
    typeof value.ph === "string"
  );
}

/** Incremental parser: feed lines, then `finish()`. */
class TraceLineParser {
  readonly events: TraceEvent[] = [];
  badLines = 0;
  private pendingBad = false;

  /** One line of a per-rank file (`[`, an event with its trailing comma, or blank). */
  line(raw: string): void {
    let text = raw.trim();
    if (text === "" || text === "[" || text === "]") return;
    if (this.pendingBad) {
      // The unparsable line was not the last one, so it is corruption, not truncation.
      this.badLines++;
      this.pendingBad = false;
    }
    if (text.startsWith("[")) text = text.slice(1).trim();
    if (text.endsWith(",")) text = text.slice(0, -1);
    if (text.endsWith("]")) text = text.slice(0, -1).trim();
    if (text === "") return;
    try {
      const event: unknown = JSON.parse(text);
      if (isTraceEvent(event)) {
        this.events.push(event);
        return;
      }
    } catch {
      // handled below
    }
    this.pendingBad = true;
  }

  /** The result; an unparsable last line counts as truncation. */
  finish(): ParsedTrace {
    return { events: this.events, truncated: this.pendingBad, badLines: this.badLines };
  }
}

/** Parse a whole per-rank trace file's text. */
export function parseTraceText(text: string): ParsedTrace {
  const parser = new TraceLineParser();
  for (const line of text.split("\n")) parser.line(line);
  return parser.finish();
}

/** Read a per-rank trace file line by line; `onBytes` is told how many bytes each line took. */
export async function readTraceFile(path: string, onBytes?: (bytes: number) => void): Promise<ParsedTrace> {
  const parser = new TraceLineParser();
  const lines = createInterface({ input: createReadStream(path, { encoding: "utf8" }), crlfDelay: Infinity });
  for await (const line of lines) {
    parser.line(line);
    onBytes?.(Buffer.byteLength(line) + 1);
  }
  return parser.finish();
}
