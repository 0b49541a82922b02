/**
 * The open readers of runs' stores, by run directory: the reading API opens a run's store on first
 * use and keeps it open (a dashboard polls the same runs every second), the least recently used
 * closed beyond `MAX_OPEN_READERS`.
 */
import { resolve } from "node:path";
import { RunReader } from "./store-reader.js";

const cache = new Map<string, RunReader>();

/** Readers kept open at most; the least recently used is closed beyond this. */
const MAX_OPEN_READERS = 64;

/** The cached reader of a run's store (opened on first use). Throws when the run has no store. */
export function cachedReader(runDir: string): RunReader {
  const path = resolve(runDir);
  let reader = cache.get(path);
  if (reader === undefined) {
    reader = new RunReader(path);
    if (cache.size >= MAX_OPEN_READERS) {
      for (const [oldestPath, oldest] of cache) {
        cache.delete(oldestPath);
        oldest.close();
        break;
      }
    }
  } else {
    cache.delete(path); // re-inserted below: Map order is recency order
  }
  cache.set(path, reader);
  return reader;
}

/** The cached reader of a run when one is open, without opening one or changing the recency order. */
export function openReader(runDir: string): RunReader | undefined {
  return cache.get(resolve(runDir));
}

/** Close every cached reader (e.g. before deleting run directories). */
export function closeStores(): void {
  for (const reader of cache.values()) reader.close();
  cache.clear();
}
