/**
 * Retake docs/dashboard.png: open the dashboard over a runs root in Chromium and screenshot a view.
 *
 *   node dist/cli/main.js demo --steps 80          # in an empty folder: writes ./runs
 *   npx tsx scripts/dashboard-screenshot.ts RUNS_ROOT docs/dashboard.png "tab=metrics&run=…&pin=train%2Floss"
 *
 * The third argument is the view's URL fragment (anything the address bar can hold).
 */
import { startDashboard } from "../src/ui/server.js";
import { launchChromium } from "../test/ui/browser.js";

const [root, out, hash = "tab=metrics"] = process.argv.slice(2);
if (root === undefined || out === undefined)
  throw new Error("usage: tsx scripts/dashboard-screenshot.ts RUNS_ROOT OUT.png [URL_FRAGMENT]");
const dashboard = await startDashboard({ root, port: 0 });
const browser = await launchChromium();
try {
  const page = await browser.context.newPage();
  await page.goto(`${dashboard.url}#${hash}`);
  // The metrics tab marks when its charts are drawn; other tabs: wait for their content.
  await page.waitForSelector(/tab=(?!metrics)/.test(hash) ? "#view > *" : "body[data-charts-rendered]", {
    timeout: 30_000,
  });
  // Let the first polls and the runs refresh settle before the picture.
  await page.waitForTimeout(1500);
  await page.screenshot({ path: out });
} finally {
  await browser.close();
  await dashboard.close();
}
