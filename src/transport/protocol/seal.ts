/**
 * Sealed messages: how a run's NATS messages prove they come from the run, and stay unread by
 * anyone else on the server.
 *
 * Every message a controller, rank or host agent publishes on NATS — JSON request, reply or wire
 * frame alike — is sealed with AES-256-GCM under a key only holders of the run secret can derive.
 * The GCM tag authenticates the whole message (one tag over the payload bytes, never per key) and
 * its associated data: the sender, the sender's sequence number, the time it was sealed, the
 * subject it was published on and its reply subject — so a sealed message cannot be moved to
 * another subject or given another reply inbox. The payload is encrypted, so a subscriber to
 * `rankscope.>` without the secret reads nothing.
 *
 * ```
 *  0  u8[4]   magic "RSS1"
 *  4  u8[16]  sender id (random per connection)
 * 20  u64     sequence number (1, 2, … per sender); the GCM nonce is 4 zero bytes and these 8
 * 28  f64     milliseconds since the epoch when sealed
 * 36  u8[16]  GCM tag
 * 52  …       ciphertext (as long as the payload)
 * ```
 *
 * Each sender seals under a key of its own, derived from the run key and its id (HKDF-SHA256), so a
 * nonce (its sequence number) never repeats under one key however many senders a run has. A
 * receiver (`Opener`) drops — and its caller counts — a message that is not sealed or whose tag
 * does not verify (`unauthenticated`), one it has already seen (`replayed`: a window of the last
 * 1,024 sequence numbers per sender), and one older than the window or sealed more than
 * `MAX_SEAL_AGE_MS` from its own clock (`stale`). Senders' state is kept only once a message of
 * theirs verified, and for at most `MAX_SENDERS` of them.
 *
 * Measured (docs/DESIGN.md, "Transport"): AES-256-GCM costs what HMAC-SHA256 costs on these
 * payloads (≈1–1.7 GB/s here against ≈0.9–1.2 GB/s), so the tag comes with confidentiality.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";

const MAGIC = Buffer.from("RSS1", "latin1");
const HEAD = 36;
const TAG_BYTES = 16;
/** Bytes a sealed message adds to its payload. */
export const SEAL_OVERHEAD = HEAD + TAG_BYTES;
/** A message sealed longer ago than this (or this far in the future: clocks differ) is `stale`. */
export const MAX_SEAL_AGE_MS = 5 * 60_000;
/** Sequence numbers remembered per sender: a replay within them is `replayed`, one below them `stale`. */
export const REPLAY_WINDOW = 1024;
/** Senders whose window a receiver keeps (the oldest is forgotten beyond; the age bound still holds). */
const MAX_SENDERS = 16_384;

/** Why a message was not opened. */
type SealRejection = "unauthenticated" | "replayed" | "stale";

/** The result of opening a message. */
type Opened =
  | { readonly ok: true; readonly data: Uint8Array; readonly sender: string }
  | { readonly ok: false; readonly kind: SealRejection; readonly detail: string };

/** True if `data` starts like a sealed message. */
export function isSealed(data: Uint8Array): boolean {
  return (
    data.length >= SEAL_OVERHEAD &&
    data[0] === MAGIC[0] &&
    data[1] === MAGIC[1] &&
    data[2] === MAGIC[2] &&
    data[3] === MAGIC[3]
  );
}

/** The key of one run: HKDF-SHA256 of the run secret, salted with the run id (one secret reused by two runs gives two keys). */
export class RunKey {
  private constructor(
    readonly runId: string,
    private readonly key: Buffer,
  ) {}

  static derive(secret: string, runId: string): RunKey {
    return new RunKey(
      runId,
      Buffer.from(
        hkdfSync("sha256", Buffer.from(secret, "utf8"), Buffer.from(runId, "utf8"), "rankscope run key v1", 32),
      ),
    );
  }

  /** The key one sender seals under. */
  senderKey(sender: Uint8Array): Buffer {
    return Buffer.from(hkdfSync("sha256", this.key, sender, "rankscope sender key v1", 32));
  }
}

/** The associated data of a message: its head (magic to time) and the subjects it travels on. */
function associatedData(head: Uint8Array, subject: string, reply: string | undefined): Buffer {
  // No reply subject and an empty one are the same (the NATS client reports an absent one as "").
  const subjects = Buffer.from(reply === undefined || reply === "" ? subject : `${subject}\n${reply}`, "utf8");
  const aad = Buffer.allocUnsafe(HEAD + subjects.length);
  aad.set(head.subarray(0, HEAD), 0);
  aad.set(subjects, HEAD);
  return aad;
}

function nonceOf(head: Uint8Array): Buffer {
  const nonce = Buffer.alloc(12);
  nonce.set(head.subarray(20, 28), 4);
  return nonce;
}

/** One sender (a connection): its id, its key and its next sequence number. */
export class Sealer {
  readonly sender: Buffer = randomBytes(16);
  private readonly key: Buffer;
  private seq = 0;

  constructor(runKey: RunKey) {
    this.key = runKey.senderKey(this.sender);
  }

