/**
 * The TurnLoop machine on its own: pure helpers and transitions with stub logic (no runtime,
 * no clock, no agent).
 */
import { assign, createActor, fromCallback } from 'xstate';
import { describe, expect, it } from 'vitest';
import { CancelMode } from '../../machines/cancel-request.js';
import { turnMachine } from '../../machines/turn.machine.js';
import { turnLoopMachine } from '../../machines/turn-loop.machine.js';
import {
  mergeDrafts,
  mergeStop,
  preemptCancelRequest,
  stopCancelRequest,
  toPreemptDraft,
} from '../../machines/turn-loop.requests.js';
import type {
  PreemptSpec,
  PushReceipt,
  StopCall,
  TurnCancelCommand,
  TurnPlan,
} from '../../machines/turn-loop.types.js';

const call = (overrides: Partial<StopCall> = {}): StopCall => ({
  mode: 'afterTurn',
  graceMs: undefined,
  idleForMs: undefined,
  cause: undefined,
  skipCheckpoint: false,
  initiator: 'user',
  ...overrides,
});

describe('turn-loop machine helpers', () => {
  it('mergeStop escalates and never de-escalates; first cause wins; skipCheckpoint is sticky', () => {
    let stop = mergeStop(undefined, call({ mode: 'graceful', graceMs: 100, cause: '' }), 10);
    expect(stop).toMatchObject({ mode: 'graceful', graceDeadlineAt: 110, cause: undefined });
    stop = mergeStop(stop, call({ mode: 'afterTurn', cause: 'first', skipCheckpoint: true }), 20);
    expect(stop).toMatchObject({ mode: 'graceful', cause: 'first', skipCheckpoint: true });
    stop = mergeStop(stop, call({ mode: 'graceful', graceMs: 500 }), 30);
    expect(stop.graceDeadlineAt).toBe(110); // the earliest deadline wins
    stop = mergeStop(stop, call({ mode: 'immediate', cause: 'second' }), 40);
    expect(stop).toMatchObject({ mode: 'immediate', cause: 'first', skipCheckpoint: true });
    stop = mergeStop(stop, call({ mode: 'graceful' }), 50);
    expect(stop.mode).toBe('immediate');
  });

  it('a stop carries its initiator to the turn’s cancel; a shutdown escalates past an idle stop', () => {
    const idle = mergeStop(undefined, call({ idleForMs: 1_000 }), 0);
    expect(idle.initiator).toBe('user');
    const shutdown = mergeStop(idle, call({ mode: 'graceful', initiator: 'shutdown' }), 1);
    expect(stopCancelRequest(shutdown)).toMatchObject({ cause: 'cancel', initiator: 'shutdown' });
    // A later stop of the user's does not take the shutdown back.
    expect(mergeStop(shutdown, call({ mode: 'immediate' }), 2).initiator).toBe('shutdown');
  });

  it('stop and preempt cancel requests', () => {
    expect(stopCancelRequest(mergeStop(undefined, call(), 0))).toBeUndefined();
    expect(
      stopCancelRequest(
        mergeStop(undefined, call({ mode: 'graceful', graceMs: 5, cause: 'x' }), 1),
      ),
    ).toEqual({
      mode: CancelMode.AnySafePoint,
      deadlineAt: 6,
      recursive: true,
      cause: 'cancel',
      reason: 'turn loop stopped: x',
      initiator: 'user',
    });
    expect(stopCancelRequest(mergeStop(undefined, call({ mode: 'immediate' }), 1))).toMatchObject({
      mode: CancelMode.Immediate,
      recursive: true,
    });
    // Eino: a preempt is not recursive; a preempt timeout makes it escalate and recursive.
    expect(preemptCancelRequest({ mode: 1, deadlineAt: undefined })).toMatchObject({
      mode: 1,
      deadlineAt: undefined,
      recursive: false,
      cause: 'preempt',
    });
    expect(preemptCancelRequest({ mode: 2, deadlineAt: 10 })).toMatchObject({
      deadlineAt: 10,
      recursive: true,
    });
    expect(mergeDrafts({ mode: 1, deadlineAt: 9 }, { mode: 2, deadlineAt: 4 })).toEqual({
      mode: 3,
      deadlineAt: 4,
    });
    expect(mergeDrafts({ mode: 1, deadlineAt: undefined }, { mode: 1, deadlineAt: 4 })).toEqual({
      mode: 1,
      deadlineAt: 4,
    });
  });

  it('a preempt deadline is fixed at the push (Eino): push time + delay + timeout', () => {
    const spec = (timeoutMs?: number, delayMs?: number): PreemptSpec => ({
      mode: CancelMode.AnySafePoint,
      timeoutMs,
      delayMs,
    });
    expect(toPreemptDraft(spec(), 100).deadlineAt).toBeUndefined();
    expect(toPreemptDraft(spec(50), 100).deadlineAt).toBe(150);
    expect(toPreemptDraft(spec(50, 20), 100).deadlineAt).toBe(170);
  });
});

