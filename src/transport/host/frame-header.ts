/**
 * Reading a host agent's answer frame far enough to know whose it is: its JSON header, checked
 * (envelope, run, a well-formed `hostStates` header), before the sender's decoder reads its states.
 */
import { describeError } from "../../core/diagnostics.js";
import { checkEnvelope, reportIgnored } from "../protocol/messages.js";
import { isWireFrame, WireFormatError } from "../wire/codec.js";
import { validateHostStatesHeader, type HostStatesHeader } from "./messages.js";

/** The checked header of a host's answer frame; undefined (counted, reported) when it is not one of this run. */
export function checkedHostFrame(runId: string, data: Uint8Array, from: string): HostStatesHeader | undefined {
  if (!isWireFrame(data)) {
    reportIgnored("malformed", `a message from ${from} is not a host states frame`);
    return undefined;
  }
  let header: Record<string, unknown>;
  try {
    header = peekHeader(data);
  } catch (error) {
    reportIgnored("malformed", `a frame from ${from} cannot be read (${describeError(error)})`);
    return undefined;
  }
  if (!checkEnvelope(runId, header, from)) return undefined;
  const problem = validateHostStatesHeader(header);
  if (problem !== undefined) {
    const { kind, detail } = typeof problem === "string" ? { kind: "malformed" as const, detail: problem } : problem;
    reportIgnored(kind, `a frame from ${from} is ${kind === "malformed" ? "malformed" : "refused"} (${detail})`);
    return undefined;
  }
  return header as unknown as HostStatesHeader;
}

/** The JSON header of a frame, without decoding its states (to find which host's decoder reads it). */
function peekHeader(data: Uint8Array): Record<string, unknown> {
  if (data.length < 20) throw new WireFormatError("shorter than a frame header");
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const length = view.getUint32(16, true);
  if (20 + length > data.length) throw new WireFormatError("the header runs past the end of the frame");
  const value: unknown = JSON.parse(Buffer.from(data.buffer, data.byteOffset + 20, length).toString("utf8"));
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new WireFormatError("the header is not an object");
  return value as Record<string, unknown>;
}
