/**
 * Regression inputs from public bug reports in other agent and workflow runtimes, restated in
 * runplane's terms (issue 7). Every test drives time with the test clock and agents by hand;
 * nothing waits on the wall clock.
 */
import { describe, expect, it } from 'vitest';
import {
  CancelMode,
  createGate,
  createMemoryCheckpointStore,
  createTurnLoop,
  jsonCheckpointCodec,
  type Checkpoint,
  type CheckpointStore,
  createReActAgent,
  createRuntime,
  createScriptedModel,
  sleep,
  type Agent,
  type AgentRun,
  type ChatMessage,
  type Runtime,
} from '../../src/index.js';
import { createScriptedAgent, createTestClock } from '../../src/testing/index.js';

const owner = { ownerId: 'alice', sessionId: 's1' };

function setup(options: { unwindTimeoutMs?: number } = {}) {
  const clock = createTestClock();
  const reported: unknown[] = [];
  const runtime = createRuntime({
    clock,
    reportError: (error) => reported.push(error),
    unwindTimeoutMs: options.unwindTimeoutMs ?? 1_000,
  });
  return { clock, runtime, reported };
}

/** The run's events, as `type` strings, in log order. */
async function typesOf(runtime: Runtime, run: AgentRun<unknown>): Promise<string[]> {
  const key = { ownerId: run.ownerId, sessionId: run.sessionId };
  const events = await runtime.eventLog.read({}, key, { runId: run.id });
  return events.map((event) => event.type);
}

const transcript = (history: readonly ChatMessage[]) =>
  history.map((m) =>
    m.role === 'assistant'
      ? `assistant${m.stop === undefined ? '' : `(${m.stop})`}: ${m.content}`
      : `${m.role}: ${'content' in m ? m.content : ''}`,
  );

