/**
 * Each option set declared once, as a zod shape (docs/DESIGN.md, "Options: one declaration").
 *
 * One entry per option, each with its doc comment; from the shape come the TypeScript type users
 * write (`OptionsOf<typeof shape>`: computed from the shape's declared type, so the doc comments
 * reach the published `.d.ts` and the editor's hover), the known names (`Object.keys`) and the
 * runtime check (`checkOptions`, at `initBackends`, never on the flush path).
 */
import { z } from "zod";
import { describeValue, type Setting } from "../core/settings.js";

/** The options of one set: name → zod schema (optional ones `.optional()`), each with its doc comment. */
export type OptionShape = z.ZodRawShape;

/** The type a shape declares: what a user writes (doc comments kept). */
export type OptionsOf<S extends OptionShape> = z.input<z.ZodObject<S>>;

/**
 * Schema parameters whose every failure (wrong type, failed check) reads `message(got, name)`: `got`
 * the value as messages show it, `name` the option's (the first part of the path). One sentence per option saying what is valid.
 */
export function says(message: (got: string, name: string) => string): { errorMap: z.ZodErrorMap } {
  return {
    errorMap: (issue, ctx) => ({ message: message(describeValue(ctx.data), String(issue.path[0] ?? "value")) }),
  };
}

/** An integer option from `min`: "`name` must be an integer ≥ `min`, got …". */
export function integerOption(min: number): z.ZodOptional<z.ZodNumber> {
  return z
    .number(says((got, name) => `${name} must be an integer ≥ ${min}, got ${got}`))
    .int()
    .min(min)
    .optional();
}

/** True for an http: or https: URL. */
export function isHttpUrl(value: string): boolean {
  try {
    return ["http:", "https:"].includes(new URL(value).protocol);
  } catch {
    return false;
  }
}

/** An object of names to string values (headers, attributes): "`name` must be an object of `what` to string values". */
export function stringMapOption(what: string): z.ZodOptional<z.ZodRecord<z.ZodString, z.ZodString>> {
  const params = says((_got, name) => `${name} must be an object of ${what} to string values`);
  return z.record(z.string(params), z.string(params), params).optional();
}

/**
 * An option that is also a setting (option → environment → default, `resolveSetting`): checked
 * here by the setting's own kind, with its message (a secret's value never shown), so the option
 * and its variable accept the same values.
 */
export function settingOption<T>(setting: Setting<T>): z.ZodOptional<z.ZodType<NonNullable<T>>> {
  const { option, kind } = setting;
  return z
    .custom<NonNullable<T>>(
      (value) => kind.fromOption(value) !== undefined,
      (value: unknown) => ({
        message: `${option} must be ${kind.valid}, got ${setting.secret === true ? "another value (not shown: it is a secret)" : describeValue(value)}`,
      }),
    )
    .optional();
}

/** A message for one issue that names its option (a schema without `says` gets zod's sentence after the name). */
function issueText(issue: z.ZodIssue): string {
  const name = issue.path.join(".");
  if (issue.code === "unrecognized_keys")
    return `unknown option${issue.keys.length === 1 ? "" : "s"} ${issue.keys.map((k) => `"${k}"`).join(", ")}`;
  return name === "" || issue.message.startsWith(name) ? issue.message : `${name}: ${issue.message}`;
}

/**
 * Check `options` against `schema` (other keys are left to the caller: a backend's config also holds
 * the common options). Returns the parsed values; a TypeError `${owner}: …` listing every problem.
 */
export function checkOptions<S extends OptionShape>(
  owner: string,
  schema: z.ZodObject<S>,
  options: Readonly<Record<string, unknown>>,
): z.output<z.ZodObject<S>> {
  const parsed = schema.safeParse(options);
  if (!parsed.success) throw new TypeError(`${owner}: ${parsed.error.issues.map(issueText).join("; ")}`);
  return parsed.data;
}

/** The `internal` option of the exporting backends: also send rankscope's own keys (default false). */
export function internalOption(verb: "exports" | "writes" | "charts"): z.ZodOptional<z.ZodBoolean> {
  return z
    .boolean(
      says(
        (got) =>
          `internal must be true or false (true also ${verb} rankscope's own keys, …__count and rankscope/…; default false), got ${got}`,
      ),
    )
    .optional();
}
