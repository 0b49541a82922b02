/**
 * A run's text logs (`logs/merged.log`, `logs/main.log`, written by src/textlog) for the
 * dashboard's Logs tab, read a window at a time: a file can be gigabytes, so a request reads at
 * most `maxBytes` from a byte offset (the tail, the bytes before an offset, or those after one),
 * never the whole file. Windows are cut at line ends (a `\n` byte never occurs inside a UTF-8
 * character), colour codes are removed, and each line is parsed back into the fields the text
 * log wrote (rank name, time, component, level, message). Lines that follow a record without a
 * header of their own (a stack trace) belong to it: they carry its level and component, so a
 * filter keeps or drops them with it.
 */
import { stripVTControlCharacters } from "node:util";
import { LEVEL_NAMES } from "../textlog/format.js";
import { HttpError } from "./security.js";
import { intParam } from "./params.js";
import type { RunBytes, TraceFileEntry } from "./source.js";

/** Bytes one request scans at most, and by default (more with a filter, whose matches can be sparse). */
export const LOG_MAX_WINDOW = 4 * 1024 * 1024;
export const LOG_DEFAULT_WINDOW = 64 * 1024;
const LOG_DEFAULT_FILTERED_WINDOW = 1024 * 1024;
/** Lines one answer holds at most, and by default. */
export const LOG_MAX_LINES = 5000;
const LOG_DEFAULT_LINES = 1000;
/** A line longer than this is cut (the rest is skipped, said by `cut`). */
const MAX_LINE_CHARS = 8192;

/** The level names a filter takes, lowest first, with pino's numbers (src/textlog/format.ts). */
const LOG_LEVELS: Readonly<Record<string, number>> = Object.fromEntries(
  Object.entries(LEVEL_NAMES).map(([n, name]) => [name.toLowerCase(), Number(n)]),
);

/** One line of a log file, as the text log wrote it. */
export interface LogLine {
  /** Byte offset of the line's start in the file. */
  readonly offset: number;
  /** The writer's rank name (`[Trainer_0_r1]` in merged.log), or null. */
  readonly rank: string | null;
  /** `20261122-01:52:03.123`, or null on a line that continues a record (a stack trace). */
  readonly time: string | null;
  readonly component: string | null;
  /** `info`, `warning`, … (a continuation line has its record's), or null when unknown. */
  readonly level: string | null;
  /** The message (after `LEVEL: `), or the whole line when it has no header. */
  readonly message: string;
  /** True for a line that continues the record above it. */
  readonly continued: boolean;
}

/** A window of a log file. */
export interface LogWindow {
  readonly file: string;
  /** The file's size when read. */
  readonly size: number;
  /** Byte range of the lines read (filtered or not): pass `start` as `before` for older lines, `end` as `after` for newer ones. */
  readonly start: number;
  readonly end: number;
  readonly lines: LogLine[];
  /** Components seen in the window (before filtering), for the filter's choices. */
  readonly components: string[];
  /** The file is shorter than the `after` asked (rotated or truncated): read from its tail instead. */
  readonly reset: boolean;
}

/** Which window, and which of its lines. */
interface LogQuery {
  readonly after?: number;
  readonly before?: number;
  readonly maxBytes?: number;
  readonly limit?: number;
  /** The lowest level shown (`warning` shows warnings, errors and critical ones). */
  readonly level?: string;
  /** Only this component's lines. */
  readonly component?: string;
}

const HEADER = /^(\d{8}-\d{2}:\d{2}:\d{2}\.\d{3}) (.+?) (TRACE|DEBUG|INFO|WARNING|ERROR|CRITICAL|LEVEL\d+): ?(.*)$/;
const RANK_PREFIX = /^\[([^\]]*)\] ?/;
/** merged.log's rank-name prefix, `[name]` padded to this width (src/textlog/logger.ts). */
const MERGED_PREFIX_WIDTH = 16;

