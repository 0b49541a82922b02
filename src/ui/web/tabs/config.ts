/** The config tab: hyperparameters, config.yaml and version.json of each selected run. */
import { api } from "../api.js";
import { displayText, el } from "../dom.js";
import { visibleName } from "../names.js";
import { state } from "../state.js";
import { viewBox } from "./common.js";

/** Nested values as `a.b.c` rows. */
function flatten(value: unknown, prefix: string, out: [string, string][]): void {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, prefix === "" ? k : `${prefix}.${k}`, out);
  } else {
    out.push([prefix, displayText(value)]);
  }
}

export async function renderConfig(generation: number): Promise<void> {
  const view = viewBox();
  const versionInfo = await api.version();
  if (generation !== state.generation) return;
  view.appendChild(
    el("p", { className: "muted" }, `Served by rankscope ${versionInfo.rankscope} on Node ${versionInfo.node}.`),
  );
  for (const run of state.selected) {
    const config = await api.config(run);
    if (generation !== state.generation) return;
    const section = el("section", { className: "run-section" }, el("h2", {}, visibleName(run)));
    const rows: [string, string][] = [];
    flatten(config.params, "", rows);
    section.appendChild(el("h3", {}, "Hyperparameters"));
    if (rows.length === 0) section.appendChild(el("p", { className: "muted" }, "None logged."));
    else
      section.appendChild(
        el(
          "table",
          { className: "params" },
          el("tbody", {}, ...rows.map(([k, v]) => el("tr", {}, el("th", {}, visibleName(k)), el("td", {}, v)))),
        ),
      );
    section.appendChild(el("h3", {}, "config.yaml"));
    section.appendChild(
      config.configYaml === null
        ? el("p", { className: "muted" }, "No config.yaml in this run.")
        : el("pre", {}, config.configYaml),
    );
    section.appendChild(el("h3", {}, "Version (version.json)"));
    section.appendChild(
      config.version === null
        ? el("p", { className: "muted" }, "No version.json in this run.")
        : el("pre", {}, JSON.stringify(config.version, null, 2)),
    );
    view.appendChild(section);
  }
}
