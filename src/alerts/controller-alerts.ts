/**
 * The controller's alerts: the engine (rules and watchdog), the user's `alert()` calls, and where
 * every event goes — the text log (`logs/main.log`, `logs/merged.log`; a firing also as one line
 * on stderr, its end in the files only, so an episode is one line on the console), the run's
 * backends that record alerts (the store: the dashboard's banner and Alerts tab), and the
 * webhook. Nothing here waits: events are handed on synchronously (the webhook has its own queue
 * and sender), so alerts never delay a flush.
 */
import type { AlertEvent, UserAlertCall } from "../core/alert.js";
import { registerDrain } from "../core/lifecycle.js";
import { CONSOLE_ROUTE, getLogger, type ConsoleRoute } from "../textlog/logger.js";
import { AlertEngine, textLogLevel, type FlushObservation } from "./engine.js";
import { resolveAlertOptions, type AlertOptions, type ResolvedAlertOptions } from "./options.js";
import { handleUserAlerts } from "./user-alert.js";
import { formatValue } from "./rules.js";
import { WebhookSender, type WebhookStats } from "./webhook.js";

/** What alerts did since the logger started (`MetricLogger.alertStats()`). */
export interface AlertStats {
  /** Rule firings sent (recorded and delivered). */
  readonly fired: number;
  /** Resolves sent. */
  readonly resolved: number;
  /** Episodes still firing when the run ended (`shutdown()`), closed as `ended`. */
  readonly ended: number;
  /** Episodes a rate limit held back (recorded in these counts only, not sent). */
  readonly suppressed: number;
  /** `alert()` calls delivered. */
  readonly user: number;
  /** The webhook's counts, when one is set. */
  readonly webhook?: WebhookStats;
}

/** The component alerts are written under in the text log. */
const ALERTS_LOG_COMPONENT = "rankscope.alerts";

/** Events kept for the backends until they start (more are in the text log and the webhook only). */
const MAX_UNRECORDED = 1000;

/** The controller's alerts for one logger. */
export class ControllerAlerts {
  private readonly engine: AlertEngine;
  private readonly webhook: WebhookSender | null;
  private readonly stopUserAlerts: () => void;
  private readonly unregisterDrain: () => void;
  private userAlerts = 0;
  private closed = false;
  /** Hands an event to the backends that record alerts, once they exist (`recordWith`). */
  private record: ((event: AlertEvent) => void) | null = null;
  /** Events raised before then (flushes before `initBackends`), recorded when they exist. */
  private unrecorded: AlertEvent[] = [];

  constructor(
    readonly options: ResolvedAlertOptions,
    run: string,
  ) {
    this.engine = new AlertEngine(run, options, (events) => this.deliver(events));
    this.webhook =
      options.webhook === undefined
        ? null
        : new WebhookSender({
            url: options.webhook,
            format: options.webhookFormat,
            deadlineMs: options.webhookDeadlineMs,
            retryMs: options.webhookRetryMs,
            capacity: options.webhookQueue,
          });
    this.stopUserAlerts = handleUserAlerts((call) => this.user(call));
    // Through the lifecycle: at a signal or beforeExit the watchdog stops and the webhook gets the
    // time left to send what is queued; at exit what is still queued is counted undelivered.
    this.unregisterDrain = registerDrain({
      name: "alerts (watchdog, webhook)",
      stage: "sink",
      drain: ({ deadline }) => this.close(Math.max(1, deadline - Date.now() - 100)),
      exit: () => {
        this.engine.close();
        this.webhook?.closeSync("the process exited before the webhook took it");
      },
    });
  }

  /** Alerts for a logger: its `alerts` option (see `resolveAlertOptions`) and its run's name. */
  static create(
    options: AlertOptions | false | undefined,
    run: { readonly experiment: string; readonly trial: string },
  ): ControllerAlerts {
    return new ControllerAlerts(resolveAlertOptions(options), `${run.experiment}/${run.trial}`);
  }

  /** Record events in the run through `record` (the logger's backends) from now on, those raised before first. */
  recordWith(record: (event: AlertEvent) => void): void {
    this.record = record;
    for (const event of this.unrecorded.splice(0)) record(event);
  }

  /** Judge one flush and deliver what it raised; returns those events. */
  observeFlush(observation: FlushObservation): AlertEvent[] {
    const events = this.engine.observeFlush(observation);
    if (events.length > 0) this.deliver(events);
    return events;
  }

  /** A rank's `alert()` calls, carried by its flush answer. */
  userCalls(calls: readonly UserAlertCall[]): void {
    for (const call of calls) this.user(call);
  }

  /** Alerts the webhook missed since the last call; undefined while it has never missed one (no key logged then). */
  takeUndelivered(): number | undefined {
    if (this.webhook === null || this.webhook.stats.undelivered === 0) return undefined;
    return this.webhook.takeUndelivered();
  }

  stats(): AlertStats {
    const counts = this.engine.counts;
    return {
      fired: counts.fired,
      resolved: counts.resolved,
      ended: counts.ended,
      suppressed: counts.suppressed,
      user: this.userAlerts,
      ...(this.webhook === null ? {} : { webhook: this.webhook.stats }),
    };
  }

  /**
   * The run ended (`shutdown()`, before the backends finish): every episode still firing is
   * closed as `ended` and delivered, so a finished run shows none as firing. Judging stops.
   */
  endRun(): void {
    if (this.closed) return;
    const events = this.engine.endRun();
    if (events.length > 0) this.deliver(events);
  }

  /** Stop judging, and give the webhook up to `deadlineMs` to send what is queued (the rest is counted). */
  async close(deadlineMs: number): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.engine.close();
    this.stopUserAlerts();
    this.unregisterDrain();
    await this.webhook?.close(deadlineMs);
  }

  private user(call: UserAlertCall): void {
    this.userAlerts++;
    this.deliver([this.engine.userAlert(call)]);
  }

  private deliver(events: readonly AlertEvent[]): void {
    const log = getLogger(ALERTS_LOG_COMPONENT);
    for (const event of events) {
      // One console line per episode, on stderr: its firing; its end is in the log files.
      const route: ConsoleRoute = event.state === "firing" ? "stderr" : "none";
      const fields = {
        [CONSOLE_ROUTE]: route,
        rule: event.rule,
        ...(event.step === null ? {} : { step: event.step }),
        ...(event.key === undefined ? {} : { key: event.key }),
        ...(event.rankName === undefined ? {} : { rank: event.rankName }),
        ...(event.host === undefined ? {} : { host: event.host }),
        ...(event.value === undefined ? {} : { value: formatValue(event.value) }),
      };
      log[textLogLevel(event.level)](
        fields,
        `alert ${event.state === "firing" ? "FIRING" : event.state} ${event.id}: ${event.message}`,
      );
      if (this.record !== null) this.record(event);
      else if (this.unrecorded.length < MAX_UNRECORDED) this.unrecorded.push(event);
      this.webhook?.push(event);
    }
  }
}
