/**
 * CSV and JSON Lines of `step,key,value` rows: what `rankscope export` writes, read back exactly,
 * and the way in for any tool that can write a table.
 *
 * Columns (CSV: a header row naming them, in any order; JSONL: the fields of each object):
 * `key`, `step`, `value` (required); `wall` (milliseconds since the epoch) or `wall_time` (seconds
 * since the epoch, as TensorBoard's and pandas' exports write it); `kind` (`scalar`, `stream`,
 * `system`; default `scalar`); `rank` (the line: -1 for a job's reduced values, the default, r for
 * rank r). Values are numbers, or `NaN`, `Infinity`, `-Infinity` (any case; `inf`, `nan` too);
 * without a wall time column every point gets the file's modification time.
 *
 * Files are read a few MiB at a time; a quoted CSV field may hold commas, quotes (doubled) and line
 * breaks (RFC 4180), as `export` writes keys that have them.
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import { isRecord } from "../core/json.js";
import { ImportError, type ImportRun } from "./import-run.js";

/** The columns a table may have. */
export const TABLE_COLUMNS = ["key", "step", "value", "wall", "wall_time", "kind", "rank"] as const;
type Column = (typeof TABLE_COLUMNS)[number];

const KINDS = ["scalar", "stream", "system"] as const;
type TableKind = (typeof KINDS)[number];

/** Bytes read at a time. */
const READ_BYTES = 4 << 20;

/** Read `file` as UTF-8 text a piece at a time: `take(text, final)` returns how much of `text` it used. */
function readText(file: string, take: (text: string, final: boolean) => number): void {
  const fd = openSync(file, "r");
  const decoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: false });
  const buffer = Buffer.allocUnsafe(READ_BYTES);
  let rest = "";
  try {
    for (;;) {
      const n = readSync(fd, buffer, 0, READ_BYTES, null);
      const final = n === 0;
      const text = rest + (final ? decoder.decode() : decoder.decode(buffer.subarray(0, n), { stream: true }));
      rest = text.slice(take(text, final));
      if (final) return;
    }
  } finally {
    closeSync(fd);
  }
}

const NUMBER = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/** A value's text as a number: decimal or exponent notation, or NaN / ±Infinity spelled out; null when it is neither. */
export function parseValueText(text: string): number | null {
  const t = text.trim();
  if (NUMBER.test(t)) return Number(t);
  switch (t.toLowerCase()) {
    case "nan":
    case "+nan":
    case "-nan":
      return NaN;
    case "inf":
    case "+inf":
    case "infinity":
    case "+infinity":
      return Infinity;
    case "-inf":
    case "-infinity":
      return -Infinity;
    default:
      return null;
  }
}

/** One row's fields, by column, as text (CSV) or JSON values (JSONL). */
type Row = Partial<Record<Column, unknown>>;

/** Reads rows into an import run, checking each field. */
class RowSink {
  rows = 0;
  constructor(
    private readonly file: string,
    private readonly run: ImportRun,
    private readonly defaultWall: number,
  ) {}

  private number(row: Row, column: Column, where: string, required: boolean): number | undefined {
    const raw = row[column];
    if (raw === undefined || raw === "" || raw === null) {
      if (required) throw new ImportError(this.file, where, `has no ${column}`);
      return undefined;
    }
    const n = typeof raw === "number" ? raw : typeof raw === "string" ? parseValueText(raw) : null;
    if (n === null)
      throw new ImportError(
        this.file,
        where,
        `${column} ${JSON.stringify(raw)} is not a number (valid: decimal or exponent notation, NaN, Infinity, -Infinity)`,
      );
    if (column !== "value" && !Number.isFinite(n))
      throw new ImportError(this.file, where, `${column} ${JSON.stringify(raw)} must be a finite number`);
    if (column === "rank" && !Number.isSafeInteger(n))
      throw new ImportError(
        this.file,
        where,
        `rank ${JSON.stringify(raw)} must be an integer (-1: the reduced values)`,
      );
    return n;
  }

  add(row: Row, where: string): void {
    const key = row.key;
    if (typeof key !== "string" || key === "")
      throw new ImportError(this.file, where, `key ${JSON.stringify(key)} must be a non-empty text`);
    const step = this.number(row, "step", where, true) ?? 0;
    const value = this.number(row, "value", where, true) ?? NaN;
    const wallMs = this.number(row, "wall", where, false);
    const wallSeconds = wallMs === undefined ? this.number(row, "wall_time", where, false) : undefined;
    const wall = wallMs ?? (wallSeconds === undefined ? this.defaultWall : wallSeconds * 1000);
    const rank = this.number(row, "rank", where, false) ?? -1;
    const kindText = row.kind ?? "scalar";
    const kind = KINDS.find((k) => k === kindText);
    if (kind === undefined)
      throw new ImportError(this.file, where, `kind ${JSON.stringify(kindText)} is not one of ${KINDS.join(", ")}`);
    this.put(kind, key, rank, step, wall, value);
    this.rows++;
  }

  private put(kind: TableKind, key: string, rank: number, step: number, wall: number, value: number): void {
    if (kind === "scalar") this.run.scalar(key, rank, step, wall, value);
    else if (kind === "stream") this.run.stream(key, rank, step, wall, value);
    else this.run.systemPoint(key, rank, step, wall, value);
  }
}

/** A CSV header's columns, each checked against `TABLE_COLUMNS`. */
function headerColumns(file: string, fields: readonly string[]): Column[] {
  const columns = fields.map((f, i) => {
    const name = f.trim().toLowerCase();
    const column = TABLE_COLUMNS.find((c) => c === name);
    if (column === undefined)
      throw new ImportError(
        file,
        "record 1 (the header)",
        `column ${i + 1} ${JSON.stringify(f)} is not one of ${TABLE_COLUMNS.join(", ")}`,
      );
    return column;
  });
  for (const required of ["key", "step", "value"] as const)
    if (!columns.includes(required))
      throw new ImportError(file, "record 1 (the header)", `has no ${required} column (needed: key, step, value)`);
  return columns;
}

