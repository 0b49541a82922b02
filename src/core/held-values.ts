/**
 * Values recorded now and appended to their accumulators later (the request API's client chunk
 * times, appended at a request's end: docs/inference.md). Whoever holds some registers with its
 * collector's `held`, and the collector has them appended before its states are taken, so they
 * belong to the flush they were recorded in.
 */

/** What holds values: `appendHeld` appends them. */
export interface ValueHolder {
  appendHeld(): void;
}

/** A collector's holders since its states were last taken. */
export class HeldValues {
  private holders: ValueHolder[] = [];

  /** `holder` holds values: its `appendHeld` runs once, before the states are next taken (it registers again after that). */
  hold(holder: ValueHolder): void {
    this.holders.push(holder);
  }

  /** Run the holders' `appendHeld`: before a take (`Collector.takeStates`, the rank runtime's frame writer). */
  appendHeld(): void {
    if (this.holders.length === 0) return;
    const holders = this.holders;
    this.holders = [];
    for (const holder of holders) holder.appendHeld();
  }

  /** Forget the holders (the collector's `clear`: what they hold was bound to its old entries). */
  clear(): void {
    this.holders = [];
  }
}
