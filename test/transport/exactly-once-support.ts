/**
 * What the exactly-once drills share (test/transport/host/exactly-once.test.ts,
 * test/transport/nats-node-loss.test.ts, the rack tests of test/transport/rack/): ranks joined over
 * NATS in the test process, each adding what the test records to a `values` sum; a flusher that
 * checks that every flush naming no rank missing holds every value recorded before it; a
 * receiver's connection that drops the next answers it is told to; the controller serving host
 * agents (or rack agents), host agents under racks, and agent processes started and killed.
 */
import assert from "node:assert/strict";
import { connect } from "@nats-io/transport-node";
import { Collector } from "../../src/core/collector.js";
import type { MetricLogger } from "../../src/controller/metric-logger.js";
import { RankRuntime } from "../../src/pipeline/runtime.js";
import { startHostAgent, type HostAgent } from "../../src/transport/host/agent.js";
import { HostServer } from "../../src/transport/host/server.js";
import { RunKey } from "../../src/transport/protocol/seal.js";
import { SealedNats, type OpenedMessage } from "../../src/transport/protocol/sealed-nats.js";
import { joinOverNats } from "../../src/transport/rank/nats.js";
import { RankAgent } from "../../src/transport/rank/rank-agent.js";
import { isWireFrame } from "../../src/transport/wire/codec.js";
import { waitFor, within } from "../helpers.js";
import { startChild, type TestChild } from "./support.js";

/** A receiver's connection that drops the next `dropping` answers (wire frames) it receives: a NATS node dying with them. */
export class DroppingNats extends SealedNats {
  dropping = 0;
  dropped = 0;

  override subscribe(subject: string, handler: (message: OpenedMessage) => void): ReturnType<SealedNats["subscribe"]> {
    return super.subscribe(subject, (message) => {
      if (this.dropping > 0 && isWireFrame(message.data)) {
        this.dropping--;
        this.dropped++;
        return;
      }
      handler(message);
    });
  }
}

/** A connection of `logger`'s run to `url`, dropping what the test tells it to. */
export async function droppingConnection(url: string, logger: MetricLogger): Promise<DroppingNats> {
  return new DroppingNats(await connect({ servers: url }), RunKey.derive(logger.runSecret, logger.runId));
}

/** The controller serving host (or rack) agents on `url`, over a connection that drops what the test tells it to. */
export async function serveHosts(
  url: string,
  logger: MetricLogger,
  maxMissedFlushes: number,
): Promise<{ hosts: HostServer; toController: DroppingNats }> {
  const toController = await droppingConnection(url, logger);
  const hosts = new HostServer(url, logger.runId, toController, logger, maxMissedFlushes);
  logger.onShutdown(() => hosts.close());
  return { hosts, toController };
}

/** Two ranks joined by `ExactRun.joinRanks`. */
export interface JoinedRanks {
  /** Their agents, rank 0's first. */
  readonly agents: readonly RankAgent[];
  /** Add `value` to each rank's `values` sum. */
  record(value: number): void;
  leave(): Promise<void>;
}

/** How `ExactRun.joinRanks` joins its ranks. */
export interface JoinOptions {
  /** The host agent they join (`scope`); default: the controller. */
  readonly scope?: string;
  /** The NATS URL(s) they join on; default: the run's. */
  readonly url?: string;
  /** Default 20 s. */
  readonly joinDeadlineMs?: number;
  /** Make each rank's agent; default: a `RankAgent`. */
  readonly agent?: (options: ConstructorParameters<typeof RankAgent>[0]) => RankAgent;
}

/**
 * A drill's run: its ranks (in this process, each adding what is recorded to a `values` sum), what
 * was recorded and what the flushes logged. Every flush that names no rank missing (and, with
 * `expected`, expects that many ranks) must hold every value recorded before it.
 */
export class ExactRun {
  private readonly joined: JoinedRanks[] = [];
  private step = 0;
  /** The `values` sum the flushes logged so far. */
  logged = 0;
  /** The `values` sum recorded so far, over every rank. */
  recorded = 0;

  constructor(
    readonly logger: MetricLogger,
    readonly url: string,
    private readonly expected?: number,
  ) {}

