/**
 * `run.cancelled` and an interrupted `run.completed` say who asked (`initiator`), so a page can
 * tell "cancelled by you" from "cancelled by a newer message", a timeout or a shutdown.
 */
import { describe, expect, it } from 'vitest';
import type { Agent } from '../../src/index.js';
import { createTestRuntime, gatedAgent, tick, waitForCancel } from '../helpers.js';
import { createTestLoop, until } from '../turn-loop/helpers.js';

/** Stops as soon as an interrupt is raised, answering that it was interrupted. */
const stopsWhenInterrupted: Agent<unknown, string> = {
  execute: (_input, ctx) =>
    new Promise((resolve) => {
      const poll = () => (ctx.interruptRequested ? resolve('interrupted') : setImmediate(poll));
      poll();
    }),
};

async function endsOf(
  runtime: ReturnType<typeof createTestRuntime>['runtime'],
  sessionId: string,
): Promise<Array<[string | undefined, string, unknown]>> {
  const events = await runtime.eventLog.read({}, { ownerId: 'o', sessionId });
  return events
    .filter((e) => e.type === 'run.cancelled' || e.type === 'run.completed')
    .map((e) => [e.runId, e.type, e.payload.initiator]);
}

describe('initiator', () => {
  it('user: run.cancel(); timeout: the run’s own deadline', async () => {
    const { runtime, clock } = createTestRuntime();
    const mine = runtime.prepare({ ownerId: 'o', sessionId: 'a', agent: waitForCancel, input: 1 });
    mine.start();
    mine.cancel();
    await mine.termination;
    const slow = runtime.prepare({
      ownerId: 'o',
      sessionId: 'a',
      agent: waitForCancel,
      input: 2,
      timeoutMs: 100,
    });
    slow.start();
    await tick();
    clock.increment(100);
    await slow.termination;
    expect(await endsOf(runtime, 'a')).toEqual([
      [mine.id, 'run.cancelled', 'user'],
      [slow.id, 'run.cancelled', 'timeout'],
    ]);
  });

  it('strategy: reject, and interrupt (interrupted, then cancelled after graceMs)', async () => {
    const { runtime, clock } = createTestRuntime();
    const busy = runtime.prepare({ ownerId: 'o', sessionId: 'b', agent: waitForCancel, input: 0 });
    busy.start();
    const rejected = runtime.prepare({
      ownerId: 'o',
      sessionId: 'b',
      agent: waitForCancel,
      input: 1,
      strategy: 'reject',
    });
    expect(() => rejected.start()).toThrow(/SESSION_BUSY/);
    await rejected.termination;
    // waitForCancel ignores the interrupt: cancelled once the grace is over.
    const newer = runtime.prepare({
      ownerId: 'o',
      sessionId: 'b',
      agent: stopsWhenInterrupted,
      input: 2,
      strategy: 'interrupt',
      graceMs: 50,
    });
    newer.start();
    await tick();
    clock.increment(50);
    await busy.termination;
    // A newer run again: this one stops when interrupted, so it completes, interrupted.
    const newest = runtime.prepare({
      ownerId: 'o',
      sessionId: 'b',
      agent: waitForCancel,
      input: 3,
      strategy: 'interrupt',
      graceMs: 50,
    });
    newest.start();
    await newer.termination;
    newest.cancel();
    await newest.termination;
    expect(await endsOf(runtime, 'b')).toEqual([
      [rejected.id, 'run.cancelled', 'strategy'],
      [busy.id, 'run.cancelled', 'strategy'],
      [newer.id, 'run.completed', 'strategy'],
      [newest.id, 'run.cancelled', 'user'],
    ]);
  });

  it('preempt: a newer run with strategy preempt; shutdown: the runtime stopping', async () => {
    const { runtime, clock } = createTestRuntime();
    const gate = gatedAgent();
    const old = runtime.prepare({ ownerId: 'o', sessionId: 'c', agent: waitForCancel, input: 0 });
    old.start();
    const urgent = runtime.prepare({
      ownerId: 'o',
      sessionId: 'c',
      agent: gate.agent,
      input: 1,
      strategy: 'preempt',
      graceMs: 10,
    });
    urgent.start();
    await tick();
    clock.increment(10); // no safe point: the preempt escalates after graceMs
    await old.termination;
    await gate.started(urgent.id);
    const stopping = runtime.shutdown({ graceMs: 0 });
    await tick();
    clock.increment(1); // the grace timer runs on the simulated clock too
    await stopping;
    await urgent.termination;
    expect(await endsOf(runtime, 'c')).toEqual([
      [old.id, 'run.cancelled', 'preempt'],
      [urgent.id, 'run.cancelled', 'shutdown'],
    ]);
  });

  it('a TurnLoop turn: its stop’s initiator (user by default, shutdown when the host says so), never read from the reason', async () => {
    const initiators: unknown[] = [];
    for (const initiator of [undefined, 'shutdown'] as const) {
      const made = createTestLoop();
      made.loop.push('a');
      made.loop.run();
      await until(() => made.stepped.executions.length === 1, 'the turn to start');
      // The same cause text both times: only the data tells them apart.
      made.loop.stop({ mode: 'immediate', cause: 'shutdown', initiator });
      await made.loop.wait();
      const events = await made.runtime.eventLog.read({}, { ownerId: 'u1', sessionId: 's1' });
      initiators.push(events.find((e) => e.type === 'run.cancelled')?.payload.initiator);
    }
    expect(initiators).toEqual(['user', 'shutdown']);
  });
});