type Decide = (turnId: string | undefined) => Pick<PushReceipt, 'preempt' | 'outcome'>;

/** The machine with stub logic: plans consume everything, the run starts at once. */
function stubbed() {
  const commands: TurnCancelCommand[] = [];
  const settled: number[] = [];
  /** Strategies by push id, as the runtime keeps them. */
  const strategies = new Map<number, Decide>();
  const plan: TurnPlan = { input: 'in', consumed: ['a'], remaining: [], dropped: [] };
  const machine = turnLoopMachine.provide({
    actors: {
      turn: turnMachine.provide({
        actors: {
          // onAgentEvents still reads: the turn runs until the test says otherwise.
          handleEvents: fromCallback(() => undefined),
        },
        actions: {
          planTurn: ({ self }) => {
            void Promise.resolve().then(() => self.send({ type: 'turn.planned', plan }));
          },
          cancelRun: assign(({ event }) => {
            if (event.type !== 'turn.cancel') return {};
            commands.push(event);
            return { lastCancel: { by: event.by, contributed: true, reason: undefined } };
          }),
        },
      }),
    },
    actions: {
      settleAcks: (_, ids) => settled.push(...ids),
      decidePush: assign(({ context, event }) => {
        if (event.type !== 'loop.push') return {};
        const decide = strategies.get(event.pushId);
        const turnId = context.turn?.phase === 'running' ? context.turn.turnId : undefined;
        const decision =
          decide === undefined
            ? { preempt: event.preempt, outcome: 'accepted' as const }
            : decide(turnId);
        return { lastPush: { pushId: event.pushId, ...decision } };
      }),
    },
  });
  const actor = createActor(machine, {
    input: { hasStore: false, requeuePreempted: false, ownerId: 'o', sessionId: 's', loopId: 'l' },
  });
  actor.start();
  return { actor, commands, settled, strategies };
}

