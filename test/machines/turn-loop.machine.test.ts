/**
 * The TurnLoop machine on its own: pure helpers and transitions with stub logic (no runtime,
 * no clock, no agent).
 */
import { createActor, fromCallback } from 'xstate';
import { describe, expect, it } from 'vitest';
import { CancelMode } from '../../machines/cancel-request.js';
import {
  mergeDrafts,
  mergeStop,
  preemptCancelRequest,
  stopCancelRequest,
  turnLoopMachine,
  type StopCall,
  type TurnCancelCommand,
  type TurnLoopEvent,
  type TurnInput,
  type TurnPlan,
} from '../../machines/turn-loop.machine.js';

const call = (overrides: Partial<StopCall> = {}): StopCall => ({
  mode: 'afterTurn',
  graceMs: undefined,
  idleForMs: undefined,
  cause: undefined,
  skipCheckpoint: false,
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
    });
    expect(stopCancelRequest(mergeStop(undefined, call({ mode: 'immediate' }), 1))).toMatchObject({
      mode: CancelMode.Immediate,
      recursive: true,
    });
    // Eino: a preempt is not recursive; a preempt timeout makes it escalate and recursive.
    expect(preemptCancelRequest({ mode: 1, timeoutMs: undefined }, 7)).toMatchObject({
      mode: 1,
      deadlineAt: undefined,
      recursive: false,
      cause: 'preempt',
    });
    expect(preemptCancelRequest({ mode: 2, timeoutMs: 3 }, 7)).toMatchObject({
      deadlineAt: 10,
      recursive: true,
    });
    expect(mergeDrafts({ mode: 1, timeoutMs: 9 }, { mode: 2, timeoutMs: 4 })).toEqual({
      mode: 3,
      timeoutMs: 4,
    });
    expect(mergeDrafts({ mode: 1, timeoutMs: undefined }, { mode: 1, timeoutMs: 4 })).toEqual({
      mode: 1,
      timeoutMs: 4,
    });
  });
});

/** The machine with stub logic: plans consume everything, the turn starts at once. */
function stubbed() {
  const commands: TurnCancelCommand[] = [];
  const settled: number[] = [];
  const machine = turnLoopMachine.provide({
    actors: {
      turn: fromCallback<TurnCancelCommand, TurnInput>(({ input, sendBack, receive }) => {
        receive((command) => commands.push(command));
        const plan: TurnPlan = { input: 'in', consumed: ['a'], remaining: [], dropped: [] };
        const started: TurnLoopEvent = {
          type: 'turn.started',
          turnId: input.turnId,
          runId: 'run-1',
          at: 0,
          plan,
        };
        sendBack(started);
      }),
    },
    actions: { settleAcks: (_, ids) => settled.push(...ids) },
  });
  const actor = createActor(machine, { input: { hasStore: false, requeuePreempted: false } });
  actor.start();
  return { actor, commands, settled };
}

let seq = 0;
const push = (item: unknown, extra: Record<string, unknown> = {}) => ({
  type: 'loop.push' as const,
  token: { seq: ++seq, withdrawn: false },
  item,
  at: 0,
  ackId: undefined,
  preempt: undefined,
  decide: undefined,
  ...extra,
});

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

  it('a push, its strategy decision and the resulting cancel are one event', async () => {
    const { actor, commands, settled } = stubbed();
    actor.send({ type: 'loop.run' });
    actor.send(push('a'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(actor.getSnapshot().value).toEqual({ loop: { turn: 'running' }, stop: 'open' });
    const turnIds: Array<string | undefined> = [];
    actor.send(
      push('urgent', {
        ackId: 7,
        decide: (turnId: string | undefined) => {
          turnIds.push(turnId);
          expect(commands).toEqual([]); // decided before any cancel went out
          return {
            ok: true,
            preempt: { mode: CancelMode.AnySafePoint, timeoutMs: undefined, delayMs: undefined },
          };
        },
      }),
    );
    // Right after the single send: decided once, buffered, cancel delivered, ack settled.
    expect(turnIds).toEqual(['turn-1']);
    expect(actor.getSnapshot().context.buffer).toEqual(['urgent']);
    expect(commands).toHaveLength(1);
    expect(commands[0]).toMatchObject({
      type: 'turn.cancel',
      by: 'preempt',
      request: { mode: CancelMode.AnySafePoint, cause: 'preempt' },
    });
    expect(settled).toEqual([7]);
  });

  it('a withdrawn push (sent re-entrantly) is ignored: no decision, no buffer write', () => {
    const { actor } = stubbed();
    let decided = false;
    const event = push('x', {
      decide: () => {
        decided = true;
        return { ok: true, preempt: undefined };
      },
    });
    event.token.withdrawn = true;
    actor.send(event);
    expect(decided).toBe(false);
    expect(actor.getSnapshot().context.buffer).toEqual([]);
    expect(actor.getSnapshot().context.lastPush).toBeUndefined();
  });

  it('a strategy error refuses the push without touching the buffer', () => {
    const { actor } = stubbed();
    const error = new Error('nope');
    actor.send(push('x', { decide: () => ({ ok: false, error }) }));
    expect(actor.getSnapshot().context.lastPush?.outcome).toEqual({ error });
    expect(actor.getSnapshot().context.buffer).toEqual([]);
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
