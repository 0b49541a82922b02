/**
 * The logs tab: a run's text logs (`logs/merged.log`: every process, each line with its rank
 * name; `logs/main.log`: the controller's), as W&B's Logs tab shows a run's output. It opens at
 * the file's end and reads it a window at a time through `/api/log` (never the whole file):
 * *older lines* reads the window before the oldest shown, *follow* asks once a second for what
 * was appended. A level filter (that level and worse) and a component filter are applied by the
 * server, so a sparse match in a large file costs one bounded read per page. At most
 * `MAX_SHOWN_LINES` lines stay on the page; following drops the oldest.
 */
import { api, type LogLine, type LogWindow } from "../api.js";
import { append, clear, el } from "../dom.js";
import { visibleName } from "../names.js";
import { hooks, state } from "../state.js";
import { viewBox } from "./common.js";

/** Lines kept on the page at most. */
const MAX_SHOWN_LINES = 5000;
const FOLLOW_MS = 1000;

/** Level filter choices: the lowest level shown. */
const LEVELS: [string, string][] = [
  ["", "all levels"],
  ["debug", "debug and worse"],
  ["info", "info and worse"],
  ["warning", "warnings and errors"],
  ["error", "errors"],
];

let followTimer: ReturnType<typeof setInterval> | undefined;

/** Stop asking for new lines (the view changed). */
export function stopFollowing(): void {
  clearInterval(followTimer);
  followTimer = undefined;
}

function lineNode(line: LogLine): HTMLElement {
  const level = line.level ?? "none";
  const node = el("div", {
    className: `log-line level-${level}${line.continued ? " cont" : ""}`,
    "data-offset": line.offset,
    "data-component": line.component ?? "",
    "data-rank": line.rank ?? "",
  });
  if (line.rank !== null) append(node, el("span", { className: "log-rank" }, visibleName(line.rank)), " ");
  if (!line.continued)
    append(
      node,
      el("span", { className: "log-time" }, line.time ?? ""),
      " ",
      el("span", { className: "log-component" }, visibleName(line.component ?? "")),
      " ",
      el("span", { className: "log-level" }, (line.level ?? "").toUpperCase()),
      " ",
    );
  append(node, el("span", { className: "log-message" }, visibleName(line.message)));
  return node;
}

/** One run's log view: its controls, the lines shown and the byte range they came from. */
class LogView {
  private start = 0;
  private end = 0;
  private size = 0;
  private readonly components = new Set<string>();
  private readonly box = el("div", { id: "log-lines", className: "log-lines", role: "log", "aria-live": "off" });
  private readonly status = el("span", { id: "log-status", className: "muted" });
  private readonly older = el("button", { type: "button", id: "log-older" }, "older lines");
  private readonly componentPicker = el("select", { id: "log-component", "aria-label": "component" });

  constructor(
    private readonly run: string,
    private readonly file: string,
    private readonly generation: number,
  ) {}

  private live(): boolean {
    return this.generation === state.generation;
  }

  private query(): { level: string; component: string } {
    return { level: state.logs.level, component: state.logs.component };
  }

  /** The controls and the box, then the file's tail. */
  async mount(view: HTMLElement, files: string[], runPicker: HTMLElement | null): Promise<void> {
    const filePicker = el("select", { id: "log-file", "aria-label": "log file" });
    for (const name of files) filePicker.appendChild(el("option", { value: name }, visibleName(name)));
    filePicker.value = this.file;
    filePicker.addEventListener("change", () => this.changed({ file: filePicker.value, component: "" }));
    const levelPicker = el("select", { id: "log-level", "aria-label": "lowest level" });
    for (const [value, label] of LEVELS) levelPicker.appendChild(el("option", { value }, label));
    levelPicker.value = state.logs.level;
    levelPicker.addEventListener("change", () => this.changed({ level: levelPicker.value }));
    if (state.logs.component !== "") this.components.add(state.logs.component);
    this.fillComponents();
    this.componentPicker.addEventListener("change", () => this.changed({ component: this.componentPicker.value }));
    const follow = el("input", { type: "checkbox", id: "log-follow" });
    follow.checked = state.logs.follow;
    follow.addEventListener("change", () => {
      state.logs.follow = follow.checked;
      hooks.writeUrl();
      this.setFollowing();
    });
    this.older.addEventListener("click", () => void this.loadOlder().catch(hooks.showError));
    append(
      view,
      el(
        "div",
        { className: "log-tools" },
        runPicker,
        filePicker,
        levelPicker,
        this.componentPicker,
        el("label", {}, follow, " follow"),
        this.older,
        this.status,
      ),
      this.box,
    );
    const tail = await api.log(this.run, this.file, this.query());
    if (!this.live()) return;
    this.show(tail, "replace");
    this.box.scrollTop = this.box.scrollHeight;
    this.setFollowing();
  }

