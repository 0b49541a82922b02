/**
 * Process-wide state shared by every copy of rankscope loaded in this JavaScript realm.
 *
 * A bundler, or a dependency pinning another version, can load the package twice; the collector,
 * the registries and the stream must still be one each. They live on `globalThis` under
 * `Symbol.for("rankscope.{name}")`, created by the first copy that asks.
 */
export function processWide<T>(name: string, create: () => T): T {
  const key = Symbol.for(`rankscope.${name}`);
  const holder = globalThis as unknown as Record<symbol, T | undefined>;
  let value = holder[key];
  if (value === undefined) {
    value = create();
    holder[key] = value;
  }
  return value;
}
