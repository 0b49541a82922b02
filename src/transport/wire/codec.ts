/**
 * The compact binary wire format for accumulator states (wire version 2): one import for its
 * parts. `format.ts` describes the byte layout; `encoder.ts` writes frames (from states, or
 * straight from a collector's accumulators); `decoder.ts` reads them into columns; `merge.ts`
 * merges decoded frames column by column.
 */
export {
  isWireFrame,
  readFrameHeader,
  SectionKind,
  WIRE_VERSION,
  WireFormatError,
  type FrameHeader,
  type KeyTable,
} from "./format.js";
export { StateEncoder } from "./encoder.js";
export { frameKeyStates, StateDecoder, type DecodedFrame, type DecodedSection } from "./decoder.js";
export { FrameMerger } from "./merge.js";
