/**
 * The NATS client, `@nats-io/transport-node`: an optional peer dependency of rankscope, loaded when a
 * NATS module is first evaluated (`rankscope/nats`, `rankscope/host`, `joinRun` with a NATS URL).
 * Without it, that load throws an error naming `npm install @nats-io/transport-node@…`
 * (core/optional-packages.ts). Types come from `import type` in each module.
 */
import { requireOptional } from "../../core/optional-packages.js";

/** `@nats-io/transport-node`'s exports. */
export const nats = requireOptional<typeof import("@nats-io/transport-node")>("nats", "@nats-io/transport-node");
