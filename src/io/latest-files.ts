/**
 * Whole files written in the background where only the latest content of each path matters (a
 * run file replaced as the run goes: a table, the summary): writes are chained, a write whose path
 * got newer content meanwhile is skipped, and what is still pending can be written synchronously
 * at exit. Every write is atomic (`atomic-write.ts`); a failure goes to `onError`, never thrown.
 */
import { writeFileAtomic, writeFileAtomicSync } from "./atomic-write.js";

export class LatestFileWrites {
  private chain: Promise<void> = Promise.resolve();
  /** Paths not written yet, with their latest content. */
  private readonly pending = new Map<string, string>();

  constructor(private readonly onError: (path: string, error: unknown) => void) {}

  /** Write `content` to `path` after the writes before it (replacing content not written yet). */
  write(path: string, content: string): void {
    this.pending.set(path, content);
    this.chain = this.chain.then(async () => {
      const latest = this.pending.get(path);
      if (latest === undefined) return;
      try {
        await writeFileAtomic(path, latest);
      } catch (error) {
        this.onError(path, error);
      } finally {
        if (this.pending.get(path) === latest) this.pending.delete(path);
      }
    });
  }

  /** Resolves once every write asked for so far has ended (written or reported). */
  drain(): Promise<void> {
    return this.chain;
  }

  /** The exit path (nothing can be awaited): write what is pending now, synchronously. */
  writeSync(): void {
    for (const [path, content] of this.pending) {
      try {
        writeFileAtomicSync(path, content);
      } catch (error) {
        this.onError(path, error);
      }
    }
    this.pending.clear();
  }
}
