/**
 * A runs query's answer, a page at a time: the rows a virtual table shows are loaded when they
 * come into view (`ensure`), and asked for again on the periodic refresh (`refresh`) — with the
 * ETag of the last answer, so an unchanged page costs the server a 304 and the browser nothing.
 * Pages far from the view are forgotten, so memory stays flat however far one scrolls.
 */
import { api, type RunInfo, type RunsPage, type RunsQuery } from "./api.js";

/** Rows per request. */
const PAGE_ROWS = 100;
/** Pages kept around the view; the others are dropped. */
const KEEP_PAGES = 6;

export class RunPages {
  /** Runs matching the query; null until the first page came. */
  total: number | null = null;
  /** While a large local root is first read: how far it has come. */
  indexing: RunsPage["indexing"];
  private readonly pages = new Map<number, RunInfo[]>();
  private readonly loading = new Map<number, Promise<void>>();
  private generation = 0;

  constructor(
    private query: RunsQuery,
    /** Rows arrived or changed (render them); `rows` are those of the answer. */
    private readonly changed: (rows: RunInfo[]) => void,
  ) {}

  /** Replace the query (a new filter or sort): everything loaded is dropped. */
  setQuery(query: RunsQuery): void {
    this.query = query;
    this.pages.clear();
    this.loading.clear();
    this.total = null;
    this.generation++;
  }

  /** Row `i`, when its page is loaded. */
  row(i: number): RunInfo | undefined {
    return this.pages.get(Math.floor(i / PAGE_ROWS))?.[i % PAGE_ROWS];
  }

  /** Every row loaded, in order. */
  loaded(): RunInfo[] {
    return [...this.pages.entries()].sort(([a], [b]) => a - b).flatMap(([, rows]) => rows);
  }

  /** Load the pages holding rows [from, to) that are not loaded yet. */
  async ensure(from: number, to: number): Promise<void> {
    const wanted: Promise<void>[] = [];
    for (let page = Math.floor(from / PAGE_ROWS); page <= Math.floor(Math.max(from, to - 1) / PAGE_ROWS); page++) {
      if (this.pages.has(page)) continue;
      wanted.push(this.loading.get(page) ?? this.load(page).then(() => undefined));
    }
    await Promise.all(wanted);
  }

  /**
   * Ask again for the pages around rows [from, to) (the first page when nothing is loaded), drop
   * the others; true when anything changed.
   */
  async refresh(from: number, to: number): Promise<boolean> {
    const around = new Set<number>();
    for (
      let page = Math.floor(from / PAGE_ROWS) - 1;
      page <= Math.floor(Math.max(from, to - 1) / PAGE_ROWS) + 1;
      page++
    )
      if (page >= 0) around.add(page);
    for (const page of this.pages.keys())
      if (!around.has(page) && this.pages.size > KEEP_PAGES) this.pages.delete(page);
    const pages = this.pages.size === 0 ? [0] : [...this.pages.keys()].filter((p) => around.has(p));
    const before = this.generation;
    const results = await Promise.all(pages.map((page) => this.load(page)));
    return before === this.generation && results.some((changed) => changed);
  }

  /** Fetch one page; true when its rows or the total differ from what was there. */
  private load(page: number): Promise<boolean> {
    const generation = this.generation;
    const request = api
      .runs({ ...this.query, offset: page * PAGE_ROWS, limit: PAGE_ROWS })
      .then((answer) => {
        if (generation !== this.generation) return false;
        const same =
          this.pages.get(page) === answer.runs && this.total === answer.total && this.indexing === answer.indexing;
        this.pages.set(page, answer.runs);
        this.total = answer.total;
        this.indexing = answer.indexing;
        if (!same) this.changed(answer.runs);
        return !same;
      })
      .finally(() => {
        if (this.loading.get(page) === settled) this.loading.delete(page);
      });
    const settled = request.then(
      () => undefined,
      () => undefined,
    );
    this.loading.set(page, settled);
    return request;
  }
}