/** Parse lines (colour codes removed); a line without a header continues the record above it. */
function parseLogLines(texts: readonly string[], offsets: readonly number[]): LogLine[] {
  const out: LogLine[] = [];
  const lastOfRank = new Map<string | null, LogLine>();
  texts.forEach((raw, i) => {
    const text = stripVTControlCharacters(raw);
    const prefix = RANK_PREFIX.exec(text);
    const rank = prefix === null ? null : (prefix[1] ?? "");
    // merged.log writes `[name]` padded to 16 characters, a space, then the line.
    const pad = rank === null ? 0 : Math.max(0, MERGED_PREFIX_WIDTH - rank.length - 2);
    const rest = prefix === null ? text : text.slice(prefix[0].length).replace(new RegExp(`^ {0,${pad}}`), "");
    const header = HEADER.exec(rest);
    const offset = offsets[i] ?? 0;
    let line: LogLine;
    if (header !== null) {
      const [, time = null, component = null, levelName = "", message = ""] = header;
      line = { offset, rank, time, component, level: levelName.toLowerCase(), message, continued: false };
    } else {
      const owner = lastOfRank.get(rank);
      line = {
        offset,
        rank,
        time: null,
        component: owner?.component ?? null,
        level: owner?.level ?? null,
        message: rest,
        continued: true,
      };
    }
    if (!line.continued) lastOfRank.set(rank, line);
    out.push(line);
  });
  return out;
}

function levelNumber(level: string | null): number | undefined {
  return level === null ? undefined : LOG_LEVELS[level];
}

/** The byte range to read for a query over a file of `size` bytes. */
function rangeOf(
  size: number,
  query: LogQuery,
  window: number,
): { from: number; to: number; forward: boolean; reset: boolean } {
  if (query.after !== undefined && query.after <= size)
    return { from: query.after, to: Math.min(size, query.after + window), forward: true, reset: false };
  const to = query.before !== undefined ? Math.min(query.before, size) : size;
  return { from: Math.max(0, to - window), to, forward: false, reset: query.after !== undefined };
}

/** The bytes of the range a query asks for, and the file's size when read. */
async function readRange(
  file: RunBytes,
  query: LogQuery,
  window: number,
): Promise<{ bytes: Buffer; size: number; range: ReturnType<typeof rangeOf> }> {
  const size = await file.size();
  const range = rangeOf(size, query, window);
  const bytes = await file.read(range.from, range.to - range.from);
  return { bytes, size, range };
}

/**
 * The whole lines of a window, with their offsets: a partial first line is skipped when the
 * window may start inside one (`skipFirst`), a partial last one dropped; a line longer than the
 * whole window is taken cut, so paging always moves on.
 */
function wholeLines(
  bytes: Buffer,
  from: number,
  skipFirst: boolean,
  window: number,
): { texts: string[]; offsets: number[]; head: number; tail: number } {
  const head = skipFirst ? bytes.indexOf(0x0a) + 1 : 0;
  let tail = bytes.lastIndexOf(0x0a) + 1;
  if (tail <= head && bytes.length === window) tail = bytes.length;
  const texts: string[] = [];
  const offsets: number[] = [];
  for (let at = head; at < tail;) {
    const nl = bytes.indexOf(0x0a, at);
    const stop = nl === -1 || nl >= tail ? tail : nl;
    texts.push(
      bytes
        .subarray(at, Math.min(stop, at + MAX_LINE_CHARS * 4))
        .toString("utf8")
        .replace(/\r$/, "")
        .slice(0, MAX_LINE_CHARS),
    );
    offsets.push(from + at);
    at = stop + 1;
  }
  return { texts, offsets, head, tail };
}

/**
 * Read one window of a log file (from its source: a file under the runs root, a team server's
 * rows) and the lines of
 * it that pass the filters, at most `limit` (the newest ones reading backwards, the oldest reading
 * forwards; `start`/`end` then bound the lines returned, so the next page goes on from there).
 */