let seq = 0;
const push = (item: unknown, extra: { at?: number; preempt?: PreemptSpec } = {}) => ({
  type: 'loop.push' as const,
  pushId: ++seq,
  item,
  at: extra.at ?? 0,
  preempt: extra.preempt,
});
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('turn-loop machine transitions', () => {
  it('keeps at most 16 context fields (XState copies the context per push; V8 slows down from 20)', () => {
    const { actor } = stubbed();
    expect(Object.keys(actor.getSnapshot().context).length).toBeLessThanOrEqual(16);
  });

  it('buffers pushes before run; a stop before run exits with them unhandled and refuses later pushes', () => {
    const { actor } = stubbed();
    actor.send(push('a'));
    actor.send(push('b'));
    expect(actor.getSnapshot().context.buffer).toEqual(['a', 'b']);
    expect(actor.getSnapshot().value).toEqual({ loop: 'idle', stop: 'open' });
    actor.send({ type: 'loop.stop', at: 0, call: call({ cause: 'bye' }) });
    const snapshot = actor.getSnapshot();
    expect(snapshot.status).toBe('done');
    expect(snapshot.value).toEqual({ loop: 'exited', stop: 'closed' });
    expect(snapshot.context.exit).toMatchObject({ cause: 'stop', unhandled: ['a', 'b'] });
    expect(snapshot.context.buffer).toEqual([]);
  });

  it('a push, its strategy decision (found by push id) and the resulting cancel are one event', async () => {
    const { actor, commands, settled, strategies } = stubbed();
    actor.send({ type: 'loop.run' });
    actor.send(push('a'));
    await tick();
    expect(actor.getSnapshot().value).toEqual({ loop: { turn: 'running' }, stop: 'open' });
    const turnIds: Array<string | undefined> = [];
    const urgent = push('urgent');
    strategies.set(urgent.pushId, (turnId) => {
      turnIds.push(turnId);
      expect(commands).toEqual([]); // decided before any cancel went out
      return {
        preempt: { mode: CancelMode.AnySafePoint, timeoutMs: undefined, delayMs: undefined },
        outcome: 'accepted',
      };
    });
    actor.send(urgent);
    // Right after the single send: decided once, buffered, cancel delivered, ack settled.
    expect(turnIds).toEqual(['turn-1']);
    expect(actor.getSnapshot().context.buffer).toEqual(['urgent']);
    expect(commands).toHaveLength(1);
    expect(commands[0]).toMatchObject({
      type: 'turn.cancel',
      by: 'preempt',
      request: { mode: CancelMode.AnySafePoint, cause: 'preempt' },
    });
    expect(settled).toContain(urgent.pushId);
    const turn = actor.getSnapshot().children.turn?.getSnapshot() as { value: unknown };
    expect(turn.value).toMatchObject({ cancel: 'preempted' });
  });

  it('a withdrawn push (sent re-entrantly) is ignored: no buffer write', () => {
    const { actor, strategies } = stubbed();
    const event = push('x');
    strategies.set(event.pushId, () => ({ preempt: undefined, outcome: 'withdrawn' }));
    actor.send(event);
    expect(actor.getSnapshot().context.buffer).toEqual([]);
    expect(actor.getSnapshot().context.lastPush?.outcome).toBe('withdrawn');
  });

  it('a strategy error refuses the push without touching the buffer', () => {
    const { actor, strategies } = stubbed();
    const error = new Error('nope');
    const event = push('x');
    strategies.set(event.pushId, () => ({ preempt: undefined, outcome: { error } }));
    actor.send(event);
    expect(actor.getSnapshot().context.lastPush?.outcome).toEqual({ error });
    expect(actor.getSnapshot().context.buffer).toEqual([]);
  });

  it('a preempt parked while the turn plans keeps the deadline of its push (Eino)', async () => {
    const { actor, commands } = stubbed();
    actor.send({ type: 'loop.run' });
    actor.send(push('a', { at: 0 }));
    expect(actor.getSnapshot().value).toEqual({ loop: { turn: 'planning' }, stop: 'open' });
    const preempt = { mode: CancelMode.AnySafePoint, timeoutMs: 50, delayMs: undefined };
    actor.send(push('urgent', { at: 100, preempt }));
    expect(actor.getSnapshot().context.turn?.pendingPreempt).toEqual({
      mode: CancelMode.AnySafePoint,
      deadlineAt: 150,
    });
    await tick(); // the turn's run starts (at any later time): the deadline stays 150
    expect(commands.map((c) => [c.by, c.request.deadlineAt])).toEqual([['preempt', 150]]);
  });

  it('an idle stop waits while the loop is idle and pauses while it is busy', () => {
    const { actor } = stubbed();
    actor.send({ type: 'loop.run' });
    actor.send({ type: 'loop.stop', at: 0, call: call({ idleForMs: 10 }) });
    expect(actor.getSnapshot().value).toEqual({ loop: 'waiting', stop: { idleWaiting: 'idle' } });
    actor.send(push('a')); // busy: the idle clock is stopped
    expect(actor.getSnapshot().context.lastPush?.outcome).toBe('accepted');
    expect(actor.getSnapshot().value).toMatchObject({ stop: { idleWaiting: 'busy' } });
    actor.send({ type: 'loop.idle_due' }); // a late tick of the old clock: ignored while busy
    expect(actor.getSnapshot().context.closed).toBe(false);
  });
});
