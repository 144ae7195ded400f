import { createActor, SimulatedClock } from 'xstate';
import { describe, expect, it } from 'vitest';
import { runtimeMachine } from '../../machines/runtime.machine.js';

function start() {
  const clock = new SimulatedClock();
  const calls: string[] = [];
  const record = (name: string) => () => void calls.push(name);
  const machine = runtimeMachine.provide({
    actions: {
      cancelWaitingRuns: record('cancelWaitingRuns'),
      interruptRunningRuns: record('interruptRunningRuns'),
      cancelRemainingRuns: record('cancelRemainingRuns'),
      checkSettled: record('checkSettled'),
      stopSessions: record('stopSessions'),
    },
  });
  const actor = createActor(machine, { clock });
  actor.start();
  return { actor, clock, calls };
}

describe('runtime machine', () => {
  it('drains: waiting runs cancelled before running ones are interrupted; settled in time → drained', () => {
    const { actor, calls } = start();
    actor.send({ type: 'runtime.shutdown', graceMs: 1_000 });
    expect(actor.getSnapshot().value).toBe('draining');
    expect(calls).toEqual(['cancelWaitingRuns', 'interruptRunningRuns', 'checkSettled']);
    actor.send({ type: 'runtime.all_settled', abandoned: false });
    expect(actor.getSnapshot().status).toBe('done');
    expect(actor.getSnapshot().output).toEqual({ drained: true });
    expect(calls.at(-1)).toBe('stopSessions');
  });

  it('after graceMs the rest is cancelled and the shutdown is not drained', () => {
    const { actor, clock, calls } = start();
    actor.send({ type: 'runtime.shutdown', graceMs: 1_000 });
    clock.increment(999);
    expect(actor.getSnapshot().value).toBe('draining');
    clock.increment(1);
    expect(actor.getSnapshot().value).toBe('forcing');
    expect(calls).toContain('cancelRemainingRuns');
    actor.send({ type: 'runtime.all_settled', abandoned: false });
    expect(actor.getSnapshot().output).toEqual({ drained: false });
  });

  it('an abandoned run makes the shutdown not drained; a second shutdown changes nothing', () => {
    const { actor } = start();
    actor.send({ type: 'runtime.shutdown', graceMs: 1_000 });
    actor.send({ type: 'runtime.shutdown', graceMs: 5 });
    expect(actor.getSnapshot().context.graceMs).toBe(1_000);
    actor.send({ type: 'runtime.all_settled', abandoned: true });
    expect(actor.getSnapshot().output).toEqual({ drained: false });
  });
});