/** One CSV record parsed from `text` at `at`, or null when the text ends inside it. */
interface CsvRecord {
  readonly fields: string[];
  readonly next: number;
  /** Line breaks the record spans (its own and those inside quoted fields). */
  readonly lines: number;
}

/** A quoted field from `at` (the opening quote): its text and where it ends, or null when `text` ends first. */
function quotedField(text: string, at: number, final: boolean): { value: string; end: number; lines: number } | null {
  let value = "";
  let from = at + 1;
  for (;;) {
    const quote = text.indexOf('"', from);
    if (quote < 0) {
      if (final) throw new RangeError("a quoted field is never closed (the file ends inside it)");
      return null;
    }
    if (quote + 1 === text.length && !final) return null; // the next piece may start with a second quote
    if (text.charCodeAt(quote + 1) === 34) {
      value += text.slice(from, quote + 1);
      from = quote + 2;
      continue;
    }
    value += text.slice(from, quote);
    return { value, end: quote + 1, lines: value.split("\n").length - 1 };
  }
}

/** Parse one CSV record (RFC 4180; CRLF or LF) of `text` from `at`; null when it needs more text (or, at the end, is unterminated). */
function csvRecord(text: string, at: number, final: boolean): CsvRecord | null {
  const fields: string[] = [];
  let i = at;
  let lines = 0;
  for (;;) {
    let field: string;
    if (text.charCodeAt(i) === 34) {
      const quoted = quotedField(text, i, final);
      if (quoted === null) return null;
      field = quoted.value;
      lines += quoted.lines;
      i = quoted.end;
    } else {
      let end = i;
      while (end < text.length) {
        const c = text.charCodeAt(end);
        if (c === 44 || c === 10) break;
        end++;
      }
      if (end === text.length && !final) return null;
      field = text.slice(i, end).replace(/\r$/, "");
      i = end;
    }
    fields.push(field);
    const c = text.charCodeAt(i);
    if (c === 44) {
      i++;
      continue;
    }
    if (c === 13 && text.charCodeAt(i + 1) === 10) i++;
    else if (c === 13 && i + 1 === text.length && !final) return null;
    if (i < text.length && text.charCodeAt(i) !== 10 && text.charCodeAt(i) !== 13)
      throw new RangeError(`a quoted field is followed by ${JSON.stringify(text[i])} instead of a comma or a line end`);
    return { fields, next: Math.min(i + 1, text.length), lines: lines + 1 };
  }
}

/** Import a CSV file's rows into `run`; the rows imported. */
export function importCsv(file: string, run: ImportRun): number {
  const sink = new RowSink(file, run, statSync(file).mtimeMs);
  let columns: Column[] | null = null;
  let record = 0;
  let line = 1;
  readText(file, (text, final) => {
    let at = 0;
    while (at < text.length) {
      if (text.charCodeAt(at) === 10 || (text.charCodeAt(at) === 13 && text.charCodeAt(at + 1) === 10)) {
        at += text.charCodeAt(at) === 13 ? 2 : 1; // a blank line
        line++;
        continue;
      }
      const where = `record ${record + 1} (line ${line})`;
      let parsed: CsvRecord | null;
      try {
        parsed = csvRecord(text, at, final);
      } catch (error) {
        throw new ImportError(file, where, error instanceof Error ? error.message : String(error));
      }
      if (parsed === null) return at;
      record++;
      line += parsed.lines;
      at = parsed.next;
      if (columns === null) {
        columns = headerColumns(file, parsed.fields);
        continue;
      }
      if (parsed.fields.length !== columns.length)
        throw new ImportError(
          file,
          where,
          `has ${parsed.fields.length} fields where the header has ${columns.length} (${columns.join(",")})${final && at >= text.length ? "; the file may be truncated" : ""}`,
        );
      const row: Row = {};
      for (const [i, column] of columns.entries()) row[column] = parsed.fields[i];
      sink.add(row, where);
    }
    return at;
  });
  if (columns === null) throw new ImportError(file, "record 1", "the file is empty (a CSV needs a header row)");
  return sink.rows;
}

/** Import a JSON Lines file's objects into `run`; the rows imported. */
export function importJsonl(file: string, run: ImportRun): number {
  const sink = new RowSink(file, run, statSync(file).mtimeMs);
  let line = 0;
  readText(file, (text, final) => {
    let at = 0;
    while (at < text.length) {
      let end = text.indexOf("\n", at);
      if (end < 0) {
        if (!final) return at;
        end = text.length;
      }
      line++;
      const body = text.slice(at, end).trim();
      at = end + 1;
      if (body === "") continue;
      const where = `line ${line}`;
      let parsed: unknown;
      try {
        parsed = JSON.parse(body);
      } catch (error) {
        const truncated = final && at >= text.length ? " (the file may be truncated)" : "";
        throw new ImportError(file, where, `is not JSON${truncated}: ${error instanceof Error ? error.message : ""}`);
      }
      if (!isRecord(parsed)) throw new ImportError(file, where, "is not a JSON object");
      const row: Row = {};
      for (const [name, value] of Object.entries(parsed)) {
        const column = TABLE_COLUMNS.find((c) => c === name);
        if (column === undefined)
          throw new ImportError(file, where, `field ${JSON.stringify(name)} is not one of ${TABLE_COLUMNS.join(", ")}`);
        row[column] = value;
      }
      sink.add(row, where);
    }
    return at;
  });
  return sink.rows;
}
