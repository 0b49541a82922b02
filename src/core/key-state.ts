/**
 * `KeyState`: one key's accumulator state at a flush, the unit every side exchanges — taken from
 * the collector, carried by every transport (JSON answers and wire frames), merged and reduced in
 * the pipeline. Its own module, so that what handles states depends on this shape and not on the
 * hot-path collector that produces them.
 */
import type { AccumulatorState } from "./reduce.js";

/** The state of one key at a flush, as sent to the controller. */
export interface KeyState {
  readonly key: string;
  readonly reduce: string;
  readonly state: AccumulatorState;
}
