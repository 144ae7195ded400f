/**
 * Pure transitions of the run machine, without the runtime: only the timer is provided (on a
 * simulated clock); the executor placeholders do nothing, so the test plays the agent by
 * sending `agent.*` events itself.
 */
import { createActor, SimulatedClock } from 'xstate';
import { describe, expect, it } from 'vitest';
import { CancelMode, type CancelRequest } from '../../machines/cancel-request.js';
import { fromClockTimer } from '../../machines/clock-timer.js';
import { runMachine } from '../../machines/run.machine.js';

const input = { runId: 'r1', ownerId: 'o', sessionId: 's', unwindTimeoutMs: 100 };
const cancel = (overrides: Partial<CancelRequest> = {}) => ({
  type: 'run.cancel' as const,
  request: {
    mode: CancelMode.Immediate,
    deadlineAt: undefined,
    recursive: true,
    cause: 'cancel' as const,
    reason: undefined,
    ...overrides,
  },
});

function start(extra: Partial<typeof input> & { timeoutMs?: number } = {}) {
  const clock = new SimulatedClock();
  const machine = runMachine.provide({ actors: { timer: fromClockTimer(clock) } });
  const actor = createActor(machine, { input: { ...input, ...extra }, clock });
  actor.start();
  return { actor, clock };
}

