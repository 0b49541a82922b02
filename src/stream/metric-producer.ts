/**
 * The collector's stream hook (`StreamProducer`): interns metric keys to ring ids, once per key
 * and stream, and pushes raw values into this thread's ring. No allocation for a known key.
 */
import type { MetricEntry, StreamProducer } from "../core/collector.js";
import type { RingProducer } from "./ring.js";

/** What the producer needs of the thread's stream. */
interface RingOwner {
  /** The ring's writing end while the stream runs, else null (values are then not recorded). */
  readonly producer: RingProducer | null;
  /** A ring id for a key name; the writer learns the name before it sees the id. */
  internKey(name: string): number;
  /** A value arrived while no stream runs: counted if the process's end stopped it. */
  droppedAfterEnd(): void;
}

/** Interns metric keys to ring ids (once per key) and pushes raw values. */
export class MetricStreamProducer implements StreamProducer {
  /** Ids interned for an earlier stream (or collector) are stale: entries carry the generation. */
  private generation = 1;

  constructor(private readonly owner: RingOwner) {}

  record(entry: MetricEntry, value: number, step: number): void {
    const producer = this.owner.producer;
    if (producer === null) {
      this.owner.droppedAfterEnd();
      return;
    }
    if (entry.streamGeneration !== this.generation) this.intern(entry);
    producer.pushValue(entry.streamId, value, step);
  }

  /** Push a value recorded earlier, at its own time (a worker's values waiting for its ring). */
  recordAt(entry: MetricEntry, value: number, step: number, timestamp: number): void {
    const producer = this.owner.producer;
    if (producer === null) return;
    if (entry.streamGeneration !== this.generation) this.intern(entry);
    producer.pushValue(entry.streamId, value, step, timestamp);
  }

  /** Count `n` values lost before they reached the ring (as the ring's own drops). */
  countDropped(n: number): void {
    this.owner.producer?.countDropped(n);
  }

  /** Forget every id (a new stream, whose writer knows no names yet). */
  reset(): void {
    this.generation++;
  }

  private intern(entry: MetricEntry): void {
    entry.streamId = this.owner.internKey(entry.key);
    entry.streamGeneration = this.generation;
  }
}
