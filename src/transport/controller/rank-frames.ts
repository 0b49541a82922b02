/**
 * A host agent's side of its ranks' binary flush answers (wire frames, docs/scale.md): one key
 * table (`StateDecoder`) per rank, the ranks that must start a new one at the next flush, and a
 * frame turned into the reply it stands for. Its states stay in the frame's columns
 * (`RankSnapshot.frame`), for the agent's column merge.
 */
import type { KeyState } from "../../core/collector.js";
import { checkReplyFrameHeader, reportIgnored, transportStats, type RankMessage } from "../protocol/messages.js";
import type { RankSnapshot } from "../protocol/types.js";
import { frameKeyStates, readFrameHeader, StateDecoder, WireFormatError, type DecodedFrame } from "../wire/codec.js";

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
          reportIgnored("foreign", `a flush-answer frame came from ${rankName}, which is not registered here, while the key tables of ${MAX_ORPHAN_RANKS} unregistered ranks are already held`);
          return undefined;
        }
        decoder = new StateDecoder();
        this.decoders.set(rankName, decoder);
      }
      const frame = decoder.decode(data);
      if (frame.tableGap) this.resync.add(rankName);
      if (frame.unknownKeys > 0) {
        reportIgnored("late", `rank ${rankName}'s answer to flush(${header.step}) names ${frame.unknownKeys} keys whose definitions were lost with an earlier frame; it is asked to send that answer again, in JSON`);
        this.askResend(rankName, header.id, header.seq);
        return undefined;
      }
      return { t: "reply", id: header.id, rankName, ok: true, snapshot: new FramedSnapshot(rankName, header.step, header.seq, header.dropped, frame) };
    } catch (error) {
      if (!(error instanceof WireFormatError)) throw error;
      reportIgnored(error.kind, `a flush-answer frame from ${from} ${error.kind === "malformed" ? "cannot be read" : "is refused"} (${error.message})`);
      return undefined;
    }
  }
}

/**
 * A flush answer that came as a wire frame: its states stay in the frame's columns (a host agent
 * merges them as they are, `FrameMerger`) until someone reads `states`.
 */
export class FramedSnapshot implements RankSnapshot {
  private built: readonly KeyState[] | undefined;
  constructor(
    readonly rankName: string,
    readonly step: number,
    readonly seq: number,
    readonly droppedKeyRecords: number,
    readonly frame: DecodedFrame,
  ) {}
  get states(): readonly KeyState[] {
    return (this.built ??= frameKeyStates(this.frame, false));
  }
}
