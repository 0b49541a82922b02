/**
 * Process-wide state shared by every copy of rankscope loaded in this JavaScript realm.
 *
 * A bundler, or a dependency pinning another version, can load the package twice; the collector,
 * the registries and the stream must still be one each. They live on `globalThis` under
 * `Symbol.for("rankscope.v1.{name}")`, created by the first copy that asks. The `v1` is the major
 * version of the state's shape: a future copy whose state is incompatible bumps it, so two such
 * copies keep separate state instead of misreading each other's (OpenTelemetry's rule).
 */
const VERSION = "v1";

/** `globalThis`, seen as what it is used for here: values under symbol keys. */
const holder: Record<symbol, unknown> = globalThis;

function keyOf(name: string): symbol {
  return Symbol.for(`rankscope.${VERSION}.${name}`);
}

/**
 * The value in slot `name`. The one place its type is taken on trust: a slot holds what the first
 * `processWide(name, create)` put there, possibly from another copy of the package (so a class
 * check could not tell), and every caller of one name asks for the same type.
 */
function read<T>(name: string): T | undefined {
  return holder[keyOf(name)] as T | undefined;
}

/** The process-wide value `name`, created by `create` on first use. */
export function processWide<T>(name: string, create: () => T): T {
  let value = read<T>(name);
  if (value === undefined) {
    value = create();
    holder[keyOf(name)] = value;
  }
  return value;
}

/** The process-wide value `name` if one is set, else undefined (nothing is created). */
export function peekProcessWide<T>(name: string): T | undefined {
  return read<T>(name);
}

/** Set (or, with undefined, clear) the process-wide value `name`. */
export function setProcessWide<T>(name: string, value: T | undefined): void {
  holder[keyOf(name)] = value;
}