describe('regressions from public bug reports', () => {
  it('stop pressed at t=0, before the agent ran a line, is never lost: the run ends CANCELLED and the model is never asked (ag-ui-protocol/ag-ui PR #2759)', async () => {
    const { clock, runtime, reported } = setup();
    const model = createScriptedModel([{ text: 'the whole reply' }], { clock });
    const run = runtime.prepare({ ...owner, agent: createReActAgent({ model }), input: 'q1' });
    run.start();
    expect(run.status).toBe('RUNNING'); // admitted in this very step
    const stop = run.cancel({ reason: 'stop' });
    expect(stop.contributed).toBe(true);
    expect(await run.termination).toMatchObject({ status: 'CANCELLED', unsettled: false });
    expect(await stop.outcome).toBe('cancelled');
    expect(model.requests).toHaveLength(0);
    const types = await typesOf(runtime, run);
    expect(types.filter((t) => t.startsWith('agent.'))).toEqual([]);
    expect(types.filter((t) => t.startsWith('run.') && t !== 'run.status')).toEqual([
      'run.cancelled',
    ]);
    // The next message of the conversation starts from a transcript with no reply of the stopped run.
    const history = await runtime.sessionStore.load({}, owner);
    expect(transcript(history)).toEqual(['user: q1']);
    expect(reported).toEqual([]);
  });

  it('stop pressed at the first byte of the stream: no full reply ever lands, not even later (ag-ui-protocol/ag-ui PR #2759)', async () => {
    const { clock, runtime, reported } = setup();
    const gate = createGate();
    const model = createScriptedModel(
      [{ text: ['Hel', 'lo, the abandoned reply'], gate, gateAt: 1 }, { text: 'reply two' }],
      { clock },
    );
    const agent = createReActAgent({ model });
    const first = runtime.prepare({ ...owner, agent, input: 'q1' });
    first.start();
    await gate.reached; // the first chunk was streamed
    expect((await typesOf(runtime, first)).filter((t) => t === 'agent.message_delta')).toHaveLength(
      1,
    );
    first.cancel({ reason: 'stop' });
    const second = runtime.prepare({ ...owner, agent, input: 'q2' });
    second.start(); // the user types again right away
    gate.open(); // the stream would go on, if anything still read it
    expect(await first.termination).toMatchObject({ status: 'CANCELLED', unsettled: false });
    expect(await second.result()).toMatchObject({ reply: 'reply two', reason: 'completed' });
    await clock.flush();
    const types = await typesOf(runtime, first);
    expect(types.slice(types.indexOf('run.cancelled'))).toEqual(['run.cancelled']);
    expect(types).not.toContain('agent.message');
    const history = await runtime.sessionStore.load({}, owner);
    expect(transcript(history)).toEqual([
      'user: q1',
      'assistant(cancelled): Hel',
      'user: q2',
      'assistant: reply two',
    ]);
    expect(reported).toEqual([]);
  });

  it('a cancel that lands in the same instant the step completes: the first terminal state wins, exactly once (temporalio/sdk-typescript #1580)', async () => {
    const { clock, runtime, reported } = setup();
    const agent = createScriptedAgent<string>({ onAbort: 'ignore' });
    const cancelFirst = runtime.prepare({ ...owner, sessionId: 'a', agent, input: 1, runId: 'a' });
    const completeFirst = runtime.prepare({
      ...owner,
      sessionId: 'b',
      agent,
      input: 2,
      runId: 'b',
    });
    const safePoint = runtime.prepare({ ...owner, sessionId: 'c', agent, input: 3, runId: 'c' });
    const deadline = runtime.prepare({
      ...owner,
      sessionId: 'd',
      agent,
      input: 4,
      runId: 'd',
      timeoutMs: 100,
    });
    for (const run of [cancelFirst, completeFirst, safePoint, deadline]) run.start();
    await clock.flush();

    // The agent's result is already resolved, not yet delivered, when the cancel lands.
    agent.complete('a', 'done');
    const a = cancelFirst.cancel();
    // The agent's result was delivered; the cancel comes in the next instant.
    agent.complete('b', 'done');
    await clock.flush();
    const b = completeFirst.cancel();
    // A safe-point cancel pending when the agent returns instead of reaching the safe point.
    const c = safePoint.cancel({ mode: CancelMode.AnySafePoint, timeoutMs: 50 });
    agent.complete('c', 'done');
    await clock.flush();
    // The deadline fires while the agent's result is in flight.
    agent.complete('d', 'done');
    clock.increment(100);
    await clock.advance(100);

    expect(await cancelFirst.termination).toEqual({
      status: 'CANCELLED',
      cause: 'cancel',
      reason: undefined,
      escalated: false,
      unsettled: false,
    });
    expect([a.contributed, await a.outcome]).toEqual([true, 'cancelled']);
    expect(await completeFirst.termination).toEqual({
      status: 'COMPLETED',
      output: 'done',
      interrupted: false,
    });
    expect([b.contributed, await b.outcome]).toEqual([false, 'ended']);
    expect(await safePoint.termination).toMatchObject({ status: 'COMPLETED', output: 'done' });
    expect([c.contributed, await c.outcome]).toEqual([true, 'ended']);
    expect(await deadline.termination).toMatchObject({ status: 'CANCELLED', cause: 'timeout' });
    for (const run of [cancelFirst, completeFirst, safePoint, deadline]) {
      const terminal = (await typesOf(runtime, run)).filter((t) =>
        ['run.completed', 'run.failed', 'run.cancelled'].includes(t),
      );
      expect(terminal).toHaveLength(1);
    }
    expect(reported).toEqual([]);
  });

  it('a cancel after the run ended is a no-op that answers ended, whatever the ending (temporalio/sdk-rust #705)', async () => {
    const { clock, runtime, reported } = setup();
    const agent = createScriptedAgent<string>();
    const [completed, failed, cancelled] = ['c', 'f', 'x'].map((id) =>
      runtime.prepare({ ...owner, sessionId: id, agent, input: id, runId: id }),
    ) as [AgentRun<string>, AgentRun<string>, AgentRun<string>];
    for (const run of [completed, failed, cancelled]) run.start();
    agent.complete('c', 'done');
    agent.fail('f', new Error('boom'));
    cancelled.cancel();
    await clock.flush();
    const outcomes = await Promise.all([completed, failed, cancelled].map((r) => r.termination));

    for (const [index, run] of [completed, failed, cancelled].entries()) {
      for (const mode of [CancelMode.Immediate, CancelMode.AnySafePoint]) {
        const result = run.cancel({ mode, timeoutMs: 10 });
        expect(result.contributed).toBe(false);
        expect(await result.outcome).toBe('ended');
      }
      expect(run.interrupt()).toBe(false);
      expect(runtime.runs.cancel(owner.ownerId, run.sessionId, run.id)).toBe('ended');
      await clock.advance(100);
      expect(await run.termination).toBe(outcomes[index]);
    }
    expect(outcomes.map((o) => o.status)).toEqual(['COMPLETED', 'FAILED', 'CANCELLED']);
    expect(reported).toEqual([]);
  });

  it('cancelling run A never affects run B, in the same session or another, by handle or by id (mastra-ai/mastra #19883)', async () => {
    const { clock, runtime, reported } = setup();
    const agent = createScriptedAgent<string>();
    const a = runtime.prepare({ ...owner, agent, input: 'a', runId: 'a' });
    const b = runtime.prepare({ ...owner, agent, input: 'b', runId: 'b' }); // queued behind A
    const c = runtime.prepare({ ...owner, sessionId: 's2', agent, input: 'c', runId: 'c' });
    const d = runtime.prepare({ ownerId: 'bob', sessionId: 's1', agent, input: 'd', runId: 'd' });
    for (const run of [a, b, c, d]) run.start();
    await clock.flush();
    const view = (run: AgentRun<unknown>) => ({
      status: run.status,
      aborted: agent.context(run.id)?.signal.aborted ?? false,
      interrupted: agent.context(run.id)?.interruptRequested ?? false,
    });
    const before = [b, c, d].map(view);

    // Lookups need owner, session and id: a wrong owner or session reaches nothing.
    expect(runtime.runs.cancel('bob', 's1', 'a')).toBe('not_found');
    expect(runtime.runs.cancel('alice', 's2', 'a')).toBe('not_found');
    expect(runtime.runs.interrupt('alice', 's1', 'no-such-run')).toBe('not_found');
    expect(view(a)).toEqual({ status: 'RUNNING', aborted: false, interrupted: false });
    expect(runtime.runs.cancel('alice', 's1', 'a')).toBe('accepted');
    a.cancel({ mode: CancelMode.AnySafePoint });
    a.interrupt();
    expect([b, c, d].map(view)).toEqual(before);
    expect(await a.termination).toMatchObject({ status: 'CANCELLED' });
    await clock.flush();
    // B was waiting for A, and now runs; nobody else was touched.
    expect([b, c, d].map(view)).toEqual([
      { status: 'RUNNING', aborted: false, interrupted: false },
      before[1],
      before[2],
    ]);
    for (const run of [b, c, d]) agent.complete(run.id, `${run.id} done`);
    const outcomes = await Promise.all([b, c, d].map((run) => run.termination));
    expect(outcomes.map((o) => o.status)).toEqual(['COMPLETED', 'COMPLETED', 'COMPLETED']);
    expect(reported).toEqual([]);
  });

  it('a cancelled run never returns to running on a later tick, whatever its agent does next (triggerdotdev/trigger.dev #888)', async () => {
    const { clock, runtime, reported } = setup({ unwindTimeoutMs: 1_000 });
    const agent = createScriptedAgent<string>({ onAbort: 'ignore', onSafePointCancel: 'hold' });
    const running = runtime.prepare({ ...owner, agent, input: 'r', runId: 'running' });
    const queued = runtime.prepare({ ...owner, agent, input: 'q', runId: 'queued' });
    running.start();
    queued.start();
    await clock.flush();
    running.cancel();
    queued.cancel();
    const statuses = new Set<string>();
    runtime.onEvent((event) => {
      if (event.type === 'run.status')
        statuses.add(`${event.runId}:${(event.payload as { to: string }).to}`);
    });
    for (let tick = 0; tick < 5; tick++) {
      // The agent goes on as if nothing happened: it writes, reaches safe points, retries.
      agent.emit('running', 'agent.message', { text: `tick ${tick}` });
      expect(agent.safePoint('running', 'afterToolCalls')).toBe('cancelled');
      await clock.advance(100);
      expect([running.status, queued.status]).toEqual(['CANCELLED', 'CANCELLED']);
    }
    agent.complete('running', 'finished anyway');
    expect(await running.termination).toMatchObject({ status: 'CANCELLED', unsettled: false });
    await clock.advance(5_000);
    expect(statuses).toEqual(new Set());
    expect(agent.executed).toEqual(['running']); // the cancelled queued run was never admitted
    expect((await typesOf(runtime, running)).filter((t) => t.startsWith('agent.'))).toEqual([]);
    expect(runtime.session(owner.ownerId, owner.sessionId).activeRunId).toBeUndefined();
    expect(reported).toEqual([]);
  });

  it("a new run right after a cancel never races the old run's writes (openai/openai-agents-js PR #1527)", async () => {
    const { clock, runtime, reported } = setup({ unwindTimeoutMs: 1_000 });
    const order: string[] = [];
    // The old run needs 50 ms after its abort to finish writing the transcript.
    const slowToUnwind: Agent<string, string> = {
      async execute(input, ctx) {
        await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
        ctx.emit('agent.message', { text: 'late' }); // fenced: the run is already CANCELLED
        await sleep(ctx.clock, 50);
        await ctx.history.append([{ role: 'user', content: input }]);
        order.push('old run wrote');
        throw ctx.signal.reason;
      },
    };
    const reader: Agent<string, string> = {
      async execute(input, ctx) {
        const history = await ctx.history.load();
        order.push(`new run read ${history.length} message(s)`);
        await ctx.history.append([{ role: 'user', content: input }]);
        return 'ok';
      },
    };
    const old = runtime.prepare({ ...owner, agent: slowToUnwind, input: 'old' });
    old.start();
    await clock.flush();
    old.cancel();
    const next = runtime.prepare({ ...owner, agent: reader, input: 'new' });
    next.start();
    expect([old.status, next.status]).toEqual(['CANCELLED', 'QUEUED']);
    await clock.advance(49);
    expect(next.status).toBe('QUEUED');
    await clock.advance(1);
    expect(await next.result()).toBe('ok');
    expect(order).toEqual(['old run wrote', 'new run read 1 message(s)']);
    const history = await runtime.sessionStore.load({}, owner);
    expect(transcript(history)).toEqual(['user: old', 'user: new']);
    expect(await typesOf(runtime, old)).not.toContain('agent.message');
    expect(reported).toEqual([]);
  });

  it('items arriving while the loop finishes are never dropped: accepted ones are unhandled and saved, refused ones are late (temporalio/sdk-dotnet #427)', async () => {
    const { clock, runtime, reported } = setup();
    const memory = createMemoryCheckpointStore();
    const saving = createGate();
    const store: CheckpointStore = {
      get: (ctx, id) => memory.get(ctx, id),
      delete: (ctx, id) => memory.delete(ctx, id),
      set: async (ctx, id, data) => {
        await saving.wait(); // the final save is in flight until the test opens the gate
        await memory.set(ctx, id, data);
      },
    };
    const agent = createScriptedAgent<string>();
    const offered: string[][] = [];
    const loopOn = (checkpointStore: CheckpointStore) =>
      createTurnLoop<string>({
        runtime,
        ...owner,
        store: checkpointStore,
        checkpointId: 'chat',
        genInput: (items) => {
          offered.push([...items]);
          return { input: items[0], consumed: items.slice(0, 1), remaining: items.slice(1) };
        },
        prepareAgent: () => agent,
      });
    const loop = loopOn(store);
    loop.push('first');
    loop.run();
    await clock.flush();
    const [turnRun] = agent.executed;
    expect(loop.push('queued').accepted).toBe(true); // waits for the next turn
    // Stop after this turn; the turn finishes, and in that very instant more items arrive.
    loop.stop({ mode: 'afterTurn' });
    expect(loop.push('while stopping').accepted).toBe(false);
    agent.complete(turnRun!, 'done');
    expect(loop.push('as the turn ends').accepted).toBe(false);
    await saving.reached;
    expect(loop.push('while saving').accepted).toBe(false);
    saving.open();
    const exit = await loop.wait();
    expect(loop.push('after exit').accepted).toBe(false);
    expect(exit.exitReason).toBeUndefined();
    expect(exit.unhandledItems).toEqual(['queued']);
    expect(exit.takeLateItems()).toEqual([
      'while stopping',
      'as the turn ends',
      'while saving',
      'after exit',
    ]);
    const data = await memory.get({}, 'chat');
    const saved = jsonCheckpointCodec.decode(data ?? new Uint8Array()) as Checkpoint<string>;
    expect(saved.unhandled).toEqual(['queued']);

    // The restarted loop offers the saved item first, before anything pushed since.
    const restarted = loopOn(memory);
    restarted.push('new');
    restarted.run();
    await clock.flush();
    expect(offered).toEqual([['first'], ['queued', 'new']]);
    restarted.stop({ mode: 'immediate', skipCheckpoint: true });
    await restarted.wait();
    expect(reported).toEqual([]);
  });

  it('N pushes in one tick are handled in push order, with or without a preempt among them (langchain-ai/langgraphjs PR #2484)', async () => {
    const { clock, runtime, reported } = setup();
    const agent = createScriptedAgent<string>();
    const offered: number[][] = [];
    const consumed: number[] = [];
    const loop = createTurnLoop<number>({
      runtime,
      ...owner,
      genInput: (items) => {
        offered.push([...items]);
        return { input: items[0], consumed: items.slice(0, 1), remaining: items.slice(1) };
      },
      prepareAgent: () => agent,
      onAgentEvents: async (turn, events) => {
        consumed.push(...turn.consumed);
        for await (const _event of events) {
          // drain
        }
        return undefined;
      },
    });
    const pushAll = (from: number, to: number, preemptAt?: number) => {
      for (let item = from; item <= to; item++) {
        loop.push(item, item === preemptAt ? { preempt: CancelMode.AnySafePoint } : {});
      }
    };
    pushAll(1, 20); // one tick, before the loop runs
    loop.run();
    await clock.flush();
    pushAll(21, 40, 30); // one tick, while turn 1 runs; item 30 preempts it
    const finishTurns = async () => {
      const running = () => agent.executed.filter((runId) => agent.isExecuting(runId));
      for (let round = 0; round < 100 && (consumed.length < 40 || running().length > 0); round++) {
        for (const runId of running()) {
          if (agent.safePoint(runId, 'afterToolCalls') === 'continued') agent.complete(runId, 'ok');
        }
        await clock.flush();
      }
    };
    await finishTurns();
    loop.stop();
    const exit = await loop.wait();
    expect(consumed).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    for (const items of offered) expect(items).toEqual([...items].sort((a, b) => a - b));
    expect(offered[0]).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(offered[1]).toEqual(Array.from({ length: 39 }, (_, i) => i + 2));
    expect(exit.unhandledItems).toEqual([]);
    expect(reported).toEqual([]);
  });
});
