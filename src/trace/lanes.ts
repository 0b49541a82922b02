/**
 * The perf tracer's rows ("lanes", written as `tid`): which row each span goes on so that every
 * row nests cleanly (Perfetto rejects overlapping complete events on one row).
 *
 * A child shares its parent's row while it nests properly; a scope that would overlap a sibling
 * (two concurrent async scopes) gets a row of its own; a span that ends while spans opened inside
 * it on its row are still open (children not awaited) moves to a row where it overlaps nothing.
 */

/** A span while it is open: its row, start, and what it will be written with. */
export class OpenSpan {
  constructor(
    readonly name: string,
    readonly cat: string,
    readonly args: Record<string, unknown> | undefined,
    readonly start: number,
    readonly lane: number,
  ) {}
}

/** A row: its open spans, innermost last, and when the last span written on it ended. */
interface Lane {
  readonly open: OpenSpan[];
  lastEnd: number;
}

export class Lanes {
  private readonly lanes: Lane[] = [{ open: [], lastEnd: 0 }];

  /** The row for a span opened inside `parent` (undefined: at the top). */
  laneFor(parent: OpenSpan | undefined): number {
    if (parent !== undefined && this.innermost(parent.lane) === parent) return parent.lane;
    let index = 0;
    for (const lane of this.lanes) {
      if (lane.open.length === 0) return index;
      index++;
    }
    return this.add();
  }

  /** Note `span` (made with a row from `laneFor`) as open on its row. */
  open(span: OpenSpan): void {
    this.lane(span.lane).open.push(span);
  }

  /** Close `span` at `end`; the row it is written on (another than its own if it outlived children). */
  close(span: OpenSpan, end: number): number {
    let index = span.lane;
    const stack = this.lane(index).open;
    if (stack[stack.length - 1] === span) stack.pop();
    else {
      const at = stack.lastIndexOf(span);
      if (at >= 0) stack.splice(at, 1);
      index = this.detachedLane(span.start);
    }
    const lane = this.lane(index);
    if (end > lane.lastEnd) lane.lastEnd = end;
    return index;
  }

  private innermost(index: number): OpenSpan | undefined {
    const stack = this.lane(index).open;
    return stack[stack.length - 1];
  }

  /**
   * A row for a span that ends while spans opened inside it on its row are still open: there it
   * would end before them. Any row with nothing open and nothing written after the span's start
   * takes it without overlapping anything, now or later.
   */
  private detachedLane(start: number): number {
    let index = 0;
    for (const lane of this.lanes) {
      if (lane.open.length === 0 && lane.lastEnd <= start) return index;
      index++;
    }
    return this.add();
  }

  private add(): number {
    this.lanes.push({ open: [], lastEnd: 0 });
    return this.lanes.length - 1;
  }

  private lane(index: number): Lane {
    const lane = this.lanes[index];
    if (lane === undefined) throw new RangeError(`perf tracer: no row ${index} (rows are made by laneFor)`);
    return lane;
  }
}