  /** Two ranks `<processName>_<scope or "direct">_r0` and `_r1` in this process, joined over NATS. */
  async joinRanks(processName: string, options: JoinOptions = {}): Promise<JoinedRanks> {
    const { scope } = options;
    const ranks = await Promise.all(
      [0, 1].map(async (local) => {
        const identity = {
          rank: local,
          rankName: `${processName}_${scope ?? "direct"}_r${local}`,
          processName,
          localRank: local,
          localWorldSize: 2,
        };
        const collector = new Collector();
        const init = { runId: this.logger.runId, runtime: new RankRuntime(identity, collector) };
        const agent = options.agent?.(init) ?? new RankAgent(init);
        const leave = await joinOverNats(agent, {
          url: options.url ?? this.url,
          runId: this.logger.runId,
          runSecret: this.logger.runSecret,
          joinDeadlineMs: options.joinDeadlineMs ?? 20_000,
          ...(scope === undefined ? {} : { scope }),
        });
        return { agent, collector, leave };
      }),
    );
    const joined: JoinedRanks = {
      agents: ranks.map((r) => r.agent),
      record: (value) => ranks.forEach((r) => r.collector.recordSlow("values", value, "sum")),
      leave: async () => void (await Promise.all(ranks.map((r) => r.leave("the test is over")))),
    };
    this.joined.push(joined);
    return joined;
  }

  /** Add `value` to every rank's `values` sum. */
  record(value: number): void {
    for (const ranks of this.joined) {
      ranks.record(value);
      this.recorded += ranks.agents.length * value;
    }
  }

  /** Flush; the ranks named missing (with `expected`: a stand-in while fewer ranks are expected). */
  async flush(): Promise<readonly string[]> {
    const result = await this.logger.flush(this.step++);
    this.logged += result.metrics.find((m) => m.key === "values")?.value ?? 0;
    const everyRank = this.expected === undefined || result.ranksExpected === this.expected;
    if (result.missingRanks.length === 0 && everyRank)
      assert.equal(this.logged, this.recorded, `flush(${result.step}) reports every rank: it holds every value`);
    // A replacement rack agent's hosts register again one by one: until all have, fewer are expected.
    return everyRank ? result.missingRanks : ["(not every rank expected yet)"];
  }

  /** Flush until a flush names no rank missing. */
  complete(what: string, timeoutMs = 60_000): Promise<boolean> {
    return waitFor(async () => (await this.flush()).length === 0, { timeoutMs, what });
  }

  /** Every rank joined leaves. */
  async leave(): Promise<void> {
    await Promise.all(this.joined.map((r) => r.leave()));
  }
}

/** A host agent for each host of `racks` (host id → rack id), each with its two ranks joined; each agent is added to `agents` once started. */
export async function hostsUnderRacks(
  run: ExactRun,
  racks: Readonly<Record<string, string>>,
  processName: string,
  agents: HostAgent[] = [],
): Promise<HostAgent[]> {
  const { url, logger } = run;
  for (const [hostId, rackId] of Object.entries(racks)) {
    agents.push(await startHostAgent({ url, runId: logger.runId, runSecret: logger.runSecret, hostId, rackId }));
    await run.joinRanks(processName, { scope: hostId });
  }
  return agents;
}

/** The environment of an agent's process (transport/host/main, transport/rack/main) joining `logger`'s run on `url`. */
export function agentEnv(url: string, logger: MetricLogger, env: Record<string, string>): Record<string, string> {
  return {
    RANKSCOPE_NATS_URL: url,
    RANKSCOPE_RUN_ID: logger.runId,
    RANKSCOPE_RUN_SECRET: logger.runSecret,
    ...env,
  };
}

/** The rack agent's process, on the sources (under tsx). */
const RACK_MAIN = new URL("../../src/transport/rack/main.ts", import.meta.url);

/** Start the process of rack `rackId`'s agent for `logger`'s run on `url`, under the rack agent `parent` (default: the controller); added to `children`. */
export function rackProcess(
  url: string,
  logger: MetricLogger,
  children: TestChild[],
  rackId: string,
  parent?: string,
): TestChild {
  const env = agentEnv(url, logger, {
    RANKSCOPE_RACK_ID: rackId,
    ...(parent === undefined ? {} : { RANKSCOPE_PARENT_RACK_ID: parent }),
  });
  return startChild(RACK_MAIN, env, children);
}

/** SIGKILL an agent's process (continued first, should it be stopped) and wait until it exited. */
export async function killAgent(agent: TestChild, what: string): Promise<void> {
  agent.process.kill("SIGCONT");
  agent.process.kill("SIGKILL");
  await within(agent.exited, { timeoutMs: 10_000, what });
}
