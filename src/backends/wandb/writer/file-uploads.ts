/**
 * Run files of a W&B run (`config.yaml`, `wandb-summary.json`, a table's `media/table/….table.json`)
 * on their way to the server, as W&B's SDK sends them: `CreateRunFiles`, a PUT to the URL it
 * gives, then the name in the file stream's `uploaded` list.
 */
import { createRunFiles } from "../client/api.js";
import { putFile, withRetry, type Endpoint, type RetryObserver } from "../client/http.js";
import type { SenderLimits } from "../options.js";

/** Files waiting to be uploaded (a newer content of a name replaces the older), and names uploaded but not yet reported. */
export class PendingFiles {
  private files = new Map<string, string>();
  /** Uploaded, not yet named in a file-stream request's `uploaded`. */
  readonly uploadedNames: string[] = [];

  /** Files waiting to be uploaded. */
  get size(): number {
    return this.files.size;
  }

  /** Characters of the files waiting, not counting the current content of `replacing` (about to be replaced). */
  bytesWithout(replacing: string): number {
    let bytes = 0;
    for (const [name, content] of this.files) if (name !== replacing) bytes += content.length;
    return bytes;
  }

  set(name: string, content: string): void {
    this.files.set(name, content);
  }

  /** Every waiting file, in the order queued; the queue is left empty. */
  takeAll(): Array<[name: string, content: string]> {
    const all = [...this.files];
    this.files = new Map();
    return all;
  }

  /** Put files back that were not uploaded, unless a newer content of the name was queued meanwhile. */
  giveBack(files: ReadonlyArray<readonly [name: string, content: string]>): void {
    for (const [name, content] of files) if (!this.files.has(name)) this.files.set(name, content);
  }
}

/** Where an upload goes and what stops it. */
interface UploadSession {
  readonly endpoint: Endpoint;
  readonly run: { readonly entity: string; readonly project: string; readonly name: string };
  readonly limits: SenderLimits;
  readonly stop: AbortSignal;
  readonly observer: RetryObserver;
  /** False once the writer stopped sending (it spooled or finished meanwhile). */
  live(): boolean;
  /** The server gave no URL for this file: keep it elsewhere (the spool), reported. */
  noUploadUrl(name: string, content: string): void;
}

/** How an upload of the waiting files ended. */
type UploadOutcome =
  | { readonly kind: "uploaded" }
  /** The writer stopped sending meanwhile; the files not uploaded are back in the queue. */
  | { readonly kind: "stopped" }
  /** The server refused or could not be reached within the retry budget; the files not uploaded are back in the queue. */
  | { readonly kind: "failed"; readonly reason: string; readonly retryable: boolean };

/** Upload every waiting file: `CreateRunFiles`, then a PUT per file; uploaded names go to `uploadedNames`. */
export async function uploadPendingFiles(pending: PendingFiles, session: UploadSession): Promise<UploadOutcome> {
  const batch = pending.takeAll();
  const { limits, stop, observer } = session;
  const created = await withRetry(
    () =>
      createRunFiles(
        session.endpoint,
        session.run,
        batch.map(([name]) => name),
        limits.requestTimeoutMs,
        stop,
      ),
    limits,
    stop,
    observer,
  );
  if (!session.live()) {
    pending.giveBack(batch);
    return { kind: "stopped" };
  }
  if (!created.ok) {
    pending.giveBack(batch);
    return { kind: "failed", reason: created.reason, retryable: created.retryable };
  }
  for (const [i, [name, content]] of batch.entries()) {
    const url = created.value.urls.get(name);
    if (url === undefined) {
      session.noUploadUrl(name, content);
      continue;
    }
    const put = await withRetry(
      () => putFile(url, content, limits.requestTimeoutMs, created.value.headers, stop),
      limits,
      stop,
      observer,
    );
    if (!session.live()) {
      pending.giveBack(batch.slice(i));
      return { kind: "stopped" };
    }
    if (!put.ok) {
      pending.giveBack(batch.slice(i));
      return { kind: "failed", reason: put.reason, retryable: put.retryable };
    }
    pending.uploadedNames.push(name);
  }
  return { kind: "uploaded" };
}
