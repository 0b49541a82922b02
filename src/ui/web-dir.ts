/** Where the built web app is: `dist/ui/web` under the package's root. */
import { fileURLToPath } from "node:url";
import { packageRoot } from "../core/module-worker.js";

/** The built app's folder, which the dashboard serves and a report inlines: the same from source, from dist and from dist's bundle. */
export function defaultWebDir(): string {
  return fileURLToPath(new URL("dist/ui/web", packageRoot()));
}
