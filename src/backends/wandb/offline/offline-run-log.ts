/**
 * A W&B offline run written as the run goes, so the official `wandb sync` can read it at every
 * flush boundary — also after a `kill -9`, when nothing at the end of the run gets to write it.
 *
 * While a writer of a run of its own spools (offline mode, or after giving up on the server), its
 * `offline-run-…-{runId}/run-{runId}.wandb` grows with it: the header, run and config records
 * when the first row comes, then each flush's history records with a summary record of their
 * latest values (as the SDK's wandb-core writes them, so `wandb sync` of a log cut short still
 * gives the run its summary) and a `files` record for each table (written under `files/`),
 * appended through one `AppendFile` (src/io) as whole framed records, so the file on disk is a
 * valid log after every append. `flushed()` of the backend waits for it (`drain`). At the end:
 * the summary, the exit record with the run's exit code (non-zero after a signal or an uncaught
 * exception), and `final`; at `exit`, the same synchronously. A log cut short by SIGKILL has no
 * exit record: `wandb sync` uploads its rows and its summary and marks the run failed (exit code
 * 1), as it does for the SDK's own offline runs of a killed process.
 */
import { join } from "node:path";
import { describeError, reportError } from "../../../core/diagnostics.js";
import { jsonText } from "../../../core/json.js";
import { AppendFile } from "../../../io/append-file.js";
import { LatestFileWrites } from "../../../io/latest-files.js";
import { CONFIG_FILE } from "../../../run/run-files.js";
import { SUMMARY_FILE } from "../client/api.js";
import { parseHistoryObject } from "../client/history.js";
import {
  encodeRecord,
  endRecords,
  filesRecord,
  headRecords,
  historyRecord,
  makeAttemptDir,
  summaryRecord,
  TransactionLogFramer,
  type OfflineRunHead,
} from "./offline-run.js";

/** The offline run log of one attempt of one run, written as it goes. */
export class OfflineRunLog {
  private readonly framer = new TransactionLogFramer();
  private log: AppendFile | null = null;
  /** The run directory of this attempt, once its first row made it. */
  private runPath: string | null = null;
  private num = 0;
  private lastRuntime = 0;
  /** Run files that came before the first row (written once the directory exists). */
  private readonly early = new Map<string, string>();
  /** Run files not on disk yet (path → content), for `writeSync` at exit. */
  /** Run files written in the background, the rest by `writeSync` at exit. */
  private readonly files = new LatestFileWrites((path, error) =>
    reportError(
      `wandb.offlineRun.file:${path}`,
      `could not write ${path}: ${describeError(error)}; "wandb sync" will not upload this run file`,
    ),
  );
  private ended = false;

  constructor(
    private readonly wandbDir: string,
    private head: OfflineRunHead,
    private readonly producer: string,
    /** The attempt's first history offset (its note in the directory). */
    private readonly attempt: number,
    private readonly maxQueuedBytes: number,
  ) {}

  /** This attempt's offline run directory, once it has one (at its first row). */
  get dir(): string | null {
    return this.runPath;
  }

  /** The run's config or names changed (`logHyperparams`): a config record follows. */
  setHead(head: OfflineRunHead): void {
    // jsonText, not JSON.stringify: a config may hold bigints (kept exact, docs/wandb.md).
    const configChanged = jsonText(head.config) !== jsonText(this.head.config);
    this.head = head;
    if (configChanged && this.log !== null) this.append([headRecords(head, this.producer, 0)[2] ?? {}]);
  }

  /** History lines of one flush (or stream batch), as written to the spool. */
  history(lines: readonly string[]): void {
    if (lines.length === 0 || this.ended) return;
    const rows = lines.map(parseHistoryObject);
    if (this.log === null) this.open(rows[0]?.["_timestamp"]);
    const runtime = Number(rows.at(-1)?.["_runtime"] ?? this.lastRuntime);
    if (Number.isFinite(runtime)) this.lastRuntime = runtime;
    this.append([...rows.map(historyRecord), summaryRecord(rows)]);
  }

  /**
   * A run file (a table, `version.json`): written under the directory's `files/` and listed in a
   * `files` record, so `wandb sync` uploads it. `config.yaml` and `wandb-summary.json` are left to
   * `wandb sync`, which writes its own from the config and summary records.
   */
  runFile(name: string, content: string): void {
    if (this.ended || name === CONFIG_FILE || name === SUMMARY_FILE) return;
    if (this.runPath === null) {
      this.early.set(name, content);
      return;
    }
    this.files.write(join(this.runPath, "files", ...name.split("/")), content);
    this.append([filesRecord([name])]);
  }

  /** The run ended: its summary, its exit code, `final`. */
  end(summary: string | undefined, exitcode: number): void {
    if (this.ended) return;
    if (this.log === null && this.early.size === 0) {
      this.ended = true;
      return;
    }
    if (this.log === null) this.open(undefined);
    this.append(endRecords(summary, exitcode, this.lastRuntime));
    this.ended = true;
  }

  /** Wait until everything written so far is on disk. */
  async drain(): Promise<void> {
    await this.files.drain();
    await this.log?.drain();
  }

  /** The exit path: the run files and the log's queued bytes, synchronously. */
  writeSync(): void {
    this.files.writeSync();
    this.log?.writeQueuedSync();
  }

  /** Make the directory (named after the first row's time) and start the log: header, run, config, early files. */
  private open(firstTimestamp: unknown): void {
    const startSeconds =
      typeof firstTimestamp === "number" && Number.isFinite(firstTimestamp) ? firstTimestamp : Date.now() / 1000;
    try {
      this.runPath = makeAttemptDir(this.wandbDir, this.head.runId, startSeconds * 1000, this.attempt);
    } catch (error) {
      reportError(
        `wandb.offlineRun:${this.wandbDir}`,
        `W&B run ${this.head.runId}: could not make its offline run directory for "wandb sync": ${describeError(error)}; the spool is intact ("rankscope wandb sync")`,
      );
      this.ended = true;
      return;
    }
    const log = new AppendFile(join(this.runPath, `run-${this.head.runId}.wandb`), this.maxQueuedBytes);
    this.log = log;
    log.append(this.framer.header());
    this.append(headRecords(this.head, this.producer, startSeconds));
    const early = [...this.early];
    this.early.clear();
    for (const [name, content] of early) this.runFile(name, content);
  }

  private append(records: readonly Record<string, unknown>[]): void {
    this.log?.append(this.framer.frame(records.map((r) => encodeRecord(++this.num, r))));
  }
}
