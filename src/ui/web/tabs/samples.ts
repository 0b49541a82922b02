/**
 * The samples tab: the records of each `Reduce.SAMPLE` key, one step at a time (a slider over the
 * steps that have records, newest first shown), as W&B shows a table logged at each step. Rows
 * are grouped by who logged them (the global line first, then each rank, each group labelled),
 * a page of rows at a time; within each group the best and worst record by a score field are
 * marked. Columns are the records' own fields, so a record with its own `step` or `rank` field
 * shows it once, as the record has it. Numbers are shown with 6 significant digits at most (the
 * full value in the cell's title).
 */
import { isRecord } from "../../../core/json.js";
import { api, type SampleRow } from "../api.js";
import { formatValue } from "../chart-axes.js";
import { append, clear, displayText, el } from "../dom.js";
import { searchMatcher, visibleName } from "../names.js";
import { state } from "../state.js";
import { rankLabel, viewBox } from "./common.js";

/** Rows on one page of a table. */
const SAMPLE_PAGE_ROWS = 25;

/** Field names whose larger values are better, then those whose smaller ones are. */
const HIGHER_IS_BETTER = /reward|score|return|acc|success|pass|win/i;
const LOWER_IS_BETTER = /loss|err|perplexity|ppl|regret|cost|latency/i;

/** How records are ranked within a group: by a numeric field, larger or smaller first. */
interface ScoreRule {
  readonly field: string;
  readonly higherIsBetter: boolean;
}

/** A record as a row of fields (a record that is not an object is one field, `value`). */
function fieldsOf(record: unknown): Record<string, unknown> {
  return isRecord(record) ? record : { value: record };
}

/**
 * The field to mark best and worst by: the first numeric field named like a reward (larger is
 * better), else the first named like a loss or error (smaller is better); null when none is.
 */
export function defaultScoreRule(numericFields: readonly string[]): ScoreRule | null {
  const higher = numericFields.find((f) => HIGHER_IS_BETTER.test(f));
  if (higher !== undefined) return { field: higher, higherIsBetter: true };
  const lower = numericFields.find((f) => LOWER_IS_BETTER.test(f));
  return lower === undefined ? null : { field: lower, higherIsBetter: false };
}

/** Fields whose values are numbers in every record that has them (and in at least one). */
function numericFieldsOf(records: readonly unknown[], fields: readonly string[]): string[] {
  return fields.filter((f) => {
    const values = records.map((r) => fieldsOf(r)[f]).filter((v) => v !== undefined && v !== null);
    return values.length > 0 && values.every((v) => typeof v === "number");
  });
}

/** The indexes of the best and worst record by `rule` (NaN and missing values never win). */
export function bestAndWorst(
  records: readonly unknown[],
  rule: ScoreRule | null,
): { best: number; worst: number } | null {
  if (rule === null) return null;
  let best = -1;
  let worst = -1;
  let top = -Infinity;
  let bottom = Infinity;
  records.forEach((record, i) => {
    const v = fieldsOf(record)[rule.field];
    if (typeof v !== "number" || Number.isNaN(v)) return;
    const score = rule.higherIsBetter ? v : -v;
    if (best === -1 || score > top) [best, top] = [i, score];
    if (worst === -1 || score < bottom) [worst, bottom] = [i, score];
  });
  return best === -1 ? null : { best, worst };
}

/** A cell's text: integers as they are, other numbers to 6 significant digits, the rest as text. */
export function cellText(value: unknown): string {
  if (typeof value === "number")
    return Number.isInteger(value) && Math.abs(value) < 1e15 ? String(value) : formatValue(value);
  return displayText(value);
}

/** One group of a step's records: the global line's (rank null) or one rank's. */
interface Group {
  readonly rank: number | null;
  readonly records: unknown[];
}

