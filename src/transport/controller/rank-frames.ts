/**
 * The receiving side of ranks' binary flush answers (wire frames, docs/scale.md): a host agent's
 * NATS ranks (`RankFrames`: one key table per rank, the ranks that must start a new one at the
 * next flush) and one rank over the controller's parent channel (`ChannelRankFrames`). A frame
 * becomes the reply it stands for; its states stay in the frame's columns (`FramedSnapshot`),
 * merged from there with the flush's other answers (`mergeAll`).
 */
import { DEFAULT_MAX_KEYS } from "../../core/collector.js";
import type { KeyState } from "../../core/key-state.js";
import { envInteger } from "../../core/env.js";
import { processWide } from "../../core/process-wide.js";
import {
  checkReplyFrameHeader,
  reportIgnored,
  transportStats,
  type RankMessage,
  type RankReply,
  type RankReplyFrameHeader,
} from "../protocol/messages.js";
import type { MergeableSnapshot, RankSnapshot } from "../../pipeline/rank-handle.js";
import {
  FrameMerger,
  frameKeyStates,
  readFrameHeader,
  StateDecoder,
  WIRE_VERSION,
  WireFormatError,
  type DecodedFrame,
} from "../wire/codec.js";
import type { RankTiming } from "../../core/step-timing.js";

/** Ranks this server does not know whose flush answers (or key tables) are kept for them (beyond: dropped, counted). */
export const MAX_ORPHAN_RANKS = 4096;

/** The key tables of the ranks answering in frames. */
export class RankFrames {
  private readonly decoders = new Map<string, StateDecoder>();
  /** Ranks whose key table is not held here (new here, or a frame was lost): told at the next flush. */
  private readonly resync = new Set<string>();

  constructor(
    private readonly runId: string,
    private readonly isRegistered: (rankName: string) => boolean,
    private readonly registeredCount: () => number,
    /** Ask a rank to send an answer again, in JSON, under its request id (and to resync). */
    private readonly askResend: (rankName: string, id: number, seq: number) => void,
  ) {}

  /** A rank registered: unless its table is held here, its frames may continue a table an earlier agent held — it starts a new one. */
  joined(rankName: string): void {
    if (!this.decoders.has(rankName)) this.resync.add(rankName);
  }

  /** A rank left: forget its table. */
  forget(rankName: string): void {
    this.decoders.delete(rankName);
  }

  /** The ranks the next flush request tells to start a new key table (once). */
  takeResync(): string[] {
    const names = [...this.resync];
    this.resync.clear();
    return names;
  }

  /**
   * A rank's flush answer sent as a wire frame, as the reply it stands for; undefined when it is
   * malformed or foreign (counted and reported). A frame naming keys whose definitions this server
   * does not hold (a frame of the rank's session was lost, or this agent is new to it) is not used:
   * the rank is asked to send that answer again in JSON under the same request id (so it still
   * answers the flush it was for, or arrives late and goes into the rank's next flush), and to
   * start a new key table at the next flush — nothing is lost.
   */
  reply(data: Uint8Array, from: string): RankMessage | undefined {
    const stats = transportStats();
    stats.messagesIn++;
    stats.bytesIn += data.length;
    try {
      const header = checkReplyFrameHeader(this.runId, readFrameHeader(data), from);
      if (header === undefined) return undefined;
      const rankName = header.rankName;
      let decoder = this.decoders.get(rankName);
      if (decoder === undefined) {
        if (!this.isRegistered(rankName) && this.decoders.size >= this.registeredCount() + MAX_ORPHAN_RANKS) {
          reportIgnored(
            "foreign",
            `a flush-answer frame came from ${rankName}, which is not registered here, while the key tables of ${MAX_ORPHAN_RANKS} unregistered ranks are already held`,
          );
          return undefined;
        }
        decoder = new StateDecoder();
        this.decoders.set(rankName, decoder);
      }
      const frame = decoder.decode(data);
      if (frame.tableGap) this.resync.add(rankName);
      if (frame.unknownKeys > 0) {
        reportIgnored(
          "late",
          `rank ${rankName}'s answer to flush(${header.step}) names ${frame.unknownKeys} keys whose definitions were lost with an earlier frame; it is asked to send that answer again, in JSON`,
        );
        this.askResend(rankName, header.id, header.seq);
        return undefined;
      }
      return {
        t: "reply",
        id: header.id,
        rankName,
        ok: true,
        snapshot: new FramedSnapshot(rankName, header.step, header.seq, header.dropped, frame, header.timing),
      };
    } catch (error) {
      if (!(error instanceof WireFormatError)) throw error;
      reportIgnored(
        error.kind,
        `a flush-answer frame from ${from} ${error.kind === "malformed" ? "cannot be read" : "is refused"} (${error.message})`,
      );
      return undefined;
    }
  }
}

/**
 * A flush answer that came as a wire frame: its states stay in the frame's columns (a host agent
 * merges them as they are, `FrameMerger`) until someone reads `states`.
 */
