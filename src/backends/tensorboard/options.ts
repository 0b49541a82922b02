/** The `tensorboard` backend's options, declared once (type, names and checks; `option-schema.ts`). */
import { z } from "zod";
import { internalOption, says, type OptionsOf } from "../option-schema.js";

export const TENSORBOARD_OPTIONS = {
  /** The event-file directory, relative to the run directory (default `tensorboard`). */
  dir: z
    .string(says((got) => `dir must be a non-empty path (relative to the run directory, or absolute), got ${got}`))
    .min(1)
    .optional(),
  /** Also write rankscope's own keys (`…__count`, `rankscope/…`); default false. */
  internal: internalOption("writes"),
};

/** Options of the `tensorboard` backend. */
export type TensorboardBackendOptions = OptionsOf<typeof TENSORBOARD_OPTIONS>;
