/**
 * The eviction of idle sessions: one timer per runtime over the sessions in the order of their
 * latest activity (internal; docs/architecture.md, "The actor tree").
 *
 * @module
 */
import { unrefTimer, type Clock } from '../clock.js';

/** @internal A session as its eviction sees it (a `SessionHost`). */
export interface EvictableSession {
  /** Clock time (ms) of the session's latest activity (a prepare, a start, a settlement). */
  touchedAt: number;
  /** No active run, none queued, no child at all: it may be stopped. */
  readonly idle: boolean;
}

/** @internal What {@link SessionEviction} asks of its runtime. */
export interface EvictionHooks {
  /** Stops an idle session and forgets it. */
  evict(session: EvictableSession): void;
  /** Whether a timer may be armed now (not while the runtime shuts down). */
  canArm(): boolean;
}

/**
 * @internal Stops each session idle for `idleTtlMs` since its latest activity.
 *
 * @remarks One timer for all sessions, not one per session (a `Timeout` armed for every new
 * session and held for `idleTtlMs`, a cost of the workloads that open many sessions). Sessions are
 * listed in the order
 * of their latest activity, so the least recently touched one is first and the timer is armed for
 * its due time. When it fires, every session due is taken off the list: an idle one is evicted,
 * a busy one is left alone until its next activity lists it again. A session is thus stopped at
 * the same time as with a timer of its own: `idleTtlMs` after its last activity, once idle.
 */
export class SessionEviction {
  readonly #clock: Clock;
  readonly #idleTtlMs: number;
  readonly #hooks: EvictionHooks;
  /** The listed sessions, least recently touched first (a `Set` keeps insertion order). */
  readonly #order = new Set<EvictableSession>();
  #timer: unknown;

  /**
   * @param clock - the runtime's clock
   * @param idleTtlMs - how long a session stays after its latest activity once idle (ms)
   * @param hooks - how to evict a session, and whether a timer may be armed now
   */
  constructor(clock: Clock, idleTtlMs: number, hooks: EvictionHooks) {
    this.#clock = clock;
    this.#idleTtlMs = idleTtlMs;
    this.#hooks = hooks;
  }

  /** Notes activity in `session` now: it goes last in the order, and the timer is armed. */
  touch(session: EvictableSession): void {
    session.touchedAt = this.#clock.now();
    this.#order.delete(session);
    this.#order.add(session);
    if (this.#timer === undefined) this.#arm(this.#idleTtlMs);
  }

  /** Disarms the timer (the runtime shuts down and stops its sessions itself). */
  stop(): void {
    if (this.#timer === undefined) return;
    this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #arm(delayMs: number): void {
    if (!this.#hooks.canArm()) return;
    this.#timer = this.#clock.setTimeout(() => this.#fire(), delayMs);
    // Housekeeping never keeps the process alive on its own.
    unrefTimer(this.#timer);
  }

  #fire(): void {
    this.#timer = undefined;
    const now = this.#clock.now();
    for (const session of this.#order) {
      const idleForMs = now - session.touchedAt;
      if (idleForMs < this.#idleTtlMs) {
        this.#arm(this.#idleTtlMs - idleForMs);
        return;
      }
      this.#order.delete(session);
      if (session.idle) this.#hooks.evict(session);
    }
  }
}