describe('run machine', () => {
  it('CREATED → QUEUED → RUNNING → COMPLETED', () => {
    const { actor } = start();
    expect(actor.getSnapshot().value).toBe('CREATED');
    actor.send({ type: 'run.start', at: 0 });
    expect(actor.getSnapshot().value).toBe('QUEUED');
    actor.send({ type: 'run.admit' });
    expect(actor.getSnapshot().value).toEqual({ RUNNING: 'working' });
    actor.send({ type: 'agent.done', output: 42 });
    expect(actor.getSnapshot().value).toBe('COMPLETED');
    expect(actor.getSnapshot().context.output).toBe(42);
  });

  it('the first terminal state wins: later events are ignored', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0 });
    actor.send({ type: 'run.admit' });
    actor.send({ type: 'agent.error', error: new Error('x') });
    const failed = actor.getSnapshot();
    for (const event of [
      cancel(),
      { type: 'agent.done' as const, output: 1 },
      { type: 'run.interrupt' as const },
      { type: 'run.admit' as const },
    ]) {
      actor.send(event);
    }
    expect(actor.getSnapshot().value).toBe('FAILED');
    expect(actor.getSnapshot().context).toEqual(failed.context);
  });

  it('an immediate cancel while RUNNING unwinds until the agent settles', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0 });
    actor.send({ type: 'run.admit' });
    actor.send(cancel());
    expect(actor.getSnapshot().value).toEqual({ CANCELLED: 'unwinding' });
    actor.send({ type: 'agent.error', error: new Error('aborted') });
    expect(actor.getSnapshot().value).toEqual({ CANCELLED: 'settled' });
    expect(actor.getSnapshot().context.cause).toBe('cancel');
  });

  it('an executor that never settles is abandoned after unwindTimeoutMs', () => {
    const { actor, clock } = start();
    actor.send({ type: 'run.start', at: 0 });
    actor.send({ type: 'run.admit' });
    actor.send(cancel());
    clock.increment(99);
    expect(actor.getSnapshot().value).toEqual({ CANCELLED: 'unwinding' });
    clock.increment(1);
    expect(actor.getSnapshot().value).toEqual({ CANCELLED: 'abandoned' });
    expect(actor.getSnapshot().context.unsettled).toBe(true);
  });

  it('a cancel before RUNNING settles at once (no executor to wait for)', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0 });
    actor.send(cancel({ mode: CancelMode.AfterToolCalls }));
    expect(actor.getSnapshot().value).toEqual({ CANCELLED: 'settled' });
  });

  it('safe point: only a matching kind lands; the pending request is kept', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0 });
    actor.send({ type: 'run.admit' });
    actor.send(cancel({ mode: CancelMode.AfterToolCalls, recursive: false }));
    expect(actor.getSnapshot().value).toEqual({ RUNNING: 'cancelling' });
    actor.send({ type: 'run.safe_point', kind: 'afterChatModel' });
    expect(actor.getSnapshot().value).toEqual({ RUNNING: 'cancelling' });
    actor.send({ type: 'run.safe_point', kind: 'afterToolCalls' });
    expect(actor.getSnapshot().value).toEqual({ CANCELLED: 'unwinding' });
    expect(actor.getSnapshot().context.escalated).toBe(false);
  });

  it('a safe point without a pending cancel changes nothing', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0 });
    actor.send({ type: 'run.admit' });
    const before = actor.getSnapshot();
    actor.send({ type: 'run.safe_point', kind: 'afterToolCalls' });
    expect(actor.getSnapshot()).toBe(before);
  });

  it('cancelSeq counts only the requests that contributed', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0 });
    actor.send({ type: 'run.admit' });
    actor.send(cancel({ mode: CancelMode.AfterChatModel, recursive: false }));
    actor.send(cancel({ mode: CancelMode.AfterChatModel, recursive: false }));
    expect(actor.getSnapshot().context.cancelSeq).toBe(1);
    actor.send(cancel({ mode: CancelMode.AfterToolCalls, recursive: false }));
    expect(actor.getSnapshot().context.cancelSeq).toBe(2);
    expect(actor.getSnapshot().context.cancel?.mode).toBe(CancelMode.AnySafePoint);
  });

  it('the total deadline is absolute from run.start and includes queue time', () => {
    const { actor, clock } = start({ timeoutMs: 300 });
    clock.increment(1_000); // CREATED time does not count
    actor.send({ type: 'run.start', at: clock.now() });
    expect(actor.getSnapshot().context.deadlineAt).toBe(1_300);
    clock.increment(299);
    expect(actor.getSnapshot().value).toBe('QUEUED');
    clock.increment(1);
    expect(actor.getSnapshot().value).toEqual({ CANCELLED: 'settled' });
    expect(actor.getSnapshot().context.cause).toBe('timeout');
  });

  it('a later, earlier escalation deadline re-arms the timer', () => {
    const { actor, clock } = start();
    actor.send({ type: 'run.start', at: 0 });
    actor.send({ type: 'run.admit' });
    actor.send(cancel({ mode: CancelMode.AfterChatModel, deadlineAt: 1_000, recursive: false }));
    actor.send(cancel({ mode: CancelMode.AfterChatModel, deadlineAt: 200, recursive: false }));
    clock.increment(200);
    expect(actor.getSnapshot().value).toEqual({ CANCELLED: 'unwinding' });
    expect(actor.getSnapshot().context.escalated).toBe(true);
  });

  it('a deadline that fires while a safe-point cancel is pending ends with cause timeout, as the abort said', () => {
    const clock = new SimulatedClock();
    const aborts: string[] = [];
    const machine = runMachine.provide({
      actors: { timer: fromClockTimer(clock) },
      actions: { abortExecutor: (_, params) => void aborts.push(params.cause) },
    });
    const actor = createActor(machine, { input: { ...input, timeoutMs: 1_000 }, clock });
    actor.start();
    actor.send({ type: 'run.start', at: 0 });
    actor.send({ type: 'run.admit' });
    actor.send(cancel({ mode: CancelMode.AfterChatModel, recursive: false }));
    expect(actor.getSnapshot().value).toEqual({ RUNNING: 'cancelling' });
    clock.increment(1_000);
    expect(actor.getSnapshot().value).toEqual({ CANCELLED: 'unwinding' });
    expect(aborts).toEqual(['timeout']);
    expect(actor.getSnapshot().context.cause).toBe('timeout');
  });
});
