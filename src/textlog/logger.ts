/**
 * Text logs for people: `getLogger(component)` returns a pino logger whose records become
 * readable, coloured lines on the console and, once the run is known, in the run directory:
 * `logs/main.log` (the controller's own lines) and `logs/merged.log` (every process's lines,
 * each prefixed by its rank name). Files are appended line by line as records are logged, with
 * O_APPEND, so `tail -f` follows them and several processes can append to the same merged.log.
 *
 * Lines logged before the run is known are kept (up to a bound) and written when it is. A file
 * that cannot be written is reported once and counted; logging never throws into the caller.
 */
import { join } from "node:path";
import { createRequire } from "node:module";
import type { Level, Logger } from "pino";
import { AppendFile } from "../io/append-file.js";
import { isRecord } from "../core/json.js";
import { redactRecord } from "../core/redact.js";
import { enumKind, resolveSetting } from "../core/settings.js";
import { resolveColor } from "./color.js";
import { currentRun, onRunChange, type CurrentRun } from "../run/current.js";
import {
  colorLine,
  COLOR_NAMES,
  DEFAULT_COMPONENT_COLORS,
  formatRecord,
  type ColorName,
  type ComponentColor,
} from "./format.js";
import { processWide } from "../core/process-wide.js";

/** A component's logger: pino's API (`info(msg)`, `info({ step }, msg)`, `warn`, `error(err)`, `child`). */
export type TextLogger = Logger;

/** Where console lines go. */
export interface LineSink {
  write(text: string): unknown;
  /** True for a terminal: console lines are coloured by default only then (`process.stdout.isTTY`). */
  readonly isTTY?: boolean;
}

/** Options of `configureTextLogs`. */
export interface TextLogOptions {
  /** Lowest level logged (default `RANKSCOPE_LOG_LEVEL` or `info`). */
  level?: Level;
  /**
   * Colour console lines. Default: `FORCE_COLOR` if set (`0`/`false` off, `1`–`3`/`true` on), else
   * off when `NO_COLOR` is set and not empty, else on only when the console is a terminal.
   */
  color?: boolean;
  /** Colour per component kind, first match wins; replaces the defaults (AReaL's kinds). */
  componentColors?: readonly { pattern: RegExp | string; color: ColorName }[];
  /**
   * Where console lines go; `false` for none. Default: as Node's `console`, warnings, errors and
   * fatal lines to `process.stderr`, the others to `process.stdout` (a rank's reach the
   * controller's stderr and stdout alike).
   */
  console?: LineSink | false;
  /** Write `logs/main.log` and `logs/merged.log` in the run directory once it is known (default true). */
  files?: boolean;
  /** Milliseconds since the epoch for a line's time (default `Date.now`; tests pin it). */
  clock?: () => number;
  /** Colour the lines in the log files, as AReaL does (default: on, unless `color`, `FORCE_COLOR` or `NO_COLOR` says no colour). */
  fileColor?: boolean;
}

/**
 * A field of a record (rankscope's own, never printed) saying where its console line goes:
 * `stderr` (an alert firing: a line people must see even when stdout is piped away) or `none`
 * (the log files only). A console set with `configureTextLogs({ console })` gets the `stderr`
 * lines as it gets every other (it is where the user wants console lines); `console: false`, none.
 */
export const CONSOLE_ROUTE = "rankscope.console";

/** Where a record's console line goes, when not the console's (`CONSOLE_ROUTE`). */
export type ConsoleRoute = "stderr" | "none";

/** The console's two sinks (the same one when `console` names a sink), each with its colour. */
interface ConsoleSinks {
  readonly out: LineSink;
  readonly err: LineSink;
  readonly outColor: boolean;
  readonly errColor: boolean;
}

/** Lines from this pino level up (warn) go to the console's `err` sink. */
const ERR_LEVEL = 40;

interface Resolved {
  level: Level;
  /** Colour on the console's stdout sink (what a spawned rank copies: its stdout is forwarded there). */
  color: boolean;
  fileColor: boolean;
  colors: readonly ComponentColor[];
  console: ConsoleSinks | false;
  files: boolean;
  clock: () => number;
}

/** Lines kept before the run directory is known. */
const MAX_EARLY_LINES = 1000;

const LEVELS: readonly Level[] = ["trace", "debug", "info", "warn", "error", "fatal"];

function resolve(options: TextLogOptions): Resolved {
  const level = resolveSetting<Level>(
    {
      owner: "configureTextLogs",
      option: "level",
      env: "RANKSCOPE_LOG_LEVEL",
      kind: enumKind(LEVELS),
      fallback: "info",
    },
    options.level,
  );
  const colors = (options.componentColors ?? DEFAULT_COMPONENT_COLORS).map((c) => {
    if (!COLOR_NAMES.includes(c.color))
      throw new TypeError(`component colour ${JSON.stringify(c.color)} is not valid; valid: ${COLOR_NAMES.join(", ")}`);
    return { pattern: typeof c.pattern === "string" ? new RegExp(c.pattern) : c.pattern, color: c.color };
  });
  const out = options.console ?? process.stdout;
  const err = options.console ?? process.stderr;
  // The console: `color`, FORCE_COLOR, NO_COLOR, else whether it is a terminal (color.ts), each
  // sink its own. Files keep AReaL's colours unless code or the environment said otherwise.
  const color = resolveColor(options.color, out);
  const errColor = color.explicit ?? (err !== false && err.isTTY === true);
  return {
    level,
    color: color.console,
    fileColor: options.fileColor ?? color.explicit ?? true,
    colors,
    console: out === false || err === false ? false : { out, err, outColor: color.console, errColor },
    files: options.files ?? true,
    clock: options.clock ?? Date.now,
  };
}