  private changed(change: Partial<typeof state.logs>): void {
    state.logs = { ...state.logs, ...change };
    hooks.writeUrl();
    void hooks.renderView();
  }

  private fillComponents(): void {
    const current = state.logs.component;
    clear(this.componentPicker);
    this.componentPicker.appendChild(el("option", { value: "" }, "all components"));
    for (const c of [...this.components].sort())
      this.componentPicker.appendChild(el("option", { value: c }, visibleName(c)));
    this.componentPicker.value = current;
  }

  /** Put a window's lines on the page: instead of what is there, before it, or after it. */
  private show(window: LogWindow, where: "replace" | "before" | "after"): void {
    const nodes = window.lines.map(lineNode);
    const offsetOf = (node: Element | null, otherwise: number): number =>
      node instanceof HTMLElement ? Number(node.dataset["offset"] ?? otherwise) : otherwise;
    if (where === "replace") {
      clear(this.box);
      [this.start, this.end] = [window.start, window.end];
    }
    if (where === "before") {
      this.start = window.start;
      this.box.prepend(...nodes);
      // Too many: the newest go, and following goes on from the first of them.
      while (this.box.childElementCount > MAX_SHOWN_LINES) {
        this.end = offsetOf(this.box.lastElementChild, this.end);
        this.box.lastElementChild?.remove();
      }
    } else {
      if (where === "after") this.end = window.end;
      this.box.append(...nodes);
      // Too many: the oldest go, and "older lines" goes on from the first kept.
      while (this.box.childElementCount > MAX_SHOWN_LINES) {
        this.box.firstElementChild?.remove();
        this.start = offsetOf(this.box.firstElementChild, this.start);
      }
    }
    this.size = window.size;
    const added = window.components.filter((c) => !this.components.has(c));
    for (const c of added) this.components.add(c);
    if (added.length > 0) this.fillComponents();
    this.older.disabled = this.start <= 0;
    const kb = (n: number): string => `${(n / 1024).toFixed(n < 10_240 ? 1 : 0)} KB`;
    const count = this.box.childElementCount;
    this.status.textContent = `${count} lines · bytes ${kb(this.start)}–${kb(this.end)} of ${kb(this.size)}${count === 0 && this.start > 0 ? " · none match here; older lines may" : ""}`;
    this.box.dataset["start"] = String(this.start);
    this.box.dataset["end"] = String(this.end);
  }

  private async loadOlder(): Promise<void> {
    if (this.start <= 0) return;
    const window = await api.log(this.run, this.file, { ...this.query(), before: this.start });
    if (!this.live()) return;
    const height = this.box.scrollHeight;
    this.show(window, "before");
    // Keep the lines the user was reading where they were.
    this.box.scrollTop += this.box.scrollHeight - height;
  }

  private setFollowing(): void {
    stopFollowing();
    if (!state.logs.follow) return;
    let busy = false;
    followTimer = setInterval(() => {
      if (!this.live()) return stopFollowing();
      if (busy || document.hidden) return;
      busy = true;
      this.loadNewer()
        .catch(hooks.showError)
        .finally(() => {
          busy = false;
        });
    }, FOLLOW_MS);
  }

  private async loadNewer(): Promise<void> {
    const window = await api.log(this.run, this.file, { ...this.query(), after: this.end });
    if (!this.live()) return;
    const atBottom = this.box.scrollHeight - this.box.scrollTop - this.box.clientHeight < 24;
    this.show(window, window.reset ? "replace" : "after");
    if (atBottom) this.box.scrollTop = this.box.scrollHeight;
  }
}

export async function renderLogs(generation: number): Promise<void> {
  const view = viewBox();
  const run = state.selected[0];
  if (run === undefined) return;
  const files = (await api.logs(run)).map((f) => f.name);
  if (generation !== state.generation) return;
  if (files.length === 0) {
    view.appendChild(
      el(
        "p",
        { className: "muted empty" },
        "No text logs in this run: logs/merged.log and logs/main.log are written by getLogger(…) once the run is known (see docs/logging.md).",
      ),
    );
    return;
  }
  const file = files.includes(state.logs.file) ? state.logs.file : (files[0] ?? "");
  const note =
    state.selected.length > 1
      ? el("span", { className: "muted" }, `${visibleName(run)} (the first run selected)`)
      : null;
  await new LogView(run, file, generation).mount(view, files, note);
}
