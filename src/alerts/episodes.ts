/**
 * Episodes: one alert per rule and subject (a key, a rank, or the job) from the moment its
 * condition starts (`firing`) to the moment it ends (`resolved`), or the run ends with it still
 * open (`ended`), whatever happens in between.
 * Rate limits apply to firings: a subject that fired less than `minIntervalMs` ago, or a firing
 * past `maxPerMinute` for all rules together, opens its episode *suppressed* — recorded here and
 * counted, not sent — and its end is then not sent either, so every sent firing has its one
 * resolve and nothing else.
 */
import type { AlertEvent, AlertLevel } from "../core/alert.js";

/** Who an episode is about: a key, a rank, or neither (the job: `stalled`). */
export interface AlertSubject {
  readonly key?: string;
  readonly rank?: number;
  readonly rankName?: string;
  readonly host?: string;
}

/** The rule an episode belongs to. */
export interface EpisodeRule {
  /** Tells rules apart in the bookkeeping (two rules may share a name for different keys). */
  readonly index: number;
  readonly name: string;
  readonly level: AlertLevel;
}

/** What happened, for the event. */
export interface EpisodeDetail {
  readonly step: number | null;
  readonly at: number;
  readonly message: string;
  readonly value?: number;
}

interface OpenEpisode {
  readonly id: string;
  readonly rule: EpisodeRule;
  /** False when the rate limit held its firing back (its resolve is then not sent either). */
  readonly sent: boolean;
  readonly subject: AlertSubject;
}

/** Counts since the engine started. */
export interface EpisodeCounts {
  /** Firings sent (recorded and delivered). */
  fired: number;
  /** Resolves sent. */
  resolved: number;
  /** Episodes still firing when the run ended, closed as `ended` (sent). */
  ended: number;
  /** Episodes opened while a rate limit held their firing back. */
  suppressed: number;
}

const MINUTE_MS = 60_000;

/** The episodes of every rule. */
export class Episodes {
  private readonly open = new Map<string, OpenEpisode>();
  /** When each rule and subject last fired (sent), for `minIntervalMs`. */
  private readonly lastFired = new Map<string, number>();
  /** Times of the firings sent in the last minute, oldest first. */
  private readonly recentFirings: number[] = [];
  private sequence = 0;
  readonly counts: EpisodeCounts = { fired: 0, resolved: 0, ended: 0, suppressed: 0 };

  constructor(
    private readonly run: string,
    private readonly limits: { readonly minIntervalMs: number; readonly maxPerMinute: number },
  ) {}

  /** True while an episode of `rule` about `subjectKey` is open. */
  isOpen(rule: EpisodeRule, subjectKey: string): boolean {
    return this.open.has(slot(rule, subjectKey));
  }

  /** The subjects of `rule`'s open episodes. */
  openSubjects(rule: EpisodeRule): AlertSubject[] {
    const prefix = `${rule.index}\u0000`;
    const out: AlertSubject[] = [];
    for (const [s, episode] of this.open) if (s.startsWith(prefix)) out.push(episode.subject);
    return out;
  }

  /**
   * The condition started: open an episode (no-op if one is open). Returns the `firing` event
   * to send, or undefined when none is sent (already open, or held back by a rate limit).
   */
  start(rule: EpisodeRule, subjectKey: string, subject: AlertSubject, detail: EpisodeDetail): AlertEvent | undefined {
    const s = slot(rule, subjectKey);
    if (this.open.has(s)) return undefined;
    const id = `${rule.name}:${subjectKey === "" ? "job" : subjectKey}#${++this.sequence}`;
    const sent = this.allowFiring(s, detail.at);
    this.open.set(s, { id, rule, sent, subject });
    if (!sent) {
      this.counts.suppressed++;
      return undefined;
    }
    this.counts.fired++;
    return this.event(id, rule, subject, detail, "firing");
  }

  /** The condition ended: close the episode. Returns the `resolved` event when its firing was sent. */
  end(rule: EpisodeRule, subjectKey: string, detail: EpisodeDetail): AlertEvent | undefined {
    const s = slot(rule, subjectKey);
    const episode = this.open.get(s);
    if (episode === undefined) return undefined;
    this.open.delete(s);
    if (!episode.sent) return undefined;
    this.counts.resolved++;
    return this.event(episode.id, rule, episode.subject, detail, "resolved");
  }

  /**
   * The run ended: close every open episode. Returns an `ended` event for each whose firing was
   * sent (`detail` words it), in the order they opened.
   */
  endAll(detail: (subject: AlertSubject) => EpisodeDetail): AlertEvent[] {
    const events: AlertEvent[] = [];
    for (const episode of this.open.values()) {
      if (!episode.sent) continue;
      this.counts.ended++;
      events.push(this.event(episode.id, episode.rule, episode.subject, detail(episode.subject), "ended"));
    }
    this.open.clear();
    return events;
  }

  /** A one-off event (a user's `alert()`): no episode, never rate limited (the user asked for it). */
  single(
    rule: Omit<EpisodeRule, "index">,
    subject: AlertSubject,
    detail: EpisodeDetail & { readonly title?: string },
  ): AlertEvent {
    const id = `${rule.name}#${++this.sequence}`;
    const event = this.event(id, { ...rule, index: -1 }, subject, detail, "firing");
    return detail.title === undefined ? event : { ...event, title: detail.title };
  }

  /** Firings sent in the last minute and the subject's last firing, against the limits; notes a firing allowed. */
  private allowFiring(s: string, at: number): boolean {
    const last = this.lastFired.get(s);
    if (last !== undefined && at - last < this.limits.minIntervalMs) return false;
    const recent = this.recentFirings;
    while (recent.length > 0 && at - (recent[0] ?? at) >= MINUTE_MS) recent.shift();
    if (recent.length >= this.limits.maxPerMinute) return false;
    recent.push(at);
    this.lastFired.set(s, at);
    return true;
  }

  private event(
    id: string,
    rule: EpisodeRule,
    subject: AlertSubject,
    detail: EpisodeDetail,
    state: AlertEvent["state"],
  ): AlertEvent {
    return {
      id,
      rule: rule.name,
      level: rule.level,
      run: this.run,
      step: detail.step,
      ...subject,
      ...(detail.value === undefined ? {} : { value: detail.value }),
      message: detail.message,
      state,
      at: detail.at,
    };
  }
}

function slot(rule: EpisodeRule, subjectKey: string): string {
  return `${rule.index}\u0000${subjectKey}`;
}
