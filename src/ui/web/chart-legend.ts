/**
 * A chart card's legend: an entry per line (its swatch, label and the value under the cursor),
 * click to hide or show a line, shift-click to show only it. A legend with more rows than it
 * shows (a dozen ranks) offers the rest behind an *all N lines* button, so every entry can be
 * reached and read in full without every card growing by default.
 *
 * The values under the cursor never move the page: while they are shown (the cursor is on any
 * chart, the cursors being synced) the legend keeps the height it had without them, so a longer
 * entry that wraps is clipped (the tooltip lists every line) instead of every card growing and
 * the cards below it, their buttons with them, jumping as the mouse goes from a chart to a button.
 */
import type { Line } from "./chart-data.js";
import { clear, el } from "./dom.js";

export class ChartLegend {
  readonly box: HTMLElement;
  readonly more: HTMLButtonElement;
  private expanded = false;
  private values: HTMLElement[] = [];
  private items: HTMLElement[] = [];
  private count = 0;
  private fitPending = false;

  /** `onPick(id, only)`: a click on an entry (`only`: shift/alt/meta/ctrl held). */
  constructor(private readonly onPick: (id: string, only: boolean) => void) {
    this.box = el("div", { className: "legend" });
    this.more = el("button", { type: "button", className: "legend-more hidden", "aria-expanded": "false" });
    this.more.addEventListener("click", () => {
      this.holdHeight(false);
      this.expanded = !this.expanded;
      this.fit();
    });
  }

  /** An entry per line, in the lines' order. */
  render(lines: readonly Line[], colourOf: (i: number) => string, hidden: ReadonlySet<string>): void {
    this.holdHeight(false);
    clear(this.box);
    this.values = [];
    this.items = [];
    this.count = lines.length;
    lines.forEach((line, i) => {
      const value = el("span", { className: "legend-value" });
      const swatch = el("span", { className: "swatch" });
      swatch.style.background = colourOf(i);
      const off = hidden.has(line.id);
      const item = el(
        "button",
        {
          type: "button",
          className: off ? "legend-item off" : "legend-item",
          "data-line": line.id,
          "aria-pressed": off ? "false" : "true",
          title: "click: hide or show · shift-click: show only this (again: all)",
        },
        swatch,
        el("span", { className: "legend-label" }, line.label),
        value,
      );
      item.addEventListener("click", (event) =>
        this.onPick(line.id, event.shiftKey || event.altKey || event.metaKey || event.ctrlKey),
      );
      this.values.push(value);
      this.items.push(item);
      this.box.appendChild(item);
    });
    this.scheduleFit();
  }

  /** Mark the i-th entry shown or hidden. */
  setShown(i: number, show: boolean): void {
    const item = this.items[i];
    item?.classList.toggle("off", !show);
    item?.setAttribute("aria-pressed", show ? "true" : "false");
  }

  /**
   * Keep the legend's height while values under the cursor are shown (`on`), its own again when
   * they are cleared: values never change the card's height.
   */
  holdHeight(on: boolean): void {
    const held = this.box.style.height !== "";
    // An expanded legend (the user asked for every entry) grows instead.
    if (on && !held && !this.expanded) this.box.style.height = `${this.box.clientHeight}px`;
    else if (!on && held) this.box.style.height = "";
  }

  /** The i-th line's value under the cursor ("" for none). */
  setValue(i: number, text: string): void {
    const target = this.values[i];
    if (target !== undefined) target.textContent = text;
  }

  /**
   * Fit on the next frame: measuring the legend forces a layout, and a grid of cards drawn
   * together then measures once, not once per card.
   */
  scheduleFit(): void {
    if (this.fitPending) return;
    this.fitPending = true;
    requestAnimationFrame(() => {
      this.fitPending = false;
      this.fit();
    });
  }

  /** Show the *all N lines* button when entries are out of sight (or the legend is expanded). */
  fit(): void {
    this.box.classList.toggle("expanded", this.expanded);
    const overflows = this.box.scrollHeight > this.box.clientHeight + 1;
    this.more.classList.toggle("hidden", !overflows && !this.expanded);
    this.more.textContent = this.expanded ? "fewer ▴" : `all ${this.count} lines ▾`;
    this.more.setAttribute("aria-expanded", this.expanded ? "true" : "false");
  }
}
