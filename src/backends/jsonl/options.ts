/** The `jsonl` backend's options, declared once (type, names and checks; `option-schema.ts`). */
import { z } from "zod";
import { describeValue } from "../../core/settings.js";
import { says, type OptionsOf } from "../option-schema.js";

const fileMessage = (got: string): string =>
  `file must be a non-empty path (relative to the run directory, or absolute), e.g. "metrics.jsonl", got ${got}`;

export const JSONL_OPTIONS = {
  /** The file, relative to the run directory (default `metrics.jsonl` on the controller, `metrics-{rankName}.jsonl` per rank). */
  file: z
    .string(says(fileMessage))
    .refine(
      (file) => file.trim().length > 0 && !file.includes("\0"),
      (file) => ({ message: fileMessage(describeValue(file)) }),
    )
    .optional(),
};

/** Options of the `jsonl` backend. */
export type JsonlBackendOptions = OptionsOf<typeof JSONL_OPTIONS>;
