/**
 * What a host agent and a rack agent share (docs/scale.md, "A deeper tree"): their options
 * checked and their NATS connection made (the role's credentials, the run's secret), the link
 * upwards, leaving the run once (`close`, `closed`), what they did (`stats`), and a flush's answer
 * sent up and counted.
 */
import { describeError, reportError } from "../../core/diagnostics.js";
import type { KeyState } from "../../core/key-state.js";
import { runSecretSetting } from "../../core/run-secret.js";
import { resolveSetting } from "../../core/settings.js";
import { connectTo } from "../controller/nats-connection.js";
import { assertSubjectToken } from "../protocol/identity.js";
import { resolveNatsAuth, type NatsAuthOptions } from "../protocol/nats-auth.js";
import { RunKey } from "../protocol/seal.js";
import { SealedNats } from "../protocol/sealed-nats.js";
import type { KeptHostAnswer } from "./kept-host-answers.js";
import type { HostStatesHeader } from "./messages.js";
import { UpwardLink, type HostFlushRequest } from "./upward.js";

/** Which agent: its role on the wire, and what messages call it (`host agent h1`). */
export type AgentKind = "host" | "rack";

/** What one agent did (for health pages and tests). */
export interface AgentStats {
  flushes: number;
  bytesOut: number;
  /** Flushes in which some of the agent's ranks (at a rack agent, or whole hosts) did not answer in time. */
  incompleteFlushes: number;
}

/** A flush's answer (`hostAnswer`, `rackAnswer`), and whether a rank or host of it did not answer in time. */
export interface AgentAnswer {
  readonly header: Omit<HostStatesHeader, "session"> & { seq: number };
  readonly states: readonly KeyState[];
  readonly incomplete: boolean;
}

/** The options every agent takes: where, which run, how it authenticates and seals. */
export interface AgentConnectOptions {
  readonly url: string;
  readonly auth?: NatsAuthOptions;
  readonly runId: string;
  readonly runSecret?: string;
  readonly joinDeadlineMs?: number;
}

/** A host agent or a rack agent: its link upwards, how it leaves the run, what it did. */
export abstract class UpwardAgent {
  /** Towards the controller (or the rack agent above): registration, acknowledgements, kept answers. */
  protected readonly up: UpwardLink;
  private closing: Promise<void> | undefined;
  private markClosed: (reason: string) => void = () => undefined;
  /** Resolves with the reason once the agent has stopped (shut down from above, or `close`). */
  readonly closed: Promise<string> = new Promise((resolve) => (this.markClosed = resolve));
  readonly stats: AgentStats = { flushes: 0, bytesOut: 0, incompleteFlushes: 0 };

  /** `id`: the agent's own (host or rack id); `parent`: the rack agent it registers with (undefined: the controller). */
  protected constructor(
    private readonly kind: AgentKind,
    protected readonly nc: SealedNats,
    options: AgentConnectOptions,
    id: string,
    parent: string | undefined,
  ) {
    this.up = new UpwardLink(nc, {
      runId: options.runId,
      id,
      parent,
      url: options.url,
      what: `${kind} agent ${id}`,
      joinDeadlineMs: options.joinDeadlineMs ?? 30_000,
    });
  }

  /** Leave the run: tell the level above, then stop serving the level below (`stop`); once. */
  close(reason = `the ${this.kind} agent stopped`): Promise<void> {
    this.closing ??= (async () => {
      this.up.deregister(reason);
      await this.stop();
      this.markClosed(reason);
    })();
    return this.closing;
  }

  /** Stop serving the level below, and close what the agent holds. */
  protected abstract stop(): Promise<void>;

  /**
   * Send `answer` up on `reply` (after the earlier answers not acknowledged yet) and count it;
   * `dropped` takes the answers dropped at the bound (counted lost): what they hold need not be
   * kept below any longer. False, reported, when it could not be sent.
   */
  protected answerUp(
    reply: string,
    request: HostFlushRequest,
    answer: AgentAnswer,
    dropped: (answers: readonly KeptHostAnswer[]) => void,
  ): boolean {
    if (answer.incomplete) this.stats.incompleteFlushes++;
    try {
      dropped(this.up.answer(reply, request, answer.header, answer.states));
      this.stats.flushes++;
      this.stats.bytesOut = this.up.bytesOut;
      return true;
    } catch (error) {
      reportError(
        `${this.kind}.flushAnswer`,
        `${this.kind} agent ${this.up.config.id} could not answer flush(${request.step}): ${describeError(error)}`,
      );
      return false;
    }
  }
}

/** Who connects: the call (for its messages), the role, and the names of its own id's option and its parent's. */
export interface AgentCaller<Id extends string, Parent extends string> {
  readonly call: "startHostAgent" | "startRackAgent";
  readonly role: AgentKind;
  readonly id: Id;
  readonly parent: Parent;
  /** Said after "set RANKSCOPE_RUN_SECRET to the controller's" when there is no run secret. */
  readonly secretHint?: string;
}

/** An agent's connection, and what it was made with. */
export interface AgentConnection {
  /** The URL without credentials (messages show it). */
  readonly url: string;
  readonly nc: SealedNats;
  readonly runSecret: string;
}

/**
 * Check an agent's options (a URL; the run's, the agent's and its parent's ids subject tokens; a
 * run secret, else env `RANKSCOPE_RUN_SECRET`), throwing a TypeError that says what was wrong,
 * then connect to NATS with the role's credentials (every cluster URL, so it fails over).
 */
export async function connectAgent<Id extends string, Parent extends string>(
  options: AgentConnectOptions & { readonly [K in Id]: string } & { readonly [K in Parent]?: string },
  caller: AgentCaller<Id, Parent>,
): Promise<AgentConnection> {
  const { call } = caller;
  if (options === null || typeof options !== "object" || typeof options.url !== "string" || options.url.length === 0) {
    throw new TypeError(`${call} takes { url: "nats://host:port[,nats://…]", runId, ${caller.id} }`);
  }
  assertSubjectToken("runId", options.runId);
  const id = options[caller.id];
  assertSubjectToken(caller.id, id);
  const parent = options[caller.parent];
  if (parent !== undefined) assertSubjectToken(caller.parent, parent);
  const runSecret = resolveSetting(runSecretSetting(call), options.runSecret);
  if (runSecret === undefined) {
    throw new TypeError(
      `${call}: run ${options.runId}'s messages are sealed with its run secret: pass { runSecret } or set RANKSCOPE_RUN_SECRET to the controller's${caller.secretHint ?? ""}`,
    );
  }
  const auth = resolveNatsAuth(call, options.url, options.auth);
  const nc = await connectTo(auth, {
    name: `rankscope-${caller.role}-${options.runId}-${id}`,
    runId: options.runId,
    role: caller.role,
    timeoutMs: options.joinDeadlineMs ?? 30_000,
  });
  return { url: auth.url, nc: new SealedNats(nc, RunKey.derive(runSecret, options.runId)), runSecret };
}

/** Start `agent` (register it); one that could not register is closed and the error thrown. */
export async function startAgent<A extends UpwardAgent & { start(): Promise<void> }>(agent: A): Promise<A> {
  try {
    await agent.start();
  } catch (error) {
    await agent.close("could not register");
    throw error;
  }
  return agent;
}