export class FramedSnapshot implements MergeableSnapshot {
  private built: readonly KeyState[] | undefined;
  constructor(
    readonly rankName: string,
    readonly step: number,
    readonly seq: number,
    readonly droppedKeyRecords: number,
    readonly frame: DecodedFrame,
    readonly timing?: RankTiming,
  ) {}
  get states(): readonly KeyState[] {
    return (this.built ??= frameKeyStates(this.frame, false));
  }

  mergeAll(snapshots: readonly RankSnapshot[]): KeyState[] | undefined {
    return processWide("transport.answerMerger", () => new AnswerMerger()).mergeAll(snapshots);
  }
}

/** Most (key, reduce) slots the answer merger holds before it starts afresh: its memory stays bounded whatever keys come and go. */
const MAX_MERGER_SLOTS = 1_000_000;

/**
 * Merges the answers of one flush, those that came as frames straight from their columns and the
 * others (JSON answers, late answers carried into one) from their states, in the answers' order:
 * one `FrameMerger` per process, reused from flush to flush (its keys stay interned).
 */
class AnswerMerger {
  private merger = new FrameMerger();

  mergeAll(snapshots: readonly RankSnapshot[]): KeyState[] | undefined {
    if (this.merger.size > MAX_MERGER_SLOTS) this.merger = new FrameMerger();
    this.merger.begin();
    for (const snapshot of snapshots) {
      if (snapshot instanceof FramedSnapshot) this.merger.add(snapshot.frame);
      else this.merger.addStates(snapshot.states);
    }
    return this.merger.result();
  }
}

/**
 * The flush answers of one rank over its parent's channel (a worker thread's port, a child
 * process's IPC), sent as wire frames: the rank's key table (at most `RANKSCOPE_MAX_KEYS` keys),
 * and whether the next flush asks it to start a new one. Frames are held to the rules JSON answers
 * are (`StateDecoder`: names bounded, states checked against their reductions): one that cannot
 * be read or is refused is counted (`rankscope/rejected/{kind}`), never logged, and — when its
 * header names the request — fails that flush for this rank at once instead of at the deadline.
 */
export class ChannelRankFrames {
  private readonly decoder: StateDecoder;
  private resync = false;

  constructor(
    private readonly runId: string,
    private readonly rankName: string,
    /** Ask the rank to send an answer again, in JSON, under its request id. */
    private readonly askResend: (id: number, seq: number) => void,
    maxKeys = envInteger("RANKSCOPE_MAX_KEYS", DEFAULT_MAX_KEYS, 1),
  ) {
    this.decoder = new StateDecoder(maxKeys);
  }

  /** The fields of the next flush request: frames of this wire version, and once after a gap a new key table. */
  flushFields(): { readonly wire: number; readonly resync?: readonly string[] } {
    if (!this.resync) return { wire: WIRE_VERSION };
    this.resync = false;
    return { wire: WIRE_VERSION, resync: [this.rankName] };
  }

  /** A frame from the rank as the reply it stands for; undefined when it is foreign, unreadable or its keys' definitions are lost (counted). */
  reply(data: Uint8Array, from: string): RankReply | undefined {
    const stats = transportStats();
    stats.messagesIn++;
    stats.bytesIn += data.length;
    let header: RankReplyFrameHeader | undefined;
    try {
      header = checkReplyFrameHeader(this.runId, readFrameHeader(data), from);
    } catch (error) {
      if (!(error instanceof WireFormatError)) throw error;
      reportIgnored(error.kind, `a flush-answer frame from ${from} cannot be read (${error.message})`);
      return undefined;
    }
    if (header === undefined) return undefined;
    if (header.rankName !== this.rankName) {
      reportIgnored("foreign", `${from} sent a flush-answer frame as rank ${header.rankName}`);
      return undefined;
    }
    try {
      const frame = this.decoder.decode(data);
      if (frame.tableGap) this.resync = true;
      if (frame.unknownKeys > 0) {
        reportIgnored(
          "late",
          `rank ${this.rankName}'s answer to flush(${header.step}) names ${frame.unknownKeys} keys whose definitions were refused with an earlier frame; it is asked to send that answer again, in JSON`,
        );
        this.askResend(header.id, header.seq);
        return undefined;
      }
      return {
        t: "reply",
        id: header.id,
        rankName: this.rankName,
        ok: true,
        snapshot: new FramedSnapshot(this.rankName, header.step, header.seq, header.dropped, frame, header.timing),
      };
    } catch (error) {
      if (!(error instanceof WireFormatError)) throw error;
      const refused = error.kind === "malformed" ? "cannot be read" : "is refused";
      reportIgnored(error.kind, `a flush-answer frame from ${from} ${refused} (${error.message})`);
      // Its key definitions may not be held here: the rank starts a new table at the next flush.
      this.resync = true;
      return {
        t: "reply",
        id: header.id,
        rankName: this.rankName,
        ok: false,
        error: `its answer to flush(${header.step}) ${refused}; none of its values are logged (${error.message})`,
      };
    }
  }
}
