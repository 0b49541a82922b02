/**
 * The "Export report" button: downloads `api/report` for the current view (the URL fragment: runs,
 * tab, search, smoothing, x-axis, …), the same file `rankscope report` writes (docs/report.md).
 * Hidden inside a report, which has no server to ask.
 */
import { apiUrl } from "./api-http.js";

/** The address of the current view's report. */
export function reportUrl(hash = location.hash): string {
  return apiUrl("report", { view: hash.replace(/^#/, "") });
}

export function setupExport(button: HTMLButtonElement, inReport: boolean): void {
  if (inReport) {
    button.remove();
    return;
  }
  button.addEventListener("click", () => {
    const link = document.createElement("a");
    link.href = reportUrl();
    link.download = "rankscope-report.html";
    document.body.appendChild(link);
    link.click();
    link.remove();
  });
}