/** One key's records by step, then by group (global first, then ranks in order). */
function stepsOf(rows: readonly SampleRow[]): Map<number, Group[]> {
  const steps = new Map<number, Map<number | null, unknown[]>>();
  for (const row of rows) {
    const groups = steps.get(row.step) ?? new Map<number | null, unknown[]>();
    steps.set(row.step, groups);
    groups.set(row.rank, [...(groups.get(row.rank) ?? []), row.record]);
  }
  const out = new Map<number, Group[]>();
  for (const step of [...steps.keys()].sort((a, b) => a - b)) {
    // The global line first, then every other line in the store's order (its number).
    const groups = [...(steps.get(step) ?? new Map<number | null, unknown[]>())].sort(([a], [b]) =>
      a === null ? -1 : b === null ? 1 : a - b,
    );
    out.set(
      step,
      groups.map(([rank, records]) => ({ rank, records })),
    );
  }
  return out;
}

/** One key's table: the step slider, the score picker, the rows of a page, the pager. */
class SampleTable {
  readonly root: HTMLElement;
  private readonly steps: number[];
  private stepIndex: number;
  private page = 0;
  private rule: ScoreRule | null;
  private readonly fields: string[];
  private readonly slider: HTMLInputElement;
  private readonly stepLabel: HTMLElement;
  private readonly table: HTMLTableElement;
  private readonly pager: HTMLElement;

  constructor(
    private readonly key: string,
    private readonly byStep: Map<number, Group[]>,
    private readonly groupName: (rank: number | null) => string,
  ) {
    this.steps = [...byStep.keys()];
    this.stepIndex = this.steps.length - 1;
    const all = [...byStep.values()].flatMap((groups) => groups.flatMap((g) => g.records));
    this.fields = [...new Set(all.flatMap((r) => Object.keys(fieldsOf(r))))];
    const numeric = numericFieldsOf(all, this.fields);
    this.rule = defaultScoreRule(numeric);
    this.slider = el("input", {
      type: "range",
      className: "sample-step",
      "data-key": key,
      min: 0,
      max: this.steps.length - 1,
      step: 1,
      value: this.stepIndex,
      "aria-label": `step of ${visibleName(key)}`,
    });
    this.slider.addEventListener("input", () => {
      this.stepIndex = Number(this.slider.value);
      this.page = 0;
      this.render();
    });
    this.stepLabel = el("span", { className: "sample-step-label" });
    const scorePicker = el(
      "select",
      { className: "sample-score", "aria-label": `best and worst of ${visibleName(key)} by` },
      el("option", { value: "" }, "no best/worst"),
    );
    for (const f of numeric) {
      scorePicker.appendChild(el("option", { value: `+${f}` }, `best: highest ${visibleName(f)}`));
      scorePicker.appendChild(el("option", { value: `-${f}` }, `best: lowest ${visibleName(f)}`));
    }
    scorePicker.value = this.rule === null ? "" : `${this.rule.higherIsBetter ? "+" : "-"}${this.rule.field}`;
    scorePicker.addEventListener("change", () => {
      const v = scorePicker.value;
      this.rule = v === "" ? null : { field: v.slice(1), higherIsBetter: v.startsWith("+") };
      this.render();
    });
    this.table = el("table", { className: "samples", "data-key": key });
    this.pager = el("div", { className: "samples-pager", "data-key": key });
    this.root = el(
      "div",
      { className: "samples-block" },
      el("h3", {}, visibleName(key)),
      el("div", { className: "samples-tools" }, el("label", {}, "step ", this.slider), this.stepLabel, scorePicker),
      el("div", { className: "table-wrap" }, this.table),
      this.pager,
    );
    this.render();
  }

