/**
 * The local dashboard's index of the runs under its root, kept up to date instead of opening every
 * run's store on every `/api/runs` (300 runs took 0.4–0.7 s that way, the event loop held
 * throughout; at 10,000 it would be minutes).
 *
 * The index holds each run's row (`LabelledRun`) and last values, and, for every directory up to
 * three levels down, its modification time. A refresh pass compares what it can with `stat`
 * alone and reads only what changed:
 * - a directory whose mtime changed is listed again (runs added or removed under it);
 * - a run whose stamp — the size and mtime of `metrics.db`, of a non-empty `metrics.db-wal`, of
 *   `run.json` and of `config.yaml` — changed is read again (`runOverview`: metadata,
 *   hyperparameters, last values, and the labels). An empty WAL file is no change: a reader
 *   creates one. A running run is also read again every `LIVE_READ_MS`: its status can change
 *   with no write (its processes all killed).
 *
 * Not everything is looked at on every pass: folders that hold runs (the root, experiments), runs
 * that are live or changed in the last minute, and directories the kernel said changed (an
 * `fs.watch` per directory outside runs' own subfolders, up to `MAX_WATCHES`: inotify on Linux)
 * are checked on every pass; everything else (finished runs, a run's own subfolders, and what a
 * watch cannot see: a network filesystem) every `COLD_CHECK_MS`, oldest first. Work is done in
 * slices of at most `SLICE_MS` with a turn of the event loop between, so a pass never holds the
 * server, however many runs there are.
 *
 * Passes are driven by requests, not a timer: a dashboard nobody looks at does nothing. A
 * `/api/runs` starts a pass when the last one began `PASS_GAP_MS` ago or more, waits for it at most
 * `AWAIT_PASS_MS` (new and live runs are checked first, so they are what that wait covers), and
 * answers from the index; the pass goes on in the background. The first request waits for the
 * first full read at most `AWAIT_BUILD_MS`; past that it answers with the runs read so far and
 * says how far indexing is (`indexing`), which the app shows.
 */
import { readdirSync, watch, type Dirent, type FSWatcher } from "node:fs";
import { join } from "node:path";
import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { STORE_FILE } from "../store/store-file.js";
import { withDeadline } from "../core/deadline.js";
import type { IndexedRun } from "./run-query.js";
import type { RunLabelReader } from "./run-labels.js";
import { readRun, runStamp, statOrNull, storeInside } from "./run-index-read.js";

/** Deepest run directory below the root, as `listRuns` of the store finds them. */
const MAX_DEPTH = 3;
/** Longest stretch of indexing work between two turns of the event loop. */
const SLICE_MS = 8;
/** A request starts a new pass only when the last one began this long ago. */
export const PASS_GAP_MS = 1_000;
/** How long a request waits for the pass it started before answering from the index. */
const AWAIT_PASS_MS = 100;
/** How long the first request waits for the first full read before answering with what is read. */
const AWAIT_BUILD_MS = 2_000;
/** A run changed this recently is checked on every pass. */
const HOT_MS = 60_000;
/** Everything else is checked at least this often (while requests come). */
export const COLD_CHECK_MS = 30_000;
/**
 * A running run is read again at least this often even when none of its files changed: its status
 * can change without a write (a job whose every process was killed reads `crashed` once the
 * reader sees its writers gone; a rank falls silent).
 */
export const LIVE_READ_MS = 5_000;
/** Directories watched at most (one inotify watch each); past it, polling alone. */
const MAX_WATCHES = 20_000;

/** How far the first read of the root has come. */
interface IndexProgress {
  /** Runs read. */
  readonly runsRead: number;
  /** Runs found so far (directories with a store). */
  readonly runsFound: number;
}

/** How a `RunIndex` keeps time and learns of changes. */
interface RunIndexOptions {
  /** The clock its cadences run on (milliseconds); default `Date.now`. */
  readonly now?: () => number;
  /** Ask the kernel to report changes (`fs.watch`); false: polling alone, as on a network filesystem. Default true. */
  readonly watch?: boolean;
}

interface RunNode {
  stamp: string;
  /** When it was last read (the index's clock). */
  readAt: number;
  /** Null until read. */
  entry: IndexedRun | null;
}

interface DirNode {
  readonly path: string;
  readonly depth: number;
  /** Inside a run directory: a run's own subfolder (`traces/`, `logs/`), checked cold. */
  readonly inRun: boolean;
  mtime: number;
  children: Set<string>;
  run: RunNode | null;
  checkedAt: number;
  changedAt: number;
  /** The kernel reported a change in it since its last check. */
  dirty: boolean;
  watcher: FSWatcher | null;
}

