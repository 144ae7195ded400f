/**
 * Run lifecycle, the tests numbered 1 and 5 to 9: a prepared run, cancel and interrupt,
 * safe-point cancels and their escalation, nested runs, deadlines (timeoutMs) and external
 * signals.
 */
import { describe, expect, it } from 'vitest';
import { CancelMode, RunplaneError, type Agent } from '../../src/index.js';
import { createTestRuntime, gatedAgent, owner, tick } from '../helpers.js';

describe('run lifecycle', () => {
  it('1. a prepared run is CREATED and findable; cancel never invokes the agent; start twice throws', async () => {
    const { runtime } = createTestRuntime();
    const agent = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: agent.agent, input: 'x' });
    expect(run.status).toBe('CREATED');
    expect(runtime.runs.find('alice', 's1', run.id)).toBe(run);

    const { contributed, outcome } = run.cancel();
    expect(contributed).toBe(true);
    expect(run.status).toBe('CANCELLED');
    expect(await outcome).toBe('cancelled');
    expect(await run.termination).toEqual({
      status: 'CANCELLED',
      cause: 'cancel',
      reason: undefined,
      escalated: false,
      unsettled: false,
    });
    run.start(); // allowed once: there is nothing left to run
    await tick();
    expect(agent.executions).toHaveLength(0);
    expect(() => run.start()).toThrow(expect.objectContaining({ code: 'RUN_ALREADY_STARTED' }));

    const other = runtime.prepare({ ...owner, agent: agent.agent, input: 'y' });
    other.start();
    expect(() => other.start()).toThrow(RunplaneError);
    expect(() => other.start()).toThrow(/^RUN_ALREADY_STARTED:/);
  });

  it('5. interrupt(message) on RUNNING: the agent sees it and completes with interrupted: true', async () => {
    const { runtime } = createTestRuntime();
    const seen: Array<[boolean, string | undefined]> = [];
    const released = gatedAgent();
    const agent: Agent<string, string> = {
      async execute(input, ctx) {
        await released.agent.execute(input, ctx);
        seen.push([ctx.interruptRequested, ctx.interruptMessage]);
        return ctx.interruptRequested ? `partial answer (${ctx.interruptMessage})` : 'full answer';
      },
    };
    const run = runtime.prepare({ ...owner, agent, input: 'x' });
    run.start();
    await released.started(run.id);
    expect(run.interrupt('user pressed stop')).toBe(true);
    expect(run.interrupt('again')).toBe(false); // the flag is already raised
    expect(run.status).toBe('RUNNING');
    released.complete(run.id, 'ignored');
    expect(await run.termination).toEqual({
      status: 'COMPLETED',
      output: 'partial answer (user pressed stop)',
      interrupted: true,
    });
    expect(seen).toEqual([[true, 'user pressed stop']]);
    const events = await runtime.eventLog.read({}, owner, {
      runId: run.id,
      types: ['run.completed'],
    });
    expect(events.map((e) => e.payload)).toEqual([{ reason: 'interrupted', initiator: 'user' }]);
  });

  it('5. interrupt on CREATED is a cancel', async () => {
    const { runtime } = createTestRuntime();
    const agent = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: agent.agent, input: 'x' });
    expect(run.interrupt()).toBe(true);
    expect(run.status).toBe('CANCELLED');
    expect((await run.termination).status).toBe('CANCELLED');
  });

  it('6. a safe-point cancel lands at the next matching safe point only', async () => {
    const { runtime } = createTestRuntime();
    const steps: string[] = [];
    const gate = gatedAgent();
    const agent: Agent<string, string> = {
      async execute(input, ctx) {
        await gate.agent.execute(input, ctx);
        ctx.safePoint('afterChatModel'); // does not match AfterToolCalls
        steps.push('after chat model');
        ctx.safePoint('afterToolCalls'); // matches: throws
        steps.push('unreachable');
        return 'done';
      },
    };
    const run = runtime.prepare({ ...owner, agent, input: 'x' });
    run.start();
    await gate.started(run.id);
    const cancel = run.cancel({ mode: CancelMode.AfterToolCalls, timeoutMs: 1_000 });
    expect(cancel.contributed).toBe(true);
    expect(run.status).toBe('RUNNING');
    gate.complete(run.id, '');
    expect(await cancel.outcome).toBe('cancelled');
    const outcome = await run.termination;
    expect(outcome).toMatchObject({ status: 'CANCELLED', escalated: false, unsettled: false });
    expect(steps).toEqual(['after chat model']);
    expect(gate.ctx(run.id).signal.aborted).toBe(false); // a clean stop needs no abort
  });

  it('6. a safe-point cancel escalates when no safe point comes in time', async () => {
    const { runtime, clock } = createTestRuntime();
    const gate = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'x' });
    run.start();
    await gate.started(run.id);
    const cancel = run.cancel({ mode: CancelMode.AnySafePoint, timeoutMs: 500 });
    clock.increment(499);
    expect(run.status).toBe('RUNNING');
    expect(gate.ctx(run.id).signal.aborted).toBe(false);
    clock.increment(1);
    expect(run.status).toBe('CANCELLED');
    await tick(); // the signal fires once the step that cancelled the run is over
    expect(gate.ctx(run.id).signal.aborted).toBe(true);
    expect(await cancel.outcome).toBe('escalated');
    expect(await run.termination).toMatchObject({ status: 'CANCELLED', escalated: true });
  });

  it('6. a second, immediate cancel escalates a pending safe-point cancel', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'x' });
    run.start();
    await gate.started(run.id);
    const first = run.cancel({ mode: CancelMode.AfterChatModel });
    const repeat = run.cancel({ mode: CancelMode.AfterChatModel });
    expect(repeat.contributed).toBe(false); // adds nothing to the pending request
    const second = run.cancel({ mode: CancelMode.Immediate });
    expect(second.contributed).toBe(true);
    expect(run.status).toBe('CANCELLED');
    await tick(); // the signal fires once the step that cancelled the run is over
    expect(gate.ctx(run.id).signal.aborted).toBe(true);
    expect(await first.outcome).toBe('escalated');
    expect(await second.outcome).toBe('escalated');
  });

  it('6. an agent that finishes before the safe point: outcome ended, status COMPLETED', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'x' });
    run.start();
    await gate.started(run.id);
    const cancel = run.cancel({ mode: CancelMode.AfterToolCalls, timeoutMs: 1_000 });
    gate.complete(run.id, 'finished first');
    expect(await cancel.outcome).toBe('ended');
    expect(await run.termination).toEqual({
      status: 'COMPLETED',
      output: 'finished first',
      interrupted: false,
    });
  });

  it('7. a recursive cancel reaches nested runs; a non-recursive safe-point cancel lets them finish', async () => {
    const { runtime } = createTestRuntime();
    const child = gatedAgent();
    const childRuns: string[] = [];
    const parent: Agent<string, string> = {
      async execute(input, ctx) {
        const nested = ctx.spawn(child.agent, `${input}/child`);
        childRuns.push(nested.id);
        const out = await nested
          .result()
          .catch((error: unknown) => `child failed: ${String(error)}`);
        ctx.safePoint('afterToolCalls');
        return out;
      },
    };

    // Recursive (immediate) cancel: the nested run is cancelled too.
    const a = runtime.prepare({ ...owner, agent: parent, input: 'a' });
    a.start();
    await tick();
    const nestedA = runtime.runs.find('alice', 's1', childRuns[0] ?? '');
    expect(nestedA?.status).toBe('RUNNING');
    expect(nestedA?.parentRunId).toBe(a.id);
    a.cancel({ mode: CancelMode.Immediate, recursive: true });
    expect(nestedA?.status).toBe('CANCELLED');
    await tick(); // the signal fires once the step that cancelled the run is over
    expect(child.ctx(nestedA?.id ?? '').signal.aborted).toBe(true);
    await a.termination;

    // Non-recursive safe-point cancel: the nested run finishes, the parent stops at its safe point.
    const b = runtime.prepare({ ...owner, agent: parent, input: 'b' });
    b.start();
    await tick();
    expect(childRuns).toHaveLength(2);
    await child.started(childRuns[1] ?? 'missing');
    b.cancel({ mode: CancelMode.AfterToolCalls, recursive: false });
    const nestedB = runtime.runs.find('alice', 's1', childRuns[1] ?? '');
    expect(nestedB?.status).toBe('RUNNING');
    child.complete(childRuns[1] ?? '', 'child output');
    expect(await nestedB?.termination).toEqual({
      status: 'COMPLETED',
      output: 'child output',
      interrupted: false,
    });
    expect(await b.termination).toMatchObject({ status: 'CANCELLED', escalated: false });
  });

  it("7. a parent that rethrows its nested run's cancellation during a recursive safe-point cancel is CANCELLED, not FAILED", async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    // The nested agent works, then reaches its safe point (where the propagated cancel lands).
    const child: Agent<string, string> = {
      async execute(input, ctx) {
        await gate.agent.execute(input, ctx);
        ctx.safePoint('afterToolCalls');
        return 'not reached';
      },
    };
    let nestedId = '';
    const parent: Agent<string, string> = {
      async execute(input, ctx) {
        const nested = ctx.spawn(child, input);
        nestedId = nested.id;
        return nested.result(); // rejects with the nested run's RUN_CANCELLED
      },
    };
    const run = runtime.prepare({ ...owner, agent: parent, input: 'x' });
    run.start();
    await tick();
    await gate.started(nestedId);
    run.cancel({ mode: CancelMode.AfterToolCalls, recursive: true });
    gate.complete(nestedId, 'worked');
    expect(await run.termination).toMatchObject({ status: 'CANCELLED', unsettled: false });
  });

  it('8. timeoutMs counts queue time: a run that waits past its deadline never runs', async () => {
    const { runtime, clock } = createTestRuntime();
    const gate = gatedAgent();
    const a = runtime.prepare({ ...owner, agent: gate.agent, input: 'a' });
    const b = runtime.prepare({ ...owner, agent: gate.agent, input: 'b', timeoutMs: 1_000 });
    a.start();
    b.start();
    expect(b.status).toBe('QUEUED');
    clock.increment(1_000);
    expect(b.status).toBe('CANCELLED');
    await expect(b.result()).rejects.toMatchObject({ code: 'RUN_TIMEOUT' });
    expect(await b.termination).toMatchObject({ status: 'CANCELLED', cause: 'timeout' });
    gate.complete(a.id, 'a');
    await a.termination;
    await runtime.session('alice', 's1').onIdle();
    expect(gate.ran(b.id)).toBe(false);
  });

  it('8. a running run past its deadline is cancelled with cause timeout and its signal fires', async () => {
    const { runtime, clock } = createTestRuntime();
    const gate = gatedAgent();
    const run = runtime.prepare({ ...owner, agent: gate.agent, input: 'a', timeoutMs: 250 });
    run.start();
    await gate.started(run.id);
    clock.increment(250);
    await tick(); // the signal fires once the step that cancelled the run is over
    expect(gate.ctx(run.id).signal.aborted).toBe(true);
    await expect(run.result()).rejects.toMatchObject({ code: 'RUN_TIMEOUT' });
  });

  it('9. an external AbortSignal cancels with cause signal', async () => {
    const { runtime } = createTestRuntime();
    const gate = gatedAgent();
    const controller = new AbortController();
    const run = runtime.prepare({
      ...owner,
      agent: gate.agent,
      input: 'a',
      signal: controller.signal,
    });
    run.start();
    await gate.started(run.id);
    controller.abort();
    expect(run.status).toBe('CANCELLED');
    expect(await run.termination).toMatchObject({ status: 'CANCELLED', cause: 'signal' });
    await expect(run.result()).rejects.toMatchObject({ code: 'RUN_CANCELLED' });

    const already = new AbortController();
    already.abort();
    const late = runtime.prepare({
      ...owner,
      agent: gate.agent,
      input: 'b',
      signal: already.signal,
    });
    expect(late.status).toBe('CANCELLED');
    expect(await late.termination).toMatchObject({ cause: 'signal' });
  });
});