  /** Seal `payload` (text is sent as UTF-8) for publication on `subject` with `reply`. */
  seal(subject: string, reply: string | undefined, payload: string | Uint8Array, now = Date.now()): Uint8Array {
    const head = Buffer.allocUnsafe(HEAD);
    head.set(MAGIC, 0);
    head.set(this.sender, 4);
    head.writeBigUInt64LE(BigInt(++this.seq), 20);
    head.writeDoubleLE(now, 28);
    const cipher = createCipheriv("aes-256-gcm", this.key, nonceOf(head));
    cipher.setAAD(associatedData(head, subject, reply));
    const body = typeof payload === "string" ? cipher.update(payload, "utf8") : cipher.update(payload);
    const last = cipher.final();
    const out = Buffer.allocUnsafe(SEAL_OVERHEAD + body.length + last.length);
    out.set(head, 0);
    out.set(cipher.getAuthTag(), HEAD);
    out.set(body, SEAL_OVERHEAD);
    if (last.length > 0) out.set(last, SEAL_OVERHEAD + body.length);
    return out;
  }
}

/** What a receiver remembers of one sender. */
interface SenderState {
  readonly key: Buffer;
  /** The highest sequence number opened, and which of the `REPLAY_WINDOW` below it were (a ring of bits). */
  top: number;
  readonly seen: Uint32Array;
}

const bit = (seq: number): [word: number, mask: number] => {
  const slot = seq % REPLAY_WINDOW;
  return [slot >>> 5, 1 << (slot & 31)];
};

/** A receiver: opens sealed messages of one run, dropping the unauthenticated, replayed and stale. */
export class Opener {
  private readonly senders = new Map<string, SenderState>();

  constructor(private readonly runKey: RunKey) {}

  /** Open a message received on `subject` with `reply`; `now` is this receiver's clock. */
  open(subject: string, reply: string | undefined, data: Uint8Array, now = Date.now()): Opened {
    if (!isSealed(data)) return { ok: false, kind: "unauthenticated", detail: "it is not sealed with the run secret" };
    const view = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    const senderId = view.toString("hex", 4, 20);
    const seqBig = view.readBigUInt64LE(20);
    const seq = Number(seqBig);
    if (seq < 1 || !Number.isSafeInteger(seq))
      return { ok: false, kind: "unauthenticated", detail: "its sequence number is out of range" };
    const known = this.senders.get(senderId);
    const key = known?.key ?? this.runKey.senderKey(view.subarray(4, 20));
    let plain: Buffer;
    try {
      const decipher = createDecipheriv("aes-256-gcm", key, nonceOf(view));
      decipher.setAAD(associatedData(view, subject, reply));
      decipher.setAuthTag(view.subarray(HEAD, SEAL_OVERHEAD));
      const body = decipher.update(view.subarray(SEAL_OVERHEAD));
      const last = decipher.final();
      plain = last.length === 0 ? body : Buffer.concat([body, last]);
    } catch {
      return {
        ok: false,
        kind: "unauthenticated",
        detail: "its authentication tag does not verify (another run secret, another subject, or altered bytes)",
      };
    }
    const sealedAt = view.readDoubleLE(28);
    if (!(Math.abs(now - sealedAt) <= MAX_SEAL_AGE_MS)) {
      return {
        ok: false,
        kind: "stale",
        detail: `it was sealed ${Math.round((now - sealedAt) / 1000)} s from this clock (at most ${MAX_SEAL_AGE_MS / 1000} s either way; are the machines' clocks synchronised?)`,
      };
    }
    const state = known ?? this.remember(senderId, key);
    const verdict = this.admit(state, seq);
    if (verdict !== undefined)
      return {
        ok: false,
        kind: verdict,
        detail:
          verdict === "replayed"
            ? `message ${seq} of this sender was already received`
            : `message ${seq} is older than the last ${REPLAY_WINDOW} of this sender`,
      };
    return { ok: true, data: plain, sender: senderId };
  }

  private remember(senderId: string, key: Buffer): SenderState {
    if (this.senders.size >= MAX_SENDERS) {
      const oldest = this.senders.keys().next();
      if (oldest.done !== true) this.senders.delete(oldest.value);
    }
    const state: SenderState = { key, top: 0, seen: new Uint32Array(REPLAY_WINDOW / 32) };
    this.senders.set(senderId, state);
    return state;
  }

  /** Mark `seq` received; undefined if it is new, else why it is refused. */
  private admit(state: SenderState, seq: number): "replayed" | "stale" | undefined {
    if (seq > state.top) {
      if (seq - state.top >= REPLAY_WINDOW) state.seen.fill(0);
      else {
        for (let s = state.top + 1; s < seq; s++) {
          const [word, mask] = bit(s);
          state.seen[word] = (state.seen[word] ?? 0) & ~mask;
        }
      }
      const [word, mask] = bit(seq);
      state.seen[word] = (state.seen[word] ?? 0) | mask;
      state.top = seq;
      return undefined;
    }
    if (state.top - seq >= REPLAY_WINDOW) return "stale";
    const [word, mask] = bit(seq);
    const bits = state.seen[word] ?? 0;
    if ((bits & mask) !== 0) return "replayed";
    state.seen[word] = bits | mask;
    return undefined;
  }
}