const LIVE = new Set(["running", "unknown"]);

/** The runs under one root, kept up to date by `refresh` passes. */
export class RunIndex {
  private readonly dirs = new Map<string, DirNode>();
  private pass: Promise<void> | null = null;
  private lastPassAt = -Infinity;
  private built = false;
  /** Bumped whenever a run is added, removed or read again. */
  private changes = 0;
  private watches = 0;
  /** False once the kernel refused a watch (inotify's limit): polling alone from then on. */
  private watching: boolean;
  private readonly now: () => number;

  constructor(
    private readonly realRoot: string,
    private readonly labels: RunLabelReader,
    options: RunIndexOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    this.watching = options.watch ?? true;
  }

  /**
   * The indexed runs, after starting a pass when one is due and waiting a bounded time for it
   * (see the module comment); `indexing` while the first full read is not done.
   */
  async current(): Promise<{ runs: IndexedRun[]; indexing?: IndexProgress }> {
    const running = this.pass ?? (this.now() - this.lastPassAt >= PASS_GAP_MS ? this.startPass() : null);
    if (running !== null) await withDeadline(running, this.built ? AWAIT_PASS_MS : AWAIT_BUILD_MS);
    const runs = this.runs();
    if (this.built) return { runs };
    return { runs, indexing: this.progress() };
  }

  /** One pass over what is due, now, awaited to its end (tests and benchmarks). */
  async update(): Promise<void> {
    if (this.pass !== null) await this.pass;
    await this.startPass();
  }

  /** One full pass over everything, now (tests and benchmarks: a known point to compare at). */
  async refreshAll(): Promise<void> {
    if (this.pass !== null) await this.pass;
    for (const dir of this.dirs.values()) dir.checkedAt = -Infinity;
    await this.startPass();
  }

  /** Changes seen so far (runs added, removed or read again). */
  get changeCount(): number {
    return this.changes;
  }

  private runs(): IndexedRun[] {
    const out: IndexedRun[] = [];
    for (const dir of this.dirs.values())
      if (dir.run?.entry !== null && dir.run?.entry !== undefined && dir.depth > 0) out.push(dir.run.entry);
    return out;
  }

  private progress(): IndexProgress {
    let found = 0;
    let read = 0;
    for (const dir of this.dirs.values()) {
      if (dir.run === null || dir.depth === 0) continue;
      found++;
      if (dir.run.entry !== null) read++;
    }
    return { runsRead: read, runsFound: found };
  }

  private startPass(): Promise<void> {
    this.lastPassAt = this.now();
    const pass = this.runPass().finally(() => {
      this.pass = null;
    });
    this.pass = pass;
    return pass;
  }

  /** The directories due now, most urgent first: folders that hold runs, new and live runs, then the oldest checked. */
  private due(): DirNode[] {
    const now = this.now();
    const hot: DirNode[] = [];
    const cold: DirNode[] = [];
    for (const dir of this.dirs.values()) {
      const container = dir.run === null && !dir.inRun && dir.depth < MAX_DEPTH;
      const live = dir.run !== null && (dir.run.entry === null || LIVE.has(dir.run.entry.row.status));
      if (container || live || dir.dirty || now - dir.changedAt < HOT_MS) hot.push(dir);
      else if (now - dir.checkedAt >= COLD_CHECK_MS) cold.push(dir);
    }
    cold.sort((a, b) => a.checkedAt - b.checkedAt);
    return [...hot, ...cold];
  }

  private async runPass(): Promise<void> {
    if (!this.dirs.has(this.realRoot)) this.dirs.set(this.realRoot, this.newDir(this.realRoot, 0, false));
    const queue = this.due();
    let slice = performance.now();
    // Directories found during the pass join the queue: a new experiment's runs are read in the same pass.
    for (let i = 0; i < queue.length; i++) {
      const dir = queue[i];
      if (dir === undefined || this.dirs.get(dir.path) !== dir) continue;
      for (const added of this.check(dir)) queue.push(added);
      if (performance.now() - slice >= SLICE_MS) {
        await yieldToEventLoop();
        slice = performance.now();
      }
    }
    this.built = true;
  }

  private newDir(path: string, depth: number, inRun: boolean): DirNode {
    // Found by the first read, a directory is not news; found later, it is watched closely for a while.
    return {
      path,
      depth,
      inRun,
      mtime: -1,
      children: new Set(),
      run: null,
      checkedAt: -Infinity,
      changedAt: this.built ? this.now() : -Infinity,
      dirty: false,
      watcher: null,
    };
  }

