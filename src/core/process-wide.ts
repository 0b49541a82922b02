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

type Holder = Record<symbol, unknown>;

function keyOf(name: string): symbol {
  return Symbol.for(`rankscope.${VERSION}.${name}`);
}

/** The process-wide value `name`, created by `create` on first use. */
export function processWide<T>(name: string, create: () => T): T {
  const key = keyOf(name);
  const holder = globalThis as unknown as Holder;
  let value = holder[key] as T | undefined;
  if (value === undefined) {
    value = create();
    holder[key] = value;
  }
  return value;
}

/** The process-wide value `name` if one is set, else undefined (nothing is created). */
export function peekProcessWide<T>(name: string): T | undefined {
  return (globalThis as unknown as Holder)[keyOf(name)] as T | undefined;
}

/** Set (or, with undefined, clear) the process-wide value `name`. */
export function setProcessWide<T>(name: string, value: T | undefined): void {
  (globalThis as unknown as Holder)[keyOf(name)] = value;
}
