import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CancelMode } from '../../machines/cancel-request.js';
import { createGate } from '../../src/agent/gate.js';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { defineTool } from '../../src/agent/tool.js';
import { sleep } from '../../src/clock.js';
import { RunCancelledError } from '../../src/errors.js';
import {
  deferred,
  eventsOf,
  expectNoHalfToolCalls,
  flush,
  owner,
  session,
  setup,
  summarize,
  startReActRun,
} from './helpers.js';

const key = { ownerId: owner, sessionId: session };

describe('createReActAgent: cancel', () => {
  it('cancel while streaming aborts the model call and saves the partial reply', async () => {
    const { clock, runtime } = setup();
    const model = createScriptedModel([{ text: ['Once ', 'upon ', 'a time'], chunkDelayMs: 10 }], {
      clock,
    });
    const run = startReActRun(runtime, { model }, 'Tell a story');
    await flush();
    clock.increment(10);
    await flush();
    clock.increment(10);
    await flush();
    run.cancel({ reason: 'user pressed stop' });
    const outcome = await run.termination;
    expect(outcome).toMatchObject({ status: 'CANCELLED', cause: 'cancel', unsettled: false });
    expect(model.requests[0]?.signal.aborted).toBe(true);
    const history = await runtime.sessionStore.load({}, key);
    expect(summarize(history)).toEqual(['user: Tell a story', 'assistant(cancelled): Once upon ']);
  });

  it('cancel during a tool that honours its signal: the tool sees the abort, the run settles, the history is whole', async () => {
    const { clock, runtime } = setup();
    const started = deferred();
    let reason: unknown;
    const fetchPage = defineTool({
      name: 'fetch_page',
      description: 'Fetches a page',
      parameters: z.object({ url: z.string() }),
      execute: async (_args, ctx) => {
        started.resolve();
        try {
          await sleep(ctx.clock, 30_000, ctx.signal);
          return 'page';
        } catch (error) {
          reason = ctx.signal.reason;
          throw error;
        }
      },
    });
    const quick = defineTool({
      name: 'quick',
      description: 'Quick',
      parameters: z.object({}),
      execute: () => 'quick done',
    });
    const model = createScriptedModel(
      [
        {
          text: 'Fetching.',
          toolCalls: [
            { id: 'q', name: 'quick' },
            { id: 'f', name: 'fetch_page', args: { url: 'https://example.test' } },
          ],
        },
      ],
      { clock },
    );
    const run = startReActRun(runtime, { model, tools: [quick, fetchPage] }, 'Read the page');
    await started.promise;
    await flush(); // `quick` finishes; `fetch_page` waits on the clock
    run.cancel();
    const outcome = await run.termination;
    expect(outcome).toMatchObject({ status: 'CANCELLED', unsettled: false, escalated: false });
    expect(reason).toBeInstanceOf(RunCancelledError);
    const history = await runtime.sessionStore.load({}, key);
    expect(summarize(history)).toEqual([
      'user: Read the page',
      'assistant: Fetching. [quick, fetch_page]',
      'tool quick: quick done', // finished work is kept
      'tool(error) fetch_page: Error: the run was cancelled before this tool call finished.',
    ]);
    expectNoHalfToolCalls(history);
  });

  it('cancel during a tool that ignores its signal: abandoned after unwindTimeoutMs with unsettled: true, history still saved', async () => {
    const { clock, runtime } = setup({ unwindTimeoutMs: 2_000 });
    const started = deferred();
    const release = deferred();
    let toolSignal: AbortSignal | undefined;
    const stubborn = defineTool({
      name: 'wire_money',
      description: 'Cannot be stopped',
      parameters: z.object({}),
      execute: async (_args, ctx) => {
        toolSignal = ctx.signal;
        started.resolve();
        await release.promise; // never looks at its signal
        return 'sent';
      },
    });
    const model = createScriptedModel([{ toolCalls: [{ id: 'w', name: 'wire_money' }] }], {
      clock,
    });
    const run = runtime.prepare({
      ownerId: owner,
      sessionId: session,
      agent: createReActAgent({ model, tools: [stubborn] }),
      input: 'Pay',
    });
    let settled = false;
    void run.termination.then(() => (settled = true));
    run.start();
    await started.promise;
    run.cancel();
    expect(run.status).toBe('CANCELLED');
    await Promise.resolve(); // the signal fires once the cancelling step is over
    expect(toolSignal?.aborted).toBe(true);
    await flush();
    expect(settled).toBe(false); // the agent still waits for its tool
    // What the run produced is saved at the cancel, even though the agent cannot finish.
    expect(summarize(await runtime.sessionStore.load({}, key))).toEqual([
      'user: Pay',
      'assistant:  [wire_money]',
      'tool(error) wire_money: Error: the run was cancelled before this tool call finished.',
    ]);
    clock.increment(1_999);
    await flush();
    expect(settled).toBe(false);
    clock.increment(1);
    const outcome = await run.termination;
    expect(outcome).toMatchObject({ status: 'CANCELLED', unsettled: true });
    const types = (await eventsOf(runtime)).map((e) => e.type);
    expect(types).toContain('run.unsettled');
    // The late tool result is fenced off: no event, no second write.
    release.resolve();
    await flush();
    const after = await eventsOf(runtime);
    expect(after.filter((e) => e.type === 'agent.tool_result')).toHaveLength(0);
    expect(await runtime.sessionStore.load({}, key)).toHaveLength(3);
  });

  it('a safe-point cancel AfterChatModel lands before any tool runs', async () => {
    const { clock, runtime } = setup();
    const gate = createGate();
    let executed = 0;
    const del = defineTool({
      name: 'delete_files',
      description: 'Deletes files',
      parameters: z.object({}),
      execute: () => ++executed,
    });
    // The gate holds the reply just before its finish chunk: the cancel is requested mid-reply.
    const model = createScriptedModel(
      [
        { text: 'Deleting.', toolCalls: [{ id: 'd', name: 'delete_files' }], gate, gateAt: 3 },
        { text: 'never' },
      ],
      { clock },
    );
    const run = startReActRun(runtime, { model, tools: [del] }, 'Clean up');
    await gate.reached;
    const { contributed, outcome } = run.cancel({ mode: CancelMode.AfterChatModel });
    expect(contributed).toBe(true);
    expect(run.status).toBe('RUNNING'); // waits for the safe point
    gate.open();
    expect(await outcome).toBe('cancelled');
    const end = await run.termination;
    expect(end).toMatchObject({ status: 'CANCELLED', escalated: false, unsettled: false });
    expect(executed).toBe(0);
    expect(model.requests).toHaveLength(1);
    expect(model.requests[0]?.signal.aborted).toBe(false); // the reply was allowed to finish
    const history = await runtime.sessionStore.load({}, key);
    expect(summarize(history)).toEqual([
      'user: Clean up',
      'assistant: Deleting. [delete_files]',
      'tool(error) delete_files: Error: the run was cancelled before this tool call finished.',
    ]);
    expectNoHalfToolCalls(history);
    const types = (await eventsOf(runtime)).map((e) => e.type);
    expect(types).toContain('agent.tool_use');
    expect(types).not.toContain('agent.tool_result');
  });

  it('a safe-point cancel AfterToolCalls lets the tools finish and stops before the next model call', async () => {
    const { clock, runtime } = setup();
    const started = deferred();
    const finish = deferred();
    const tool = defineTool({
      name: 'step',
      description: 'A step',
      parameters: z.object({}),
      execute: async () => {
        started.resolve();
        await finish.promise;
        return 'stepped';
      },
    });
    const model = createScriptedModel([{ toolCalls: [{ name: 'step' }] }, { text: 'never' }], {
      clock,
    });
    const run = startReActRun(runtime, { model, tools: [tool] }, 'go');
    await started.promise;
    run.cancel({ mode: CancelMode.AfterToolCalls });
    finish.resolve();
    expect(await run.termination).toMatchObject({ status: 'CANCELLED', escalated: false });
    expect(model.requests).toHaveLength(1);
    expect(summarize(await runtime.sessionStore.load({}, key))).toEqual([
      'user: go',
      'assistant:  [step]',
      'tool step: stepped',
    ]);
  });

  it('a safe-point cancel escalates to immediate at its deadline', async () => {
    const { clock, runtime } = setup();
    const started = deferred();
    let aborted = false;
    const tool = defineTool({
      name: 'long',
      description: 'Long',
      parameters: z.object({}),
      execute: async (_args, ctx) => {
        started.resolve();
        try {
          await sleep(ctx.clock, 60_000, ctx.signal);
        } finally {
          aborted = ctx.signal.aborted;
        }
      },
    });
    const model = createScriptedModel([{ toolCalls: [{ name: 'long' }] }], { clock });
    const run = startReActRun(runtime, { model, tools: [tool] }, 'go');
    await started.promise;
    const { outcome } = run.cancel({ mode: CancelMode.AfterToolCalls, timeoutMs: 500 });
    clock.increment(500);
    expect(await outcome).toBe('escalated');
    expect(await run.termination).toMatchObject({
      status: 'CANCELLED',
      escalated: true,
      unsettled: false,
    });
    expect(aborted).toBe(true);
  });
});

