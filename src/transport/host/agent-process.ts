/**
 * An agent's own process (`transport/host/main.js`, `transport/rack/main.js`; docs/scale.md): the
 * settings every agent reads from its environment (`RANKSCOPE_NATS_URL`, `RANKSCOPE_RUN_ID`,
 * `RANKSCOPE_JOIN_DEADLINE_MS`) through the one resolver, exit status 2 for a bad or missing
 * setting, `<agent> <id> ready` once registered, `<agent> <id> left: <reason>` when it stops, and
 * exit status 1 when it cannot start.
 */
import { describeError } from "../../core/diagnostics.js";
import { integerKind, resolveSetting, textKind } from "../../core/settings.js";

/** The settings every agent's process reads. */
export interface AgentProcessSettings {
  readonly url: string;
  readonly runId: string;
  readonly joinDeadlineMs: number;
}

/** What an agent's process reads of its own, and how it starts the agent. */
export interface AgentSettings {
  /** The agent's id (its lines name it); undefined when it is not set and has no default. */
  readonly id: string | undefined;
  /** Start the agent, registered; its `closed` resolves with the reason it stopped. */
  start(settings: AgentProcessSettings, id: string): Promise<{ readonly closed: Promise<string> }>;
}

/** One kind of agent's process. */
export interface AgentProcess {
  /** "host agent", "rack agent": what its lines and messages call it. */
  readonly what: string;
  /** What to set, said when a required setting is missing (`set RANKSCOPE_NATS_URL (…) and …`). */
  readonly unset: string;
  /** Read the agent's own settings with `text` (a variable's text, or undefined when unset); called after the URL and run id. */
  read(text: (env: string) => string | undefined): AgentSettings;
}

/** Run an agent as this process: read its settings, start it, say when it is ready and when it left. */
export async function runAgentProcess(agent: AgentProcess): Promise<void> {
  const { what } = agent;
  const owner = `the ${what}`;
  let url: string | undefined;
  let runId: string | undefined;
  let own: AgentSettings;
  let joinDeadlineMs: number;
  try {
    const text = (env: string): string | undefined =>
      resolveSetting<string | undefined>({ owner, option: env, env, kind: textKind(), fallback: undefined }, undefined);
    url = text("RANKSCOPE_NATS_URL");
    runId = text("RANKSCOPE_RUN_ID");
    own = agent.read(text);
    joinDeadlineMs = resolveSetting(
      {
        owner,
        option: "RANKSCOPE_JOIN_DEADLINE_MS",
        env: "RANKSCOPE_JOIN_DEADLINE_MS",
        kind: integerKind(1),
        fallback: 30_000,
      },
      undefined,
    );
  } catch (error) {
    process.stderr.write(`rankscope ${what}: ${describeError(error)}\n`);
    process.exit(2);
  }
  const { id } = own;
  if (url === undefined || runId === undefined || id === undefined) {
    process.stderr.write(`rankscope ${what}: ${agent.unset}\n`);
    process.exit(2);
  }
  try {
    const started = await own.start({ url, runId, joinDeadlineMs }, id);
    process.stdout.write(`${what} ${id} ready\n`);
    const reason = await started.closed;
    process.stdout.write(`${what} ${id} left: ${reason}\n`);
  } catch (error) {
    process.stderr.write(`rankscope ${what} ${id}: ${describeError(error)}\n`);
    process.exitCode = 1;
  }
}
