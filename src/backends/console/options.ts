/** The `console` backend's options, declared once (type, names and checks; `option-schema.ts`). */
import { z } from "zod";
import { says, type OptionsOf } from "../option-schema.js";

export const CONSOLE_OPTIONS = {
  /** `"list"` (default, one key per line) or `"grid"` (AReaL's box-drawn table). */
  layout: z
    .enum(
      ["list", "grid"],
      says((got) => `layout ${got} is not valid; valid: "list" (one key per line), "grid" (AReaL's table)`),
    )
    .optional(),
  /** Key/value pairs per row of the grid (default 4). */
  pairsPerRow: z
    .number(says((got) => `pairsPerRow must be a positive integer (key/value pairs per grid row), got ${got}`))
    .int()
    .min(1)
    .optional(),
};

/** Options of the `console` backend. */
export type ConsoleBackendOptions = OptionsOf<typeof CONSOLE_OPTIONS>;
