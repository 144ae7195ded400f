/**
 * Pure transitions of the run machine, without the runtime: only the timer is provided (on a
 * simulated clock); the executor placeholders do nothing, so the test plays the agent by
 * sending `agent.*` events itself.
 */
import { createActor, SimulatedClock, type AnyActorRef } from 'xstate';
import { describe, expect, it } from 'vitest';
import { CancelMode, type CancelRequest } from '../../machines/cancel-request.js';
import { fromClockTimer } from '../../machines/clock-timer.js';
import { provideNestedRuns, runMachine } from '../../machines/run.machine.js';

const input = { runId: 'r1', ownerId: 'o', sessionId: 's', unwindTimeoutMs: 100, maxNestedRuns: 4 };
const cancel = (overrides: Partial<CancelRequest> = {}) => ({
  type: 'run.cancel' as const,
  request: {
    mode: CancelMode.Immediate,
    deadlineAt: undefined,
    recursive: true,
    cause: 'cancel' as const,
    reason: undefined,
    initiator: 'user' as const,
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

/** A nested run's snapshot, typed for the assertions. */
const snapshotOf = (ref: AnyActorRef | undefined) =>
  ref?.getSnapshot() as { value: unknown; context: { status: string } } | undefined;

describe('run machine', () => {
  it('CREATED → QUEUED → RUNNING → COMPLETED', () => {
    const { actor } = start();
    expect(actor.getSnapshot().value).toBe('CREATED');
    actor.send({ type: 'run.start', at: 0, verdict: 'queued' });
    expect(actor.getSnapshot().value).toBe('QUEUED');
    actor.send({ type: 'run.admit' });
    expect(actor.getSnapshot().value).toEqual('RUNNING');
    actor.send({ type: 'agent.done', output: 42 });
    // The status turns terminal and, with the executor settled and no nested run, the actor
    // reaches its final state with the outcome as its output.
    expect(actor.getSnapshot().context.status).toBe('COMPLETED');
    expect(actor.getSnapshot().status).toBe('done');
    expect(actor.getSnapshot().output).toEqual({
      status: 'COMPLETED',
      output: 42,
      interrupted: false,
    });
  });

  it('a run admitted as it starts passes QUEUED in the same step', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0, verdict: 'admitted' });
    expect(actor.getSnapshot().value).toEqual('RUNNING');
  });

  it('a run the session rejects is CANCELLED at once, never QUEUED', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0, verdict: 'rejected' });
    expect(actor.getSnapshot().context).toMatchObject({ status: 'CANCELLED', verdict: 'rejected' });
    expect(actor.getSnapshot().status).toBe('done');
  });

  it('the first terminal state wins: later events are ignored', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0, verdict: 'queued' });
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
    expect(failed.status).toBe('done');
    expect(actor.getSnapshot()).toBe(failed);
    expect(failed.output).toMatchObject({ status: 'FAILED' });
  });

  it('an immediate cancel while RUNNING unwinds until the agent settles', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0, verdict: 'queued' });
    actor.send({ type: 'run.admit' });
    actor.send(cancel());
    expect(actor.getSnapshot().value).toEqual({ CANCELLED: 'unwinding' });
    expect(actor.getSnapshot().context.status).toBe('CANCELLED'); // terminal at once…
    actor.send({ type: 'agent.error', error: new Error('aborted') });
    expect(actor.getSnapshot().status).toBe('done'); // …final once the agent settled
    expect(actor.getSnapshot().output).toMatchObject({ status: 'CANCELLED', cause: 'cancel' });
  });

  it('an executor that never settles is abandoned after unwindTimeoutMs', () => {
    const { actor, clock } = start();
    actor.send({ type: 'run.start', at: 0, verdict: 'queued' });
    actor.send({ type: 'run.admit' });
    actor.send(cancel());
    clock.increment(99);
    expect(actor.getSnapshot().value).toEqual({ CANCELLED: 'unwinding' });
    clock.increment(1);
    expect(actor.getSnapshot().status).toBe('done');
    expect(actor.getSnapshot().context.executor).toBe('abandoned');
    expect(actor.getSnapshot().output).toMatchObject({ status: 'CANCELLED', unsettled: true });
  });

  it('a cancel before RUNNING settles at once (no executor to wait for)', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0, verdict: 'queued' });
    actor.send(cancel({ mode: CancelMode.AfterToolCalls }));
    expect(actor.getSnapshot().status).toBe('done');
    expect(actor.getSnapshot().output).toMatchObject({ status: 'CANCELLED', unsettled: false });
  });

  it('safe point: only a matching kind lands; the pending request is kept', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0, verdict: 'queued' });
    actor.send({ type: 'run.admit' });
    actor.send(cancel({ mode: CancelMode.AfterToolCalls, recursive: false }));
    expect(actor.getSnapshot().value).toEqual('cancelling');
    actor.send({ type: 'run.safe_point', kind: 'afterChatModel' });
    expect(actor.getSnapshot().value).toEqual('cancelling');
    actor.send({ type: 'run.safe_point', kind: 'afterToolCalls' });
    expect(actor.getSnapshot().value).toEqual({ CANCELLED: 'unwinding' });
    expect(actor.getSnapshot().context.escalated).toBe(false);
  });

  it('a safe point without a pending cancel changes nothing', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0, verdict: 'queued' });
    actor.send({ type: 'run.admit' });
    const before = actor.getSnapshot();
    actor.send({ type: 'run.safe_point', kind: 'afterToolCalls' });
    expect(actor.getSnapshot()).toBe(before);
  });

  it('a request that adds nothing leaves the merged cancel as it was (the very same object)', () => {
    const { actor } = start();
    actor.send({ type: 'run.start', at: 0, verdict: 'queued' });
    actor.send({ type: 'run.admit' });
    actor.send(cancel({ mode: CancelMode.AfterChatModel, recursive: false }));
    const first = actor.getSnapshot().context.cancel;
    actor.send(cancel({ mode: CancelMode.AfterChatModel, recursive: false }));
    expect(actor.getSnapshot().context.cancel).toBe(first);
    actor.send(cancel({ mode: CancelMode.AfterToolCalls, recursive: false }));
    expect(actor.getSnapshot().context.cancel).not.toBe(first);
    expect(actor.getSnapshot().context.cancel?.mode).toBe(CancelMode.AnySafePoint);
  });

  it('the total deadline is absolute from run.start and includes queue time', () => {
    const { actor, clock } = start({ timeoutMs: 300 });
    clock.increment(1_000); // CREATED time does not count
    actor.send({ type: 'run.start', at: clock.now(), verdict: 'queued' });
    expect(actor.getSnapshot().context.deadlineAt).toBe(1_300);
    clock.increment(299);
    expect(actor.getSnapshot().value).toBe('QUEUED');
    clock.increment(1);
    expect(actor.getSnapshot().status).toBe('done');
    expect(actor.getSnapshot().output).toMatchObject({ status: 'CANCELLED', cause: 'timeout' });
  });

  it('a later, earlier escalation deadline re-arms the timer', () => {
    const { actor, clock } = start();
    actor.send({ type: 'run.start', at: 0, verdict: 'queued' });
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
    actor.send({ type: 'run.start', at: 0, verdict: 'queued' });
    actor.send({ type: 'run.admit' });
    actor.send(cancel({ mode: CancelMode.AfterChatModel, recursive: false }));
    expect(actor.getSnapshot().value).toEqual('cancelling');
    clock.increment(1_000);
    expect(actor.getSnapshot().value).toEqual({ CANCELLED: 'unwinding' });
    expect(aborts).toEqual(['timeout']);
    expect(actor.getSnapshot().context.cause).toBe('timeout');
  });

  it('a run that turns terminal cancels its nested runs and settles only after them', () => {
    const clock = new SimulatedClock();
    const machine = runMachine.provide({ actors: { timer: fromClockTimer(clock) } });
    // Nested runs are this very machine (the runtime binds it with provideNestedRuns).
    provideNestedRuns(machine);
    const actor = createActor(machine, { input, clock });
    actor.start();
    actor.send({ type: 'run.start', at: 0, verdict: 'admitted' });
    actor.send({ type: 'run.spawn', runId: 'n1', timeoutMs: undefined, at: 0 });
    const nested = actor.system.get('run:n1') as AnyActorRef | undefined;
    expect(snapshotOf(nested)?.value).toEqual('RUNNING');
    actor.send({ type: 'agent.done', output: 'parent done' });
    // The parent's status is COMPLETED, but it waits for the nested run it just cancelled.
    expect(actor.getSnapshot().context.status).toBe('COMPLETED');
    expect(actor.getSnapshot().status).toBe('active');
    expect(snapshotOf(nested)?.context.status).toBe('CANCELLED');
    nested?.send({ type: 'agent.error', error: new Error('aborted') });
    expect(actor.getSnapshot().status).toBe('done');
    expect(actor.getSnapshot().context.nested?.size).toBe(0);
  });

  it('a recursive cancel flows down to nested runs inside the chart; the nested-run cap holds', () => {
    const clock = new SimulatedClock();
    const machine = provideNestedRuns(
      runMachine.provide({ actors: { timer: fromClockTimer(clock) } }),
    );
    const actor = createActor(machine, { input: { ...input, maxNestedRuns: 1 }, clock });
    actor.start();
    actor.send({ type: 'run.start', at: 0, verdict: 'admitted' });
    actor.send({ type: 'run.spawn', runId: 'n1', timeoutMs: undefined, at: 0 });
    actor.send({ type: 'run.spawn', runId: 'n2', timeoutMs: undefined, at: 0 });
    expect(actor.system.get('run:n2')).toBeUndefined(); // over the cap: not spawned
    actor.send(cancel({ mode: CancelMode.AfterToolCalls, recursive: true }));
    const nested = actor.system.get('run:n1') as AnyActorRef | undefined;
    expect(snapshotOf(nested)?.value).toEqual('cancelling');
  });
});