export async function readLogWindow(source: RunBytes, query: LogQuery): Promise<LogWindow> {
  const file = source.name;
  const minLevel = query.level === undefined || query.level === "" ? undefined : LOG_LEVELS[query.level];
  if (query.level !== undefined && query.level !== "" && minLevel === undefined)
    throw new HttpError(
      400,
      `level must be one of ${Object.keys(LOG_LEVELS).join(", ")}, got ${JSON.stringify(query.level)}`,
    );
  const component = query.component === "" ? undefined : query.component;
  const window = Math.min(
    LOG_MAX_WINDOW,
    query.maxBytes ??
      (minLevel !== undefined || component !== undefined ? LOG_DEFAULT_FILTERED_WINDOW : LOG_DEFAULT_WINDOW),
  );
  const limit = Math.min(LOG_MAX_LINES, query.limit ?? LOG_DEFAULT_LINES);
  const { bytes, size, range } = await readRange(source, query, window);
  const { texts, offsets, head, tail } = wholeLines(bytes, range.from, range.from > 0 && !range.forward, window);
  let parsed = parseLogLines(texts, offsets);
  let start = range.from + head;
  let end = range.from + Math.max(head, tail);
  // Reading backwards, lines before the window's first header continue a record that began in
  // the bytes before it: leave them to the next page back, where they come with their record.
  const firstHeader = parsed.findIndex((l) => !l.continued);
  if (!range.forward && start > 0 && firstHeader > 0) {
    parsed = parsed.slice(firstHeader);
    start = parsed[0]?.offset ?? start;
  }
  const components = [...new Set(parsed.flatMap((l) => (l.component === null ? [] : [l.component])))].sort();
  let lines = parsed.filter(
    (l) =>
      (minLevel === undefined || (levelNumber(l.level) ?? 0) >= minLevel) &&
      (component === undefined || l.component === component),
  );
  if (lines.length > limit && range.forward) {
    lines = lines.slice(0, limit);
    end = parsed.find((l) => l.offset > (lines[lines.length - 1]?.offset ?? 0))?.offset ?? end;
  } else if (lines.length > limit) {
    lines = lines.slice(lines.length - limit);
    start = lines[0]?.offset ?? start;
  }
  return { file, size, start, end, lines, components, reset: range.reset };
}

/** `/api/log`'s window query, checked: `after` or `before`, `maxBytes`, `limit`, `level`, `component`. */
export function logQueryParam(p: URLSearchParams): LogQuery {
  const after = intParam(p, "after", 0, Number.MAX_SAFE_INTEGER);
  const before = intParam(p, "before", 0, Number.MAX_SAFE_INTEGER);
  if (after !== undefined && before !== undefined)
    throw new HttpError(400, "give after (newer lines) or before (older lines), not both");
  const maxBytes = intParam(p, "maxBytes", 1024, LOG_MAX_WINDOW);
  const limit = intParam(p, "limit", 1, LOG_MAX_LINES);
  const level = p.get("level") ?? undefined;
  const component = p.get("component") ?? undefined;
  if (component !== undefined && component.length > 200)
    throw new HttpError(400, "component must be at most 200 characters");
  return {
    ...(after !== undefined ? { after } : {}),
    ...(before !== undefined ? { before } : {}),
    ...(maxBytes !== undefined ? { maxBytes } : {}),
    ...(limit !== undefined ? { limit } : {}),
    ...(level !== undefined ? { level } : {}),
    ...(component !== undefined ? { component } : {}),
  };
}

/** The text logs first (merged.log: every process; main.log: the controller's), then any other file of `logs/`. */
export function logFiles(files: TraceFileEntry[]): TraceFileEntry[] {
  const order = (name: string): number => (name === "merged.log" ? 0 : name === "main.log" ? 1 : 2);
  return [...files].sort((a, b) => order(a.name) - order(b.name) || (a.name < b.name ? -1 : 1));
}