/** The process-wide state of text logging. */
class TextLogs {
  options: Resolved = resolve({});
  readonly root: Logger;
  readonly loggers = new Map<string, Logger>();
  main: AppendFile | null = null;
  merged: AppendFile | null = null;
  mergedPrefix = "";
  early: string[] = [];
  runDir: string | null = null;

  constructor() {
    // pino loads on the first getLogger, so `import "rankscope"` stays light for jobs without text logs.
    const pinoModule: typeof import("pino") = createRequire(import.meta.url)("pino");
    const { pino } = pinoModule;
    this.root = pino({ level: "trace", base: undefined, timestamp: false }, { write: (s: string) => this.write(s) });
    onRunChange((run) => this.attach(run));
  }

  attach(run: CurrentRun | undefined): void {
    if (run === undefined || !this.options.files || run.runDir === this.runDir) return;
    this.detach();
    this.runDir = run.runDir;
    const logs = join(run.runDir, "logs");
    this.main = run.role === "controller" ? new AppendFile(join(logs, "main.log")) : null;
    this.merged = new AppendFile(join(logs, "merged.log"));
    this.mergedPrefix = `[${run.identity.rankName}]`.padEnd(16);
    const early = this.early;
    this.early = [];
    for (const text of early) this.writeFiles(text);
  }

  detach(): void {
    this.main?.close();
    this.merged?.close();
    this.main = null;
    this.merged = null;
    this.runDir = null;
  }

  private write(json: string): void {
    let record: Record<string, unknown> = { level: 30, msg: json.trimEnd() };
    try {
      const parsed: unknown = JSON.parse(json);
      // The one redaction rule: a field that looks like a secret is never printed or written.
      if (isRecord(parsed)) record = redactRecord(parsed);
    } catch {
      // Not JSON: the line as it came.
    }
    const route = record[CONSOLE_ROUTE];
    delete record[CONSOLE_ROUTE];
    const o = this.options;
    const { line, level, component } = formatRecord(record, o.clock());
    if (o.console !== false && route !== "none") {
      const toErr = route === "stderr" || level >= ERR_LEVEL;
      const sink = toErr ? o.console.err : o.console.out;
      const colored = toErr ? o.console.errColor : o.console.outColor;
      try {
        sink.write(`${colored ? colorLine(line, level, component, o.colors) : line}\n`);
      } catch {
        // A closed stdout must not break the caller's loop.
      }
    }
    if (!o.files) return;
    const text = o.fileColor ? colorLine(line, level, component, o.colors) : line;
    if (this.merged === null) {
      if (this.early.length < MAX_EARLY_LINES) this.early.push(text);
      return;
    }
    this.writeFiles(text);
  }

  private writeFiles(text: string): void {
    this.main?.appendSync(`${text}\n`);
    if (this.merged !== null) {
      const prefixed = text
        .split("\n")
        .map((l) => `${this.mergedPrefix} ${l}`)
        .join("\n");
      this.merged.appendSync(`${prefixed}\n`);
    }
  }
}

function textLogs(): TextLogs {
  return processWide("textLogs", () => {
    const logs = new TextLogs();
    logs.attach(currentRun());
    return logs;
  });
}

/**
 * The logger of a component (`"Trainer"`, `"RolloutWorker"`, `"rankscope.store"`), created on
 * first use. Lines: `20261122-01:52:03.123 Trainer INFO: message key=value`.
 */
export function getLogger(component: string): TextLogger {
  if (typeof component !== "string" || component.length === 0)
    throw new TypeError(`getLogger(component) takes a non-empty name such as "Trainer", got ${String(component)}`);
  const logs = textLogs();
  let logger = logs.loggers.get(component);
  if (logger === undefined) {
    logger = logs.root.child({ component });
    logger.level = logs.options.level;
    logs.loggers.set(component, logger);
  }
  return logger;
}

/**
 * Configure text logs for this process (level, colours, component colour patterns, console
 * sink, files). Applies to loggers already created. Throws a TypeError for an unknown level or
 * colour. Calling it again replaces every option (unset ones go back to their defaults).
 */
export function configureTextLogs(options: TextLogOptions = {}): void {
  const logs = textLogs();
  logs.options = resolve(options);
  for (const logger of logs.loggers.values()) logger.level = logs.options.level;
  if (!logs.options.files) logs.detach();
  else logs.attach(currentRun());
}

/** Write text logs under `runDir/logs/` from now on, as `role` (`controller` writes main.log too), without a MetricLogger. */
export function setupFileLogging(runDir: string, rankName = "main", role: "controller" | "rank" = "controller"): void {
  const logs = textLogs();
  logs.attach({
    runDir,
    experiment: "",
    trial: "",
    role,
    identity: { rank: 0, rankName, processName: rankName, localRank: 0, localWorldSize: 1 },
  });
}

/** Close the log files (they reopen on the next run); for tests and a process starting a new run. */
export function closeTextLogFiles(): void {
  textLogs().detach();
}
