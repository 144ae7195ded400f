/**
 * Regressions found by an adversarial review of the core: each test failed before its fix.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CancelMode,
  createMemoryEventLog,
  sleep,
  systemClock,
  type Agent,
  type AgentRun,
  type EventLog,
  type RunplaneEvent,
} from '../../src/index.js';
import { unrefTimer } from '../../src/clock.js';
import { createTestRuntime, gatedAgent, tick } from '../helpers.js';

const owner = { ownerId: 'alice', sessionId: 's1' };
const day = 24 * 3_600_000;

describe('hardening', () => {
  afterEach(() => vi.useRealTimers());

  it('a delay beyond 2^31-1 ms waits its time instead of firing at once', () => {
    vi.useFakeTimers(); // mimics Node: a raw setTimeout(fn, 30 days) fires after 1 ms
    const fired = vi.fn();
    const handle = systemClock.setTimeout(fired, 30 * day);
    vi.advanceTimersByTime(29 * day);
    expect(fired).not.toHaveBeenCalled();
    vi.advanceTimersByTime(day);
    expect(fired).toHaveBeenCalledTimes(1);
    const cleared = vi.fn();
    systemClock.clearTimeout(systemClock.setTimeout(cleared, 40 * day));
    vi.advanceTimersByTime(41 * day);
    expect(cleared).not.toHaveBeenCalled();
    systemClock.clearTimeout(handle);
  });

  it('housekeeping timers do not keep the process alive', () => {
    const handle = systemClock.setTimeout(() => undefined, 60_000) as NodeJS.Timeout;
    expect(handle.hasRef()).toBe(true);
    unrefTimer(handle);
    expect(handle.hasRef()).toBe(false);
    systemClock.clearTimeout(handle);
  });

  it('a failing event log write is reported and the lifecycle goes on', async () => {
    const memory = createMemoryEventLog();
    let failures = 0;
    const flaky: EventLog = {
      ...memory,
      append(ctx, key, event) {
        if (event.type === 'run.completed' && failures++ === 0) throw new Error('disk full');
        return memory.append(ctx, key, event);
      },
    };
    const { runtime, reported } = createTestRuntime({ stores: { eventLog: flaky } });
    const agent: Agent<string, string> = { execute: async (x) => x };
    const a = runtime.prepare({ ...owner, agent, input: 'a' });
    const b = runtime.prepare({ ...owner, agent, input: 'b' });
    a.start();
    b.start();
    expect(await a.termination).toMatchObject({ status: 'COMPLETED' });
    expect(await b.result()).toBe('b');
    expect(reported).toEqual([expect.objectContaining({ code: 'STORE_FAILED' })]);
  });

  it('a reportError that throws cannot break a run either', async () => {
    const { runtime } = createTestRuntime({
      reportError: () => {
        throw new Error('reporter down');
      },
    });
    const spy = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    runtime.onEvent(() => {
      throw new Error('listener bug');
    });
    const run = runtime.prepare({ ...owner, agent: { execute: async () => 'ok' }, input: 1 });
    run.start();
    expect(await run.result()).toBe('ok');
    await tick();
    expect(spy).toHaveBeenCalled();
  });

  it('a listener that cancels the run it hears about cannot let the next run in early', async () => {
    const { runtime } = createTestRuntime();
    const slow = gatedAgent({ honoursSignal: false }); // takes its time to unwind
    const next = gatedAgent();
    const contributions: boolean[] = [];
    runtime.onEvent((event: RunplaneEvent) => {
      if (event.type === 'session.run_started' && event.runId === a.id) {
        contributions.push(runtime.runs.find('alice', 's1', a.id)!.cancel().contributed);
      }
    });
    const a = runtime.prepare({ ...owner, agent: slow.agent, input: 'a' });
    const b = runtime.prepare({ ...owner, agent: next.agent, input: 'b' });
    a.start();
    b.start();
    await slow.started(a.id);
    await tick();
    expect(a.status).toBe('CANCELLED');
    expect(contributions).toEqual([true]);
    expect(b.status).toBe('QUEUED'); // A's agent has not settled yet
    slow.fail(a.id, new Error('unwound'));
    await next.started(b.id);
    expect(b.status).toBe('RUNNING');
  });

  it('a timeout that lands while a safe-point cancel is pending is a timeout', async () => {
    const { runtime, clock } = createTestRuntime();
    const gate = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'x', timeoutMs: 100 });
    run.start();
    await gate.started(run.id);
    run.cancel({ mode: CancelMode.AfterToolCalls });
    clock.increment(100);
    expect(await run.termination).toMatchObject({ status: 'CANCELLED', cause: 'timeout' });
    await expect(run.result()).rejects.toMatchObject({ code: 'RUN_TIMEOUT' });
  });

  it('timeoutMs: 0 never invokes the agent', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'x', timeoutMs: 0 });
    run.start();
    await tick();
    expect(run.status).toBe('CANCELLED');
    expect(gate.executions).toHaveLength(0);
    expect(await run.termination).toMatchObject({ cause: 'timeout' });
  });

  it('no choice of ids makes two owners share a session', () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const a = runtime.prepare({ ownerId: 'a\u0000b', sessionId: 'c', agent: gate.agent, input: 1 });
    const b = runtime.prepare({ ownerId: 'a', sessionId: 'b\u0000c', agent: gate.agent, input: 2 });
    a.start();
    b.start();
    expect([a.status, b.status]).toEqual(['RUNNING', 'RUNNING']);
  });

  it('events(): an aborted signal yields nothing; a cursor past the end never rewinds', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'x' });
    run.start();
    await gate.started(run.id);
    const aborted = new AbortController();
    aborted.abort();
    const seen: RunplaneEvent[] = [];
    for await (const event of run.events({ signal: aborted.signal })) seen.push(event);
    expect(seen).toEqual([]);
    const future: RunplaneEvent[] = [];
    const following = (async () => {
      for await (const event of run.events({ after: 1_000 })) future.push(event);
    })();
    await tick();
    gate.complete(run.id, 'done');
    await following;
    expect(future).toEqual([]);
  });

  it('an abandoned executor takes no hints and writes no history', async () => {
    const { runtime, clock } = createTestRuntime({ unwindTimeoutMs: 100 });
    const stubborn = gatedAgent({ honoursSignal: false });
    const run = runtime.prepare({ ...owner, agent: stubborn.agent, input: 'x' });
    run.start();
    await stubborn.started(run.id);
    const ctx = stubborn.ctx(run.id);
    run.cancel();
    runtime.inbox.push('alice', 's1', 'for the next run');
    expect(ctx.inbox.drain()).toEqual([]); // terminal: the hint waits for the next run
    clock.increment(100);
    expect(await run.termination).toMatchObject({ unsettled: true });
    await expect(
      ctx.history.append([{ role: 'user', content: 'late' }] as never),
    ).rejects.toMatchObject({
      code: 'RUN_CANCELLED',
    });
    expect(await runtime.sessionStore.load({}, owner)).toEqual([]);
    expect(runtime.inbox.size('alice', 's1')).toBe(1);
  });

  it('strategy interrupt: the new run goes first; cancelling it spares the active run', async () => {
    const { runtime, clock } = createTestRuntime();
    const gate = gatedAgent();
    const a = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    const b = runtime.prepare({ ...owner, agent: gate.agent, input: 'b' });
    a.start();
    b.start();
    await gate.started(a.id);
    const c = runtime.prepare({
      ...owner,
      agent: gate.agent,
      input: 'c',
      strategy: 'interrupt',
      graceMs: 500,
    });
    c.start();
    expect(runtime.session('alice', 's1').queuedRunIds).toEqual([c.id, b.id]);
    c.cancel();
    clock.increment(500);
    expect(a.status).toBe('RUNNING'); // nobody waits for A to end any more
    const d = runtime.prepare({
      ...owner,
      agent: gate.agent,
      input: 'd',
      strategy: 'interrupt',
      graceMs: 500,
    });
    d.start();
    clock.increment(500);
    expect(await a.termination).toMatchObject({
      status: 'CANCELLED',
      reason: 'interrupted by a newer run; grace period over',
    });
    await gate.started(d.id);
    expect(b.status).toBe('QUEUED');
  });

  it('bad options are INVALID_ARGUMENT, never a TypeError', () => {
    const { runtime } = createTestRuntime();
    const run = runtime.prepare({ ...owner, agent: gatedAgent().agent, input: 1 });
    const invalid: unknown = expect.objectContaining({ code: 'INVALID_ARGUMENT' });
    expect(() => run.cancel(null as never)).toThrow(invalid);
    expect(() => run.cancel({ mode: '1' as never })).toThrow(invalid);
    expect(() => run.cancel({ timeOutMs: 5 } as never)).toThrow(
      expect.objectContaining({ field: 'timeOutMs' }),
    );
    expect(() =>
      runtime.prepare({ ...owner, agent: gatedAgent().agent, input: 1, timeOutMs: 5 } as never),
    ).toThrow('INVALID_ARGUMENT: unknown option `timeOutMs` (a typo?)');
    // A shutdown whose grace is misspelled would cancel at once: refused, the runtime runs on.
    expect(() => runtime.shutdown({ graceMS: 5 } as never)).toThrow(
      expect.objectContaining({ field: 'graceMS' }),
    );
    expect(run.status).toBe('CREATED');
    expect(() => createTestRuntime({ clock: {} as never })).toThrow(
      expect.objectContaining({ field: 'clock' }),
    );
    expect(() => createTestRuntime({ reportError: 42 as never })).toThrow(
      expect.objectContaining({ field: 'reportError' }),
    );
    expect(() => createTestRuntime({ stores: { eventLog: {} as never } })).toThrow(
      expect.objectContaining({ field: 'stores.eventLog' }),
    );
    expect(() => runtime.prepare(null as never)).toThrow(
      'INVALID_ARGUMENT: expected `options` to be an object, got null',
    );
  });

  it('agents cannot forge lifecycle events, name unknown safe points or spawn with bad options', async () => {
    const { runtime } = createTestRuntime();
    const errors: unknown[] = [];
    const agent: Agent<string, string> = {
      async execute(_input, ctx) {
        for (const attempt of [
          () => ctx.emit('run.completed', { reason: 'forged' }),
          () => ctx.emit('session.run_started'),
          () => ctx.safePoint('bogus' as never),
          () => ctx.spawn({ execute: async () => 1 }, 1, { timeoutMs: -5 }),
        ]) {
          try {
            attempt();
          } catch (error) {
            errors.push(error);
          }
        }
        ctx.emit('agent.note', { ok: true });
        return 'done';
      },
    };
    const run = runtime.prepare({ ...owner, agent, input: 'x' });
    run.start();
    expect(await run.result()).toBe('done');
    expect(errors).toHaveLength(4);
    expect(errors.every((e) => (e as { code?: string }).code === 'INVALID_ARGUMENT')).toBe(true);
    const types = (await runtime.eventLog.read({}, owner, { runId: run.id })).map((e) => e.type);
    expect(types.filter((t) => t === 'run.completed')).toHaveLength(1);
    expect(types).toContain('agent.note');
  });

  it('a second shutdown with graceMs 0 cancels what is left at once', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'x' });
    run.start();
    await gate.started(run.id);
    const first = runtime.shutdown({ graceMs: 60_000 });
    const second = runtime.shutdown({ graceMs: 0 });
    expect(await second).toEqual({ drained: false });
    expect(await first).toEqual({ drained: false });
    expect(await run.termination).toMatchObject({ status: 'CANCELLED', cause: 'shutdown' });
  });

  it('an external signal keeps its reason', async () => {
    const { runtime } = createTestRuntime();
    const controller = new AbortController();
    const run = runtime.prepare({
      ...owner,
      agent: gatedAgent().agent,
      input: 'x',
      signal: controller.signal,
    });
    controller.abort(new Error('client went away'));
    expect(await run.termination).toMatchObject({ cause: 'signal', reason: 'client went away' });
  });

  it('a custom runId is never reused in its session', async () => {
    const { runtime } = createTestRuntime();
    const run = runtime.prepare({
      ...owner,
      agent: { execute: async () => 1 },
      input: 1,
      runId: 'fixed',
    });
    run.start();
    await run.termination;
    expect(() =>
      runtime.prepare({ ...owner, agent: { execute: async () => 1 }, input: 1, runId: 'fixed' }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'runId' }));
  });

  it('a newer run cancelled by what its own enqueue set off leaves the queue and spares the active run', async () => {
    const { runtime, clock } = createTestRuntime();
    const later: { newer?: AgentRun<unknown> } = {};
    // The active run withdraws the newer one as soon as it hears of the interrupt (its interrupt
    // signal fires once the step of the newer run's start is over, the newer run just queued).
    const active = runtime.prepare({
      ...owner,
      input: 'a',
      agent: {
        async execute(_input, ctx) {
          ctx.interruptSignal.addEventListener('abort', () =>
            newer?.cancel({ reason: 'withdrawn' }),
          );
          await sleep(ctx.clock, 50, ctx.signal);
          return 'a finished';
        },
      },
    });
    active.start();
    await tick();
    const newer = runtime.prepare({
      ...owner,
      input: 'b',
      strategy: 'interrupt',
      graceMs: 10,
      agent: { execute: async () => 'b' },
    });
    later.newer = newer;
    newer.start();
    await tick();
    expect(newer.status).toBe('CANCELLED');
    expect(runtime.session('alice', 's1').queuedRunIds).toEqual([]);
    clock.increment(10); // the grace period: nobody waits for the active run to end any more
    expect(active.status).toBe('RUNNING');
    clock.increment(40);
    expect(await active.termination).toMatchObject({ status: 'COMPLETED', output: 'a finished' });
  });

  it('events({ after: 0 }) includes what was logged under the run before it started', async () => {
    const { runtime } = createTestRuntime();
    const run = runtime.prepare({ ...owner, input: 'hi', agent: { execute: async (i) => i } });
    // As the service does: the user's message is logged under the run before start().
    runtime.eventLog.append({}, owner, { runId: run.id, type: 'user.message', at: 0 });
    run.start();
    await run.termination;
    const types: string[] = [];
    for await (const event of run.events({ after: 0 })) types.push(event.type);
    expect(types.slice(0, 3)).toEqual(['user.message', 'session.run_queued', 'run.status']);
    expect(types.filter((t) => t === 'run.completed')).toHaveLength(1);
  });

  it('an agent may destructure or spread its context', async () => {
    const { runtime } = createTestRuntime();
    const run: AgentRun<string> = runtime.prepare({
      ...owner,
      input: 'x',
      agent: {
        async execute(input: string, ctx) {
          const { emit, safePoint, runId } = ctx;
          emit('agent.note', { input });
          safePoint('afterToolCalls');
          const copy = { ...ctx };
          return `${runId === run.id} ${typeof copy.emit} ${copy.sessionId} ${copy.signal.aborted}`;
        },
      },
    });
    run.start();
    expect(await run.result()).toBe('true function s1 false');
  });

  it('sessionIdleTtlMs: 0 evicts an idle session at once and arms no timer while it is busy', async () => {
    const { runtime, clock } = createTestRuntime({ sessionIdleTtlMs: 0 });
    const pending = (clock as unknown as { timeouts: Map<unknown, unknown> }).timeouts;
    const run = runtime.prepare({
      ...owner,
      input: 1,
      agent: { execute: (i: number, ctx) => sleep(ctx.clock, 100, ctx.signal).then(() => i) },
    });
    run.start();
    await tick(); // the agent sleeps
    expect(pending.size).toBe(2); // the agent's sleep and the session's eviction timer
    clock.increment(0); // the eviction timer fires: the session is busy, nothing is re-armed
    expect(pending.size).toBe(1); // the agent's sleep only
    clock.increment(100);
    expect(await run.result()).toBe(1);
    clock.increment(0); // the settlement armed it again; now idle: evicted
    expect(pending.size).toBe(0);
    expect(runtime.session('alice', 's1').activeRunId).toBeUndefined();
  });

  it('no run can be prepared from inside shutdown, even before its machine says draining', async () => {
    const { runtime } = createTestRuntime();
    const attempts: unknown[] = [];
    const run = runtime.prepare({
      ...owner,
      input: 'a',
      agent: {
        execute: (_input, ctx) =>
          new Promise<string>((resolve) => {
            ctx.interruptSignal.addEventListener('abort', () => {
              try {
                runtime.prepare({ ...owner, input: 'late', agent: { execute: async () => 'x' } });
                attempts.push('prepared');
              } catch (error) {
                attempts.push((error as { code?: string }).code);
              }
              resolve('wrapped up');
            });
          }),
      },
    });
    run.start();
    await tick();
    expect(await runtime.shutdown({ graceMs: 1_000 })).toEqual({ drained: true });
    expect(attempts).toEqual(['SHUTTING_DOWN']);
  });

  it('ctx.interruptCause tells a user interrupt from a shutdown', async () => {
    const { runtime } = createTestRuntime();
    const seen: unknown[] = [];
    const waitForInterrupt: Agent<string, string> = {
      execute: (input, ctx) =>
        new Promise((resolve) => {
          seen.push([input, ctx.interruptCause]);
          ctx.interruptSignal.addEventListener('abort', () => {
            seen.push([input, ctx.interruptCause, ctx.interruptMessage]);
            resolve(input);
          });
        }),
    };
    const user = runtime.prepare({ ...owner, agent: waitForInterrupt, input: 'user' });
    user.start();
    await tick();
    user.interrupt('stop');
    await user.termination;
    const other = runtime.prepare({
      ...owner,
      sessionId: 's2',
      agent: waitForInterrupt,
      input: 'deploy',
    });
    other.start();
    await tick();
    expect(await runtime.shutdown({ graceMs: 1_000 })).toEqual({ drained: true });
    expect(seen).toEqual([
      ['user', undefined],
      ['user', 'interrupt', 'stop'],
      ['deploy', undefined],
      ['deploy', 'shutdown', 'runtime shutdown'],
    ]);
  });
});