describe('createReActAgent: run deadline', () => {
  it('a run that passes its timeoutMs during a tool ends RUN_TIMEOUT and keeps its history', async () => {
    const { clock, runtime } = setup();
    const started = deferred();
    const tool = defineTool({
      name: 'crawl',
      description: 'Crawls',
      parameters: z.object({}),
      execute: async (_args, ctx) => {
        started.resolve();
        await sleep(ctx.clock, 60_000, ctx.signal);
      },
    });
    const model = createScriptedModel([{ text: 'Crawling.', toolCalls: [{ name: 'crawl' }] }], {
      clock,
    });
    const run = runtime.prepare({
      ownerId: owner,
      sessionId: session,
      agent: createReActAgent({ model, tools: [tool] }),
      input: 'crawl',
      timeoutMs: 1_000,
    });
    run.start();
    await started.promise;
    clock.increment(1_000);
    expect(await run.termination).toMatchObject({
      status: 'CANCELLED',
      cause: 'timeout',
      unsettled: false,
    });
    await expect(run.result()).rejects.toMatchObject({ code: 'RUN_TIMEOUT' });
    const history = await runtime.sessionStore.load({}, key);
    expect(summarize(history)).toEqual([
      'user: crawl',
      'assistant: Crawling. [crawl]',
      'tool(error) crawl: Error: the run was cancelled before this tool call finished.',
    ]);
  });
});

describe('history after cancel and interrupt, next run', () => {
  it('a run after a cancelled one sees what the cancelled run produced', async () => {
    const { clock, runtime } = setup();
    const gate = createGate();
    const model = createScriptedModel(
      [{ text: ['Draft: ', 'plan A'], gate, gateAt: 1 }, { text: 'Continuing.' }],
      { clock },
    );
    const agent = createReActAgent({ model });
    const first = runtime.prepare({
      ownerId: owner,
      sessionId: session,
      agent,
      input: 'Plan a trip',
    });
    first.start();
    await gate.reached;
    first.cancel();
    const second = runtime.prepare({ ownerId: owner, sessionId: session, agent, input: 'Go on' });
    second.start();
    expect((await second.result()).reply).toBe('Continuing.');
    expect(summarize(model.requests[1]?.messages ?? [])).toEqual([
      'user: Plan a trip',
      'assistant(cancelled): Draft: ',
      'user: Go on',
    ]);
  });
});
