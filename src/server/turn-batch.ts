/**
 * One query for what the calls of one turn of the event loop ask: the dashboard asks for many runs
 * at once (`/api/keys?runs=[…]` reads up to `DashboardSource.concurrentRuns` runs together), and
 * each run's lookup alone is a round trip to PostgreSQL. A `TurnBatch` collects the keys asked in
 * a turn and loads them with one call at the next `setImmediate`, so 50 runs' keys are a few
 * queries, not 150.
 */

/** Loads many keys at once: a value per key found; a key absent from the map has none. */
export type BatchLoad<K, V> = (keys: readonly K[]) => Promise<ReadonlyMap<K, V>>;

interface Waiter<V> {
  resolve(value: V | undefined): void;
  reject(error: unknown): void;
}

export class TurnBatch<K, V> {
  private pending = new Map<K, Waiter<V>[]>();

  constructor(private readonly load: BatchLoad<K, V>) {}

  /** The value of `key`, or undefined when the load found none; a failed load rejects every caller of its turn. */
  get(key: K): Promise<V | undefined> {
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) setImmediate(() => void this.flush());
      const waiters = this.pending.get(key);
      if (waiters === undefined) this.pending.set(key, [{ resolve, reject }]);
      else waiters.push({ resolve, reject });
    });
  }

  private async flush(): Promise<void> {
    const batch = this.pending;
    this.pending = new Map();
    try {
      const found = await this.load([...batch.keys()]);
      for (const [key, waiters] of batch) for (const w of waiters) w.resolve(found.get(key));
    } catch (error) {
      for (const waiters of batch.values()) for (const w of waiters) w.reject(error);
    }
  }
}
