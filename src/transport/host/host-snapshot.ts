/**
 * A host's (or rack's) flush result whose states stay in its frame's columns: the controller — or
 * the rack agent above — merges it with the flush's other answers straight from the columns
 * (`mergeAll`, as host agents merge their ranks' frames), and builds state objects only if someone
 * reads `states`. One decoded frame per host and flush; its columns are views on the frame's bytes.
 */
import type { UserAlertCall } from "../../core/alert.js";
import type { OffCycleLog, RankGroupSnapshot } from "../../pipeline/rank-handle.js";
import { FramedSnapshot } from "../controller/rank-frames.js";
import type { DecodedFrame } from "../wire/codec.js";

export class FramedHostSnapshot extends FramedSnapshot implements RankGroupSnapshot {
  readonly offCycle?: readonly OffCycleLog[];
  readonly alerts?: readonly UserAlertCall[];

  constructor(
    rankName: string,
    step: number,
    seq: number,
    droppedKeyRecords: number,
    frame: DecodedFrame,
    readonly group: RankGroupSnapshot["group"],
    offCycle: readonly OffCycleLog[],
    alerts: readonly UserAlertCall[],
  ) {
    super(rankName, step, seq, droppedKeyRecords, frame);
    if (offCycle.length > 0) this.offCycle = offCycle;
    if (alerts.length > 0) this.alerts = alerts;
  }
}
