/**
 * A table body that holds only the rows on screen: rows of one fixed height, the ones in view
 * (and `OVERSCAN` more each side) rendered between two spacer rows that stand for the rest, so
 * ten thousand runs scroll like ten. The scroller is the element that scrolls (the sidebar, the
 * runs table's box); the body can sit anywhere inside it.
 */
import { clear, el } from "./dom.js";

/** Rows rendered beyond each edge of the view. */
const OVERSCAN = 8;

/** How a virtual body gets its rows. */
interface VirtualRowsOptions {
  readonly scroller: HTMLElement;
  readonly body: HTMLTableSectionElement;
  /** Every row's height in CSS pixels, as the CSS holds rows to it; corrected to the height measured once rows are drawn. */
  readonly rowHeight: number;
  /** Columns a spacer row spans. */
  readonly columns: () => number;
  /** The element of row `i` (called only for rows in view). */
  readonly row: (i: number) => HTMLTableRowElement;
  /** The rows in view changed to [from, to): load them if need be. */
  readonly range: (from: number, to: number) => void;
}

export class VirtualRows {
  private count = 0;
  private first = -1;
  private last = -1;
  private frame = 0;
  /** The rows' height: the option's until a drawn row was measured. */
  private rowHeight: number;
  private readonly onScroll = (): void => {
    if (this.frame !== 0) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render(false);
    });
  };

  constructor(private readonly options: VirtualRowsOptions) {
    this.rowHeight = options.rowHeight;
    options.scroller.addEventListener("scroll", this.onScroll, { passive: true });
    window.addEventListener("resize", this.onScroll);
  }

  /** Stop following the scroller (the view was replaced). */
  detach(): void {
    this.options.scroller.removeEventListener("scroll", this.onScroll);
    window.removeEventListener("resize", this.onScroll);
    if (this.frame !== 0) cancelAnimationFrame(this.frame);
  }

  /** The table body it fills. */
  body(): HTMLTableSectionElement {
    return this.options.body;
  }

  /** The number of rows; renders again. */
  setCount(count: number): void {
    this.count = count;
    this.render(true);
  }

  /** The rows rendered now: [from, to). */
  rendered(): [number, number] {
    return [Math.max(0, this.first), Math.max(0, this.last)];
  }

  /** The rows in view (without the overscan), from the scroller's position. */
  private inView(): [number, number] {
    const { scroller, body } = this.options;
    const rowHeight = this.rowHeight;
    const top = body.getBoundingClientRect().top - scroller.getBoundingClientRect().top + scroller.scrollTop;
    const head = Math.max(0, scroller.scrollTop - top);
    const from = Math.floor(head / rowHeight);
    const height = scroller.clientHeight > 0 ? scroller.clientHeight : window.innerHeight;
    return [from, Math.min(this.count, from + Math.ceil(height / rowHeight) + 1)];
  }

  /** Render the rows in view when they changed (or always, with `force`): spacer, rows, spacer. */
  render(force: boolean): void {
    const [viewFrom, viewTo] = this.inView();
    const first = Math.max(0, viewFrom - OVERSCAN);
    const last = Math.min(this.count, viewTo + OVERSCAN);
    if (!force && first === this.first && last === this.last) return;
    this.first = first;
    this.last = last;
    const { body } = this.options;
    const rowHeight = this.rowHeight;
    const focused =
      document.activeElement instanceof HTMLElement && body.contains(document.activeElement)
        ? document.activeElement.closest("tr")?.getAttribute("data-index")
        : null;
    clear(body);
    body.appendChild(this.spacer(first * rowHeight, "top"));
    for (let i = first; i < last; i++) {
      const row = this.options.row(i);
      row.dataset["index"] = String(i);
      body.appendChild(row);
    }
    body.appendChild(this.spacer((this.count - last) * rowHeight, "bottom"));
    body.parentElement?.setAttribute("data-rendered-rows", String(last - first));
    body.parentElement?.setAttribute("data-row-height", String(rowHeight));
    // A font or theme can make rows taller than the CSS meant: follow the height drawn, or the
    // spacers and the scroll position would drift apart over thousands of rows.
    const drawn = body.querySelector("tr[data-run]")?.getBoundingClientRect().height ?? 0;
    if (drawn > 0 && Math.abs(drawn - rowHeight) > 0.5) {
      this.rowHeight = drawn;
      this.render(true);
      return;
    }
    if (focused !== null && focused !== undefined) {
      const again = body.querySelector(`tr[data-index="${focused}"]`);
      if (again instanceof HTMLElement) again.focus({ preventScroll: true });
    }
    this.options.range(viewFrom, viewTo);
  }

  /** Scroll so that row `i` is in view, render, and return its element. */
  reveal(i: number): HTMLTableRowElement | null {
    const { scroller, body } = this.options;
    const rowHeight = this.rowHeight;
    const top =
      body.getBoundingClientRect().top - scroller.getBoundingClientRect().top + scroller.scrollTop + i * rowHeight;
    const head = body.parentElement?.querySelector("thead")?.getBoundingClientRect().height ?? 0;
    if (top < scroller.scrollTop + head) scroller.scrollTop = top - head;
    else if (top + rowHeight > scroller.scrollTop + scroller.clientHeight)
      scroller.scrollTop = top + rowHeight - scroller.clientHeight;
    this.render(false);
    const row = body.querySelector(`tr[data-index="${i}"]`);
    return row instanceof HTMLTableRowElement ? row : null;
  }

  private spacer(height: number, where: string): HTMLTableRowElement {
    const cell = el("td", { colspan: this.options.columns() });
    cell.style.height = `${height}px`;
    cell.style.padding = "0";
    cell.style.border = "0";
    return el("tr", { className: `spacer spacer-${where}`, "aria-hidden": "true" }, cell);
  }
}
