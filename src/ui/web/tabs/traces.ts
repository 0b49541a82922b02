/** The traces tab: each selected run's trace files, to download and open in Perfetto. */
import { api } from "../api.js";
import { el, formatBytes, formatTime } from "../dom.js";
import { visibleName } from "../names.js";
import { state } from "../state.js";
import { viewBox } from "./common.js";

export async function renderTraces(generation: number): Promise<void> {
  const view = viewBox();
  view.appendChild(
    el(
      "div",
      { className: "note" },
      el("strong", {}, "Opening a trace in Perfetto: "),
      "download a file below, go to ",
      el("a", { href: "https://ui.perfetto.dev", target: "_blank", rel: "noopener noreferrer" }, "ui.perfetto.dev"),
      ", choose “Open trace file” and pick it. The trace stays on your machine: Perfetto reads it in the browser. ",
      "Each per-rank file (rank-N.jsonl) opens on its own; for all ranks on one timeline run ",
      el("code", {}, "rankscope traces merge RUN_DIR"),
      ", which writes traces/trace.json to this list.",
    ),
  );
  for (const run of state.selected) {
    const files = await api.traces(run);
    if (generation !== state.generation) return;
    const section = el("section", { className: "run-section" }, el("h2", {}, visibleName(run)));
    if (files.length === 0)
      section.appendChild(el("p", { className: "muted" }, "No trace files (traces/) in this run."));
    else {
      const body = el("tbody");
      for (const file of files) {
        body.appendChild(
          el(
            "tr",
            {},
            el(
              "td",
              {},
              el(
                "a",
                { href: api.traceUrl(run, file.name), download: file.name, className: "trace-link" },
                visibleName(file.name),
              ),
            ),
            el("td", {}, formatBytes(file.size)),
            el("td", {}, formatTime(file.modified)),
          ),
        );
      }
      section.appendChild(
        el(
          "table",
          { className: "traces" },
          el("thead", {}, el("tr", {}, el("th", {}, "file"), el("th", {}, "size"), el("th", {}, "modified"))),
          body,
        ),
      );
    }
    view.appendChild(section);
  }
}
