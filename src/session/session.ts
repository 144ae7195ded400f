/**
 * A session's live actor and the handle users get from `runtime.session(ownerId, sessionId)`.
 *
 * @module
 */
import { createActor, type Actor } from 'xstate';
import type { sessionMachine } from '../../machines/session.machine.js';
import type { SessionKey } from '../events/event-log.js';
import type { SlotWaiter } from '../runtime/run-slots.js';

/** The session machine with the runtime's actions provided. */
export type BoundSessionMachine = typeof sessionMachine;

/** @internal A session's root actor and its bookkeeping. */
export class SessionHost implements SlotWaiter {
  readonly actor: Actor<BoundSessionMachine>;
  /** Clock handle of the pending idle eviction, if any. */
  evictionTimer: unknown;
  /** Clock time (ms) of the session's latest start, dequeue or settlement. */
  touchedAt = 0;

  constructor(
    readonly key: SessionKey,
    machine: BoundSessionMachine,
    actorOptions: Pick<Parameters<typeof createActor>[1] & object, 'clock' | 'inspect'>,
    onError: (error: unknown) => void,
  ) {
    this.actor = createActor(machine, {
      clock: actorOptions.clock,
      inspect: actorOptions.inspect,
      input: key,
    });
    this.actor.subscribe({ error: onError });
    this.actor.start();
  }

  /** The runtime's gate granted this session a run slot. */
  grantSlot(): void {
    this.actor.send({ type: 'session.slot_granted' });
  }

  get activeRunId(): string | undefined {
    return this.actor.getSnapshot().context.activeRunId;
  }

  get queuedRunIds(): string[] {
    return this.actor.getSnapshot().context.queue.toArray();
  }

  /** Has an active run or a queued one. */
  get busy(): boolean {
    const { context } = this.actor.getSnapshot();
    return context.activeRunId !== undefined || context.queue.size > 0;
  }

  get idle(): boolean {
    return this.actor.getSnapshot().matches('idle');
  }

  /** Resolves once the session has no active and no queued run. */
  onIdle(): Promise<void> {
    if (this.idle) return Promise.resolve();
    return new Promise((resolve) => {
      const subscription = this.actor.subscribe((snapshot) => {
        if (snapshot.matches('idle')) {
          subscription.unsubscribe();
          resolve();
        }
      });
    });
  }
}

/**
 * A session's handle: one conversation's queue of runs (DESIGN.md §6).
 *
 * @remarks A handle stays valid after the session actor was evicted for idleness; it reaches
 * whatever actor is live for its key.
 */
export interface Session {
  readonly ownerId: string;
  readonly sessionId: string;
  /** The RUNNING run admitted by this session, if any. */
  readonly activeRunId: string | undefined;
  /** Runs waiting their turn, in start order. */
  readonly queuedRunIds: string[];
  /**
   * Interrupts the active run. When idle, does nothing and remembers nothing.
   *
   * @returns `'accepted'` when a run was interrupted, else `'idle'`
   */
  interrupt(message?: string): 'accepted' | 'idle';
  /**
   * Cancels every queued run and, with `includeActive`, the active one (cause `cancel`).
   *
   * @returns how many runs this call cancelled
   */
  cancelAll(options?: { includeActive?: boolean }): number;
  /** Resolves once no run is active or queued. */
  onIdle(): Promise<void>;
}
