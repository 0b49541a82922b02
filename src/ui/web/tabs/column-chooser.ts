/**
 * The *Columns* picker: a box per summary key (in the rule's order), ticked for the columns shown.
 * Ticking or unticking makes the shown set the user's choice (remembered, see summary-columns.ts);
 * *default* goes back to the rule. The picker redraws its boxes on a `columns` event.
 */
import { clear, el } from "../dom.js";
import { visibleName } from "../names.js";
import { hooks, state } from "../state.js";
import { saveChosenColumns } from "../summary-columns.js";

/** The picker, redrawn on its `columns` event: `keysNow` are the summary keys in order, `shown` those shown; `redraw` redraws the table after a choice. */
export function columnChooser(keysNow: () => string[], shown: () => string[], redraw: () => void): HTMLElement {
  const title = el("summary", {});
  const list = el("div", { className: "column-list" });
  const reset = el("button", { type: "button", className: "reset-columns" }, "default");
  const chooser = el(
    "details",
    { id: "summary-columns", className: "column-chooser" },
    title,
    el("div", { className: "column-panel" }, list, reset),
  );
  const choose = (columns: string[] | null): void => {
    state.summaryColumns = columns;
    saveChosenColumns(columns);
    hooks.writeUrl();
    redraw();
  };
  reset.addEventListener("click", () => choose(null));
  chooser.addEventListener("columns", () => {
    const keys = keysNow();
    const current = new Set(shown());
    title.textContent = `Columns (${current.size} of ${keys.length}${state.summaryColumns === null ? ", default" : ""})`;
    clear(list);
    for (const key of keys) {
      const box = el("input", { type: "checkbox", value: key });
      box.checked = current.has(key);
      box.addEventListener("change", () =>
        choose(box.checked ? [...current, key] : [...current].filter((k) => k !== key)),
      );
      list.appendChild(el("label", {}, box, ` ${visibleName(key)}`));
    }
  });
  return chooser;
}