  /** Check one directory: list it again when its mtime changed, read its run when its stamp did. Returns directories it found. */
  private check(dir: DirNode): DirNode[] {
    dir.checkedAt = this.now();
    dir.dirty = false;
    const stat = statOrNull(dir.path);
    if (stat === null) {
      this.remove(dir);
      return [];
    }
    let added: DirNode[] = [];
    if (stat.mtimeMs !== dir.mtime) {
      const listedBefore = dir.mtime !== -1;
      dir.mtime = stat.mtimeMs;
      const before = `${dir.run !== null}|${[...dir.children].join("\u0000")}`;
      added = this.list(dir);
      // A new run or folder in it (not a reader's -wal/-shm files): watch it closely for a while.
      if (listedBefore && before !== `${dir.run !== null}|${[...dir.children].join("\u0000")}`) this.touched(dir);
    }
    if (dir.run !== null) this.checkRun(dir);
    return added;
  }

  /** List a directory: its subfolders (up to `MAX_DEPTH`) and whether it holds a store inside the root. */
  private list(dir: DirNode): DirNode[] {
    let entries: Dirent[];
    try {
      entries = readdirSync(dir.path, { withFileTypes: true });
    } catch {
      entries = [];
    }
    const hasStore =
      entries.some((e) => e.name === STORE_FILE && !e.isDirectory()) && storeInside(this.realRoot, dir.path);
    if (hasStore && dir.run === null) {
      dir.run = { stamp: "", readAt: -Infinity, entry: null };
    } else if (!hasStore && dir.run !== null) {
      dir.run = null;
      this.changes++;
    }
    const names =
      dir.depth < MAX_DEPTH
        ? entries.filter((e) => e.isDirectory() && !e.name.startsWith(".")).map((e) => join(dir.path, e.name))
        : [];
    const now = new Set(names);
    for (const child of dir.children) {
      const node = this.dirs.get(child);
      if (!now.has(child) && node !== undefined) this.remove(node);
    }
    const added: DirNode[] = [];
    for (const path of names) {
      if (dir.children.has(path) && this.dirs.has(path)) continue;
      const node = this.newDir(path, dir.depth + 1, dir.inRun || dir.run !== null);
      this.dirs.set(path, node);
      added.push(node);
    }
    dir.children = now;
    if (!dir.inRun) this.watch(dir);
    return added;
  }

  /** Have the kernel mark the directory when something in it changes (a hint; polling stays the safety net). */
  private watch(dir: DirNode): void {
    if (dir.watcher !== null || !this.watching || this.watches >= MAX_WATCHES) return;
    try {
      const watcher = watch(dir.path, { persistent: false }, () => {
        dir.dirty = true;
      });
      watcher.on("error", () => this.unwatch(dir));
      dir.watcher = watcher;
      this.watches++;
    } catch {
      // ENOSPC (the inotify limit) or a filesystem without notifications: poll.
      this.watching = false;
    }
  }

  private unwatch(dir: DirNode): void {
    if (dir.watcher === null) return;
    dir.watcher.close();
    dir.watcher = null;
    this.watches--;
  }

  /** Stop watching every directory. */
  close(): void {
    for (const dir of this.dirs.values()) this.unwatch(dir);
  }

  private checkRun(dir: DirNode): void {
    const run = dir.run;
    if (run === null) return;
    const stamp = runStamp(dir.path);
    const now = this.now();
    const stillRunning = run.entry?.row.status === "running" && now - run.readAt >= LIVE_READ_MS;
    if (stamp === run.stamp && run.entry !== null && !stillRunning) return;
    const changed = stamp !== run.stamp;
    if (run.entry !== null && changed) this.touched(dir);
    run.stamp = stamp;
    run.readAt = now;
    const before = run.entry;
    run.entry = readRun(this.realRoot, dir.path, this.labels);
    // Read again with no file changed: a change only when what it says did (the ETag stays otherwise).
    if (before === null || changed || JSON.stringify(before.row) !== JSON.stringify(run.entry?.row)) this.changes++;
  }

  /** Something changed in a directory: check it on every pass for a while. */
  private touched(dir: DirNode): void {
    dir.changedAt = this.now();
  }

  private remove(dir: DirNode): void {
    if (!this.dirs.delete(dir.path)) return;
    this.unwatch(dir);
    if (dir.run !== null) this.changes++;
    for (const child of dir.children) {
      const node = this.dirs.get(child);
      if (node !== undefined) this.remove(node);
    }
  }
}
