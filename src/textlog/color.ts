/**
 * Whether text logs are coloured: the rule pino-pretty, chalk and Node's own `tty` share, in one
 * place (no pino here, so the launcher can ask without loading it).
 *
 * In order: `color` given in code; else `FORCE_COLOR` (`1`/`2`/`3`/`true`/`yes`/`on` colour,
 * `0`/`false`/`no`/`off` do not, as chalk and Node read it); else `NO_COLOR` (any non-empty value:
 * no colour, https://no-color.org); else colour only when the console is a terminal (`isTTY`), so
 * a job piped into a file or a CI log gets no escape codes. With both variables set, `FORCE_COLOR`
 * wins, as in Node's `tty.WriteStream.getColorDepth()`.
 */
import { peekProcessWide } from "../core/process-wide.js";
import { presenceKind, resolveSetting, type SettingKind } from "../core/settings.js";

const ON = new Set(["1", "2", "3", "true", "yes", "on"]);
const OFF = new Set(["0", "false", "no", "off"]);

/** `FORCE_COLOR`: a colour level (1–3) or a boolean word; 0 or a false word turns colour off. */
const forceColorKind: SettingKind<boolean | undefined> = {
  valid: "true or false (the variable: 1, 2, 3, true, yes, on; or 0, false, no, off)",
  fromOption: (v) => (typeof v === "boolean" ? v : undefined),
  fromEnv: (raw) => {
    const v = raw.toLowerCase();
    return ON.has(v) ? true : OFF.has(v) ? false : undefined;
  },
};

/** What decides the colour of console lines, besides the environment. */
interface ColorChoice {
  /** Colour on the console. */
  readonly console: boolean;
  /** Set when code or the environment said so (`color`, `FORCE_COLOR`, `NO_COLOR`); undefined when the terminal decided. */
  readonly explicit: boolean | undefined;
}

/**
 * The colour of console lines written to `sink` (see the module comment). Throws a TypeError for
 * a `color` that is not a boolean or a `FORCE_COLOR` that is not one of the values above.
 */
export function resolveColor(option: boolean | undefined, sink: { readonly isTTY?: boolean } | false): ColorChoice {
  const owner = "configureTextLogs";
  const forced = resolveSetting<boolean | undefined>(
    { owner, option: "color", env: "FORCE_COLOR", kind: forceColorKind, fallback: undefined },
    option,
  );
  const noColor = resolveSetting<boolean | undefined>(
    { owner, option: "color", env: "NO_COLOR", kind: presenceKind(false), fallback: undefined },
    option,
  );
  const explicit = option ?? forced ?? noColor;
  return { console: explicit ?? (sink !== false && sink.isTTY === true), explicit };
}

/**
 * The environment a spawned rank gets so that its text logs are coloured as this process's are:
 * its output is forwarded to this process's stdout, which a terminal test in the rank (a pipe
 * there) cannot see. `FORCE_COLOR=1` when this process colours its console; `FORCE_COLOR=0` when
 * colour is off by choice (which also keeps the rank's lines in merged.log plain, like this
 * process's); nothing when only the missing terminal turned it off (the rank's stdout is no
 * terminal either, and its files keep their colours like this process's). Variables the caller
 * passes to the rank win.
 */
export function childColorEnv(): Record<string, string> {
  const configured = peekProcessWide<{ options: { color: boolean; fileColor: boolean } }>("textLogs");
  if (configured !== undefined) {
    const { color, fileColor } = configured.options;
    return color ? { FORCE_COLOR: "1" } : fileColor ? {} : { FORCE_COLOR: "0" };
  }
  const choice = resolveColor(undefined, process.stdout);
  return choice.console ? { FORCE_COLOR: "1" } : choice.explicit === false ? { FORCE_COLOR: "0" } : {};
}
