/**
 * A session's root actor and the runtime's bookkeeping about it (internal).
 *
 * @module
 */
import { createActor, type Actor, type AnyActorRef } from 'xstate';
import { runSystemId } from '../../machines/run.machine.js';
import type { sessionMachine } from '../../machines/session.machine.js';
import type { SessionKey } from '../events/event-log.js';
import type { SlotWaiter } from '../runtime/run-slots.js';
import type { EvictableSession } from '../runtime/session-eviction.js';

/** The session machine with the runtime's actors and actions provided. */
export type BoundSessionMachine = typeof sessionMachine;

/** @internal A session's root actor (the parent of its runs) and its bookkeeping. */
export class SessionHost implements SlotWaiter, EvictableSession {
  readonly actor: Actor<BoundSessionMachine>;
  /** Clock time (ms) of the session's latest prepare, start or settlement. */
  touchedAt = 0;

  constructor(
    readonly key: SessionKey,
    machine: BoundSessionMachine,
    maxQueuedRuns: number,
    actorOptions: Pick<Parameters<typeof createActor>[1] & object, 'clock' | 'inspect'>,
    onError: (error: unknown) => void,
  ) {
    this.actor = createActor(machine, {
      clock: actorOptions.clock,
      inspect: actorOptions.inspect,
      systemId: `session:${key.ownerId}/${key.sessionId}`,
      input: { ownerId: key.ownerId, sessionId: key.sessionId, maxQueuedRuns },
    });
    this.actor.subscribe({ error: onError });
    this.actor.start();
  }

  /** The runtime's gate granted this session a run slot. */
  grantSlot(): void {
    this.actor.send({ type: 'session.slot_granted' });
  }

  /** The actor of run `runId` (a session run or a nested one), while it has not settled. */
  runActor(runId: string): AnyActorRef | undefined {
    return this.actor.system.get(runSystemId(runId)) as AnyActorRef | undefined;
  }

  get activeRunId(): string | undefined {
    return this.actor.getSnapshot().context.activeRunId;
  }

  get queuedRunIds(): string[] {
    return this.actor.getSnapshot().context.queue.toArray();
  }

  /** Not idle: a `reject` start is refused (the session machine's rule, read from its state). */
  get busy(): boolean {
    return this.actor.getSnapshot().value !== 'idle';
  }

  /** No active run, none queued and no child at all: the session may be evicted. */
  get idle(): boolean {
    const snapshot = this.actor.getSnapshot();
    return snapshot.value === 'idle' && snapshot.context.children.size === 0;
  }

  /** Resolves once the session has no active and no queued run. */
  onIdle(): Promise<void> {
    const quiet = () => this.actor.getSnapshot().value === 'idle';
    if (quiet()) return Promise.resolve();
    return new Promise((resolve) => {
      const subscription = this.actor.subscribe((snapshot) => {
        if (snapshot.value === 'idle') {
          subscription.unsubscribe();
          resolve();
        }
      });
    });
  }
}
