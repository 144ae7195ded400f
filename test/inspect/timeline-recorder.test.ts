import { describe, expect, it, vi } from 'vitest';
import type { InspectionEvent } from 'xstate';
import {
  CancelMode,
  combineInspectors,
  createTimelineRecorder,
  encodeTimelineTransition,
  parseTimelineTrace,
  type Agent,
} from '../../src/index.js';
import { createRecordedRuntime, pathOf, steppingAgent } from './timeline-helpers.js';

const chat = { ownerId: 'alice', sessionId: 'chat-1' };

/** Waits for its signal, then returns: an agent that never reaches a safe point. */
const waitsForSignal: Agent<string, string> = {
  execute: (_input, ctx) =>
    new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve('aborted'))),
};

describe('createTimelineRecorder', () => {
  it('writes one line per lifecycle transition of a run and its session', async () => {
    const { runtime, advance, transitions, trace } = createRecordedRuntime();
    const run = runtime.prepare({ ...chat, agent: steppingAgent(2, 100), input: 'x', runId: 'r1' });
    await advance(10);
    run.start();
    await advance(200);
    expect(await run.result()).toBe('done x');

    const all = transitions();
    expect(pathOf(all, 'r1')).toEqual([
      [0, null, 'CREATED', 'xstate.init', null],
      // Started into an idle session: admitted in the same step, QUEUED is passed within it.
      [10, 'CREATED', 'RUNNING', 'run.start', null],
      [210, 'RUNNING', 'COMPLETED', 'agent.done', null],
    ]);
    // The session actor exists from the run's prepare (it spawns the run); an idle session with
    // a free slot admits in the same step as the start, and is idle again when its run settles.
    expect(pathOf(all, 'alice/chat-1')).toEqual([
      [0, null, 'idle', 'xstate.init', null],
      [10, 'idle', 'active', 'session.start', null],
      // The run's child actor id (recycled per session), not its run id: machines/child-ids.ts.
      [210, 'active', 'idle', 'xstate.done.actor.c0', null],
    ]);
    expect(all.filter((t) => t.actor === 'run').every((t) => t.parentId === 'alice/chat-1')).toBe(
      true,
    );
    expect(all.find((t) => t.actor === 'session')?.parentId).toBeNull();
    // Compact on disk: no null fields, parentId on the first line only.
    const lines = trace().trimEnd().split('\n');
    // The session's actor exists first: it spawns the run.
    expect(lines[0]).toBe(
      '{"t":0,"actor":"session","id":"alice/chat-1","to":"idle","event":"xstate.init"}',
    );
    expect(lines[1]).toBe(
      '{"t":0,"actor":"run","id":"r1","parentId":"alice/chat-1","to":"CREATED","event":"xstate.init"}',
    );
    expect(lines.filter((line) => line.includes('"parentId"'))).toHaveLength(1); // sessions have none
    expect(lines.some((line) => line.includes('null'))).toBe(false);
  });

  it('records cancel, interrupt, timeout and a safe-point cancel that escalates, with their causes', async () => {
    const { runtime, advance, transitions } = createRecordedRuntime();
    const active = runtime.prepare({
      ...chat,
      agent: steppingAgent(5, 100),
      input: 'a',
      runId: 'a',
    });
    const cancelled = runtime.prepare({ ...chat, agent: waitsForSignal, input: 'b', runId: 'b' });
    const timedOut = runtime.prepare({
      ...chat,
      agent: waitsForSignal,
      input: 'c',
      runId: 'c',
      timeoutMs: 150,
    });
    const escalated = runtime.prepare({ ...chat, agent: waitsForSignal, input: 'd', runId: 'd' });
    for (const run of [active, cancelled, timedOut, escalated]) run.start();
    await advance(50);
    expect(cancelled.cancel().contributed).toBe(true);
    await advance(100); // t = 150: c's deadline (queue time counts)
    expect(active.interrupt('enough')).toBe(true);
    expect(active.interrupt('again')).toBe(false); // no second line
    await advance(50); // t = 200: the agent notices the interrupt after its step
    expect(await active.result()).toBe('interrupted after 2');
    await advance(10); // t = 210: d runs
    expect(escalated.status).toBe('RUNNING');
    escalated.cancel({ mode: CancelMode.AnySafePoint, timeoutMs: 100 });
    await advance(100); // t = 310: no safe point came, the cancel escalates
    expect(await escalated.termination).toMatchObject({ status: 'CANCELLED', escalated: true });

    const all = transitions();
    expect(pathOf(all, 'a').slice(1)).toEqual([
      [0, 'CREATED', 'RUNNING', 'run.start', null],
      [150, 'RUNNING', 'RUNNING', 'run.interrupt', 'interrupt'],
      [200, 'RUNNING', 'COMPLETED', 'agent.done', 'interrupted'],
    ]);
    expect(pathOf(all, 'b').slice(2)).toEqual([
      [50, 'QUEUED', 'CANCELLED.settled', 'run.cancel', 'cancel'],
    ]);
    expect(pathOf(all, 'c').slice(2)).toEqual([
      [150, 'QUEUED', 'CANCELLED.settled', 'run.deadline', 'timeout'],
    ]);
    expect(pathOf(all, 'd').slice(2)).toEqual([
      [200, 'QUEUED', 'RUNNING', 'run.admit', null],
      [210, 'RUNNING', 'cancelling', 'run.cancel', 'cancel'],
      [310, 'cancelling', 'CANCELLED.unwinding', 'run.cancel_deadline', 'escalation'],
      [310, 'CANCELLED.unwinding', 'CANCELLED.settled', 'agent.done', null],
    ]);
  });

  it('records a preempt on the session and on the runs it cancels', async () => {
    const { runtime, advance, transitions } = createRecordedRuntime();
    const first = runtime.prepare({
      ...chat,
      agent: steppingAgent(10, 100),
      input: '1',
      runId: 'p1',
    });
    const waiting = runtime.prepare({
      ...chat,
      agent: steppingAgent(1, 10),
      input: '2',
      runId: 'p2',
    });
    first.start();
    waiting.start();
    await advance(50);
    const urgent = runtime.prepare({
      ...chat,
      agent: steppingAgent(1, 10),
      input: '3',
      runId: 'p3',
      strategy: 'preempt',
      graceMs: 1_000,
    });
    urgent.start();
    await advance(50); // t = 100: p1 reaches its safe point
    await advance(10);
    expect(await urgent.result()).toBe('done 3');

    const all = transitions();
    expect(pathOf(all, 'alice/chat-1')).toContainEqual([
      50,
      'active',
      'active',
      'session.start',
      'preempt',
    ]);
    expect(pathOf(all, 'p2').slice(2)).toEqual([
      [50, 'QUEUED', 'CANCELLED.settled', 'run.cancel', 'preempt'],
    ]);
    expect(pathOf(all, 'p1').slice(2)).toEqual([
      [50, 'RUNNING', 'cancelling', 'run.cancel', 'preempt'],
      [100, 'cancelling', 'CANCELLED.unwinding', 'run.safe_point', 'preempt'],
      [100, 'CANCELLED.unwinding', 'CANCELLED.settled', 'agent.error', null],
    ]);
    expect(pathOf(all, 'p3').at(-1)).toEqual([110, 'RUNNING', 'COMPLETED', 'agent.done', null]);
  });

  it('records the interrupt strategy: the session interrupts, then cancels after its grace', async () => {
    const { runtime, advance, transitions } = createRecordedRuntime();
    const stubborn = runtime.prepare({ ...chat, agent: waitsForSignal, input: '1', runId: 'i1' });
    stubborn.start();
    await advance(10);
    const next = runtime.prepare({
      ...chat,
      agent: steppingAgent(1, 10),
      input: '2',
      runId: 'i2',
      strategy: 'interrupt',
      graceMs: 50,
    });
    next.start();
    await advance(50); // t = 60: grace over
    await advance(10);
    expect(await next.result()).toBe('done 2');

    const all = transitions();
    const session = pathOf(all, 'alice/chat-1');
    expect(session).toContainEqual([10, 'active', 'interrupting', 'session.start', 'interrupt']);
    expect(session).toContainEqual([
      60,
      'interrupting',
      'active',
      'xstate.after.grace.session.interrupting',
      'escalation',
    ]);
    expect(pathOf(all, 'i1').slice(2)).toEqual([
      [10, 'RUNNING', 'RUNNING', 'run.interrupt', 'interrupt'],
      [60, 'RUNNING', 'CANCELLED.unwinding', 'run.cancel', 'cancel'],
      [60, 'CANCELLED.unwinding', 'CANCELLED.settled', 'agent.done', null],
    ]);
  });

  it("gives a nested run its parent run's id as parentId, and parsing restores it on every line", async () => {
    const { runtime, advance, transitions, trace } = createRecordedRuntime();
    let childId = '';
    const parentAgent: Agent<string, string> = {
      async execute(input, ctx) {
        const child = ctx.spawn(steppingAgent(1, 10), `${input}-child`);
        childId = child.id;
        return child.result();
      },
    };
    const parent = runtime.prepare({ ...chat, agent: parentAgent, input: 'p', runId: 'parent' });
    parent.start();
    await advance(10);
    expect(await parent.result()).toBe('done p-child');

    const child = transitions().filter((t) => t.id === childId);
    // A nested run bypasses the session: CREATED → QUEUED → RUNNING in one step.
    expect(child.map((t) => t.to)).toEqual(['CREATED', 'RUNNING', 'COMPLETED']);
    expect(child.every((t) => t.parentId === 'parent')).toBe(true);
    const childLines = trace()
      .split('\n')
      .filter((line) => line.includes(childId));
    expect(childLines.filter((line) => line.includes('"parentId":"parent"'))).toHaveLength(1);
  });

  it('round-trips: parse(encode(t)) gives the transitions back, and bad lines are named', () => {
    const transitions = [
      {
        t: 1,
        actor: 'run',
        id: 'r',
        parentId: 'o/s',
        from: null,
        to: 'CREATED',
        event: 'xstate.init',
        cause: null,
      },
      {
        t: 2,
        actor: 'run',
        id: 'r',
        parentId: 'o/s',
        from: 'CREATED',
        to: 'CANCELLED.settled',
        event: 'run.cancel',
        cause: 'cancel',
      },
    ] as const;
    const text = transitions.map((t) => `${encodeTimelineTransition(t)}\n`).join('');
    expect(parseTimelineTrace(`${text}\n`)).toEqual(transitions);
    expect(() =>
      parseTimelineTrace('{"t":1,"actor":"run","id":"r","to":"X","event":"e"}\nnope'),
    ).toThrow(
      /^INVALID_ARGUMENT: expected `trace` line 2 to be a timeline transition, got invalid JSON/,
    );
    expect(() =>
      parseTimelineTrace('{"t":1,"actor":"robot","id":"r","to":"X","event":"e"}'),
    ).toThrow(/line 1 .* got actor "robot"/);
  });

  it('a throwing sink is reported and never reaches the runtime', async () => {
    const reported: unknown[] = [];
    const recorder = createTimelineRecorder({
      sink: () => {
        throw new Error('disk full');
      },
      onError: (error) => reported.push(error),
    });
    const { runtime, advance } = createRecordedRuntime({ inspect: recorder.inspect });
    const run = runtime.prepare({ ...chat, agent: steppingAgent(1, 10), input: 'x' });
    run.start();
    await advance(10);
    expect(await run.result()).toBe('done x');
    expect(reported.length).toBeGreaterThan(3);
    expect(reported.every((e) => e instanceof Error && e.message === 'disk full')).toBe(true);
  });

  it('writes to a stream-like sink, honours filter, counts lines, and rejects a bad sink', async () => {
    const written: string[] = [];
    const recorder = createTimelineRecorder({
      sink: { write: (chunk: string) => written.push(chunk) },
      filter: (t) => t.actor === 'run',
    });
    const { runtime, advance } = createRecordedRuntime({ inspect: recorder.inspect });
    const run = runtime.prepare({ ...chat, agent: steppingAgent(1, 10), input: 'x', runId: 'f1' });
    run.start();
    await advance(10);
    await run.termination;
    expect(written.every((chunk) => chunk.endsWith('}\n'))).toBe(true);
    expect(parseTimelineTrace(written.join('')).map((t) => [t.actor, t.to])).toEqual([
      ['run', 'CREATED'],
      ['run', 'RUNNING'],
      ['run', 'COMPLETED'],
    ]);
    expect(recorder.count).toBe(3);
    expect(() => createTimelineRecorder({ sink: 42 as never })).toThrow(
      /^INVALID_ARGUMENT: expected `sink` to be a function or an object with a write method/,
    );
  });

  it('combineInspectors feeds every observer and isolates one that throws', () => {
    const seen: string[] = [];
    const error = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    const inspect = combineInspectors(
      (event) => seen.push(`fn ${event.type}`),
      () => {
        throw new Error('broken inspector');
      },
      { next: (event) => seen.push(`observer ${event.type}`) },
    );
    inspect({ type: '@xstate.actor' } as InspectionEvent);
    expect(seen).toEqual(['fn @xstate.actor', 'observer @xstate.actor']);
    expect(error).toHaveBeenCalledTimes(1);
    error.mockRestore();
  });

  it('a 10,000-run trace stays under 5 MB', { timeout: 120_000 }, async () => {
    // Epoch-sized timestamps, as with the system clock; 100 sessions of 100 queued runs each.
    const { runtime, advance, trace, transitions } = createRecordedRuntime({
      startAt: 1_750_000_000_000,
      maxQueuedRuns: 100,
    });
    const runs = [];
    for (let i = 0; i < 10_000; i++) {
      const run = runtime.prepare({
        ownerId: `user-${i % 10}`,
        sessionId: `chat-${i % 100}`,
        agent: steppingAgent(2, 5),
        input: String(i),
      });
      run.start();
      runs.push(run);
      if (i % 10 === 9) run.cancel({ reason: 'user cancelled' }); // a tenth cancelled in the queue
    }
    while (runtime.runs.size > 0) await advance(10);
    const outcomes = await Promise.all(runs.map((run) => run.termination));
    expect(outcomes.filter((o) => o.status === 'COMPLETED')).toHaveLength(9_000);
    expect(outcomes.filter((o) => o.status === 'CANCELLED')).toHaveLength(1_000);

    const bytes = Buffer.byteLength(trace());
    expect(bytes).toBeLessThan(5_000_000);
    const all = transitions();
    // 4 lines per completed run, 3 per run cancelled in the queue, 5 per run cancelled while
    // running (the first of 10 sessions), one fewer for the first run of each of the 100
    // sessions (admitted as it starts: CREATED → RUNNING in one step), and the sessions' few.
    expect(all.filter((t) => t.actor === 'run')).toHaveLength(9_000 * 4 + 990 * 3 + 10 * 5 - 100);
    expect(all.filter((t) => t.actor === 'session').length).toBeLessThan(1_000);
  });
});
