/**
 * The run secret: what the controller, its ranks and host agents share so that, over NATS, each
 * trusts only messages that prove they come from the run (`transport/protocol/seal.ts`).
 *
 * The controller makes one per run (or takes `runSecret` / `RANKSCOPE_RUN_SECRET`) and hands it to
 * the ranks it starts in their assignment (an environment variable, never a command line); ranks
 * and agents that join on their own read it from the same option or variable. It is a secret: no
 * message, log or error shows it.
 */
import { randomBytes } from "node:crypto";
import type { Setting, SettingKind } from "./settings.js";

/** The environment variable carrying the run secret. */
const RUN_SECRET_ENV = "RANKSCOPE_RUN_SECRET";

/** At least 128 bits as text: 32 printable characters (`openssl rand -hex 16`), no spaces. */
const SECRET = /^[\x21-\x7e]{32,1024}$/;

const runSecretKind: SettingKind<string> = {
  valid: "32 to 1024 printable characters without spaces (for instance the output of `openssl rand -base64 32`)",
  fromOption: (v) => (typeof v === "string" && SECRET.test(v) ? v : undefined),
  fromEnv: (raw) => (SECRET.test(raw) ? raw : undefined),
};

/** The run-secret setting of `owner` (the logger, `joinRun`, the host agent): option, else `RANKSCOPE_RUN_SECRET`. */
export function runSecretSetting(owner: string): Setting<string | undefined> {
  return { owner, option: "runSecret", env: RUN_SECRET_ENV, kind: runSecretKind, fallback: undefined, secret: true };
}

/** A fresh run secret (256 random bits). */
export function newRunSecret(): string {
  return randomBytes(32).toString("base64url");
}