  private render(): void {
    const step = this.steps[this.stepIndex] ?? 0;
    const groups = this.byStep.get(step) ?? [];
    this.stepLabel.textContent = `step ${step} (${this.stepIndex + 1} of ${this.steps.length} steps with records)`;
    this.table.dataset["step"] = String(step);
    const rows = groups.flatMap((g) => g.records.map((record, i) => ({ group: g, record, i })));
    const pages = Math.max(1, Math.ceil(rows.length / SAMPLE_PAGE_ROWS));
    this.page = Math.min(this.page, pages - 1);
    const from = this.page * SAMPLE_PAGE_ROWS;
    const shown = rows.slice(from, from + SAMPLE_PAGE_ROWS);
    const marks = new Map(groups.map((g) => [g, bestAndWorst(g.records, this.rule)]));
    clear(this.table);
    this.table.appendChild(
      el("thead", {}, el("tr", {}, el("th", {}, "#"), ...this.fields.map((f) => el("th", {}, visibleName(f))))),
    );
    const body = el("tbody");
    let lastGroup: Group | null = null;
    for (const { group, record, i } of shown) {
      if (group !== lastGroup) body.appendChild(this.groupHead(group, marks.get(group) ?? null));
      lastGroup = group;
      const mark = marks.get(group);
      const kind = mark?.best === i ? "best" : mark?.worst === i ? "worst" : "";
      const values = fieldsOf(record);
      const cells = this.fields.map((f) => {
        const v = values[f];
        return typeof v === "number"
          ? el("td", { className: "num", "data-field": f, title: String(v) }, cellText(v))
          : el("td", { "data-field": f }, cellText(v));
      });
      const index = el(
        "td",
        { className: "idx" },
        String(i),
        kind === "" ? null : el("span", { className: `mark ${kind}` }, kind === "best" ? " ▲ best" : " ▼ worst"),
      );
      body.appendChild(
        el(
          "tr",
          { className: kind === "" ? "sample" : `sample ${kind}`, "data-group": group.rank ?? -1 },
          index,
          ...cells,
        ),
      );
    }
    this.table.appendChild(body);
    this.renderPager(from, shown.length, rows.length, pages);
  }

  /** A group's label row: who logged it, how many records, its best and worst. */
  private groupHead(group: Group, mark: { best: number; worst: number } | null): HTMLElement {
    const score = (i: number): string => cellText(fieldsOf(group.records[i])[this.rule?.field ?? ""]);
    const extremes =
      mark === null || this.rule === null
        ? ""
        : ` · best ${visibleName(this.rule.field)} ${score(mark.best)} (#${mark.best}) · worst ${score(mark.worst)} (#${mark.worst})`;
    return el(
      "tr",
      { className: "group-head" },
      el(
        "td",
        { colspan: this.fields.length + 1 },
        `${this.groupName(group.rank)} · ${group.records.length} records${extremes}`,
      ),
    );
  }

  private renderPager(from: number, count: number, total: number, pages: number): void {
    clear(this.pager);
    const prev = el("button", { type: "button", className: "prev", disabled: this.page === 0 }, "‹ previous");
    const next = el("button", { type: "button", className: "next", disabled: this.page >= pages - 1 }, "next ›");
    prev.addEventListener("click", () => {
      this.page--;
      this.render();
    });
    next.addEventListener("click", () => {
      this.page++;
      this.render();
    });
    append(
      this.pager,
      prev,
      el("span", { className: "muted" }, ` rows ${total === 0 ? 0 : from + 1}–${from + count} of ${total} `),
      next,
    );
  }
}

export async function renderSamples(generation: number): Promise<void> {
  const view = viewBox();
  const matcher = searchMatcher(state.search);
  for (const run of state.selected) {
    const [rows, keys] = await Promise.all([api.samples(run), api.keys(run)]);
    if (generation !== state.generation) return;
    const section = el("section", { className: "run-section" }, el("h2", {}, visibleName(run)));
    view.appendChild(section);
    const shown = rows.filter((r) => matcher.test(r.key));
    if (shown.length === 0) {
      section.appendChild(el("p", { className: "muted" }, "No samples (Reduce.SAMPLE keys) in this run."));
      continue;
    }
    const byKey = new Map<string, SampleRow[]>();
    for (const row of shown) byKey.set(row.key, [...(byKey.get(row.key) ?? []), row]);
    const groupName = (rank: number | null): string => (rank === null ? "all ranks" : rankLabel(keys, rank));
    for (const [key, list] of byKey) section.appendChild(new SampleTable(key, stepsOf(list), groupName).root);
  }
}
