/**
 * Debian's Chromium driven by playwright-core, headless, with a fresh profile per launch.
 * Tests and the dashboard benchmark share it.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type ConsoleMessage } from "playwright-core";

/** Where Debian installs Chromium (scripts/install-system-deps.sh installs it when missing). */
export const CHROMIUM_PATH = process.env["RANKSCOPE_CHROMIUM"] ?? "/usr/bin/chromium";

/** A launched browser and a context; `close` also removes the profile. */
export interface LaunchedBrowser {
  browser: Browser;
  context: BrowserContext;
  close(): Promise<void>;
}

/**
 * How long a test waits for the page to draw, click or scroll: a deadline for a hang, not a speed
 * bound (on a machine loaded 10 times over, a chart that draws in 200 ms took over 10 s). Every
 * page of a launched browser has it as its default.
 */
export const PAGE_WAIT_MS = 90_000;

/** Launch Chromium headless with a fresh user-data-dir. */
export async function launchChromium(): Promise<LaunchedBrowser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium is not installed at ${CHROMIUM_PATH}; install Debian's package (apt-get install chromium) or set RANKSCOPE_CHROMIUM`,
    );
  }
  const profile = mkdtempSync(join(tmpdir(), "rankscope-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM_PATH,
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-dev-shm-usage",
    ],
  });
  context.setDefaultTimeout(PAGE_WAIT_MS);
  const browser = context.browser();
  return {
    browser: browser as Browser,
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Is this console message an error of the page's own? Not Chromium's `net::ERR_NETWORK_CHANGED`:
 * another test's network namespaces (veth pairs made and removed, test/transport/host/) change
 * the machine's network under every Chromium running beside them, which then cancels its loads
 * in flight; the page's next poll loads again.
 */
export function isPageError(message: ConsoleMessage): boolean {
  return message.type() === "error" && !message.text().includes("net::ERR_NETWORK_CHANGED");
}
