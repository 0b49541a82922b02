/** Where the built web app is: `dist/ui/web` (beside this file when running from dist, under the repo from src). */
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The built app's folder, which the dashboard serves and a report inlines. */
export function defaultWebDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  return import.meta.url.endsWith(".ts") ? resolve(here, "../../dist/ui/web") : join(here, "web");
}
