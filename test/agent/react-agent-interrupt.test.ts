/**
 * createReActAgent under interrupt: while streaming, during a tool, at the safe point; the
 * recovery reply, and a shutdown that is not answered as a user interrupt.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createGate } from '../../src/agent/gate.js';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { defineTool } from '../../src/agent/tool.js';
import type { ChatChunk, ChatModel } from '../../src/agent/chat-model.js';
import { sleep } from '../../src/clock.js';
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

const recovery = 'I noticed that you have interrupted me. What can I do for you?';

describe('createReActAgent: interrupt', () => {
  it('interrupt while streaming: the call is aborted, a recovery reply ends the run, the history is saved', async () => {
    const { clock, runtime } = setup();
    const gate = createGate();
    const model = createScriptedModel(
      [{ text: ['Hello ', 'wor', 'ld'], gate, gateAt: 2 }, { text: 'never asked' }],
      { clock },
    );
    const run = startReActRun(runtime, { model }, 'Say hello');
    await gate.reached;
    expect(run.interrupt('stop please')).toBe(true);
    const outcome = await run.termination;
    expect(outcome).toMatchObject({ status: 'COMPLETED', interrupted: true });
    if (outcome.status !== 'COMPLETED') return;
    expect(outcome.output).toMatchObject({ reason: 'interrupted', reply: recovery });
    expect(model.requests).toHaveLength(1);
    expect(model.requests[0]?.signal.aborted).toBe(true);
    const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
    expect(summarize(history)).toEqual([
      'user: Say hello',
      'assistant(interrupted): Hello wor',
      `assistant(interrupted): ${recovery}`,
    ]);
    const types = (await eventsOf(runtime)).map((e) => e.type);
    expect(types.filter((t) => t === 'agent.message')).toHaveLength(2);
    expect(types).toContain('run.completed');
    const completed = (await eventsOf(runtime)).find((e) => e.type === 'run.completed');
    expect(completed?.payload.reason).toBe('interrupted');
  });

  it('a shutdown is not answered as a user interrupt: the partial reply is kept, no recovery reply', async () => {
    const { clock, runtime } = setup();
    const gate = createGate();
    const causes: unknown[] = [];
    const model = createScriptedModel([{ text: ['Hello ', 'wor', 'ld'], gate, gateAt: 2 }], {
      clock,
    });
    const run = startReActRun(runtime, { model }, 'Say hello');
    await gate.reached;
    const shutdown = runtime.shutdown({ graceMs: 1_000 });
    const outcome = await run.termination;
    expect(await shutdown).toEqual({ drained: true });
    expect(outcome).toMatchObject({ status: 'COMPLETED', interrupted: true });
    if (outcome.status !== 'COMPLETED') return;
    expect(outcome.output).toMatchObject({ reason: 'interrupted', reply: 'Hello wor' });
    const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
    expect(summarize(history)).toEqual(['user: Say hello', 'assistant(interrupted): Hello wor']);

    // A recoveryReply function is told the cause and decides.
    const second = setup();
    const gate2 = createGate();
    const model2 = createScriptedModel([{ text: ['Hi ', 'there'], gate: gate2, gateAt: 1 }], {
      clock: second.clock,
    });
    const run2 = startReActRun(
      second.runtime,
      {
        model: model2,
        recoveryReply: ({ interruptCause, interruptMessage }) => {
          causes.push([interruptCause, interruptMessage]);
          return interruptCause === 'shutdown' ? 'Back in a moment.' : 'Yes?';
        },
      },
      'Greet me',
    );
    await gate2.reached;
    void second.runtime.shutdown({ graceMs: 1_000 });
    expect(await run2.result()).toMatchObject({ reply: 'Back in a moment.' });
    expect(causes).toEqual([['shutdown', 'runtime shutdown']]);
  });

  it('checks the interrupt at every chunk, even with a model that ignores its signal', async () => {
    const { runtime } = setup();
    const next = deferred();
    let pulled = 0;
    const deaf: ChatModel = {
      async *stream(): AsyncGenerator<ChatChunk> {
        pulled++;
        yield { type: 'text', delta: 'one ' };
        await next.promise; // ignores the signal
        pulled++;
        yield { type: 'text', delta: 'two ' };
        pulled++;
        yield { type: 'text', delta: 'three' };
        yield { type: 'finish', reason: 'stop' };
      },
    };
    const run = runtime.prepare({
      ownerId: owner,
      sessionId: session,
      agent: createReActAgent({
        model: deaf,
        recoveryReply: ({ interruptMessage }) => `stopped: ${interruptMessage}`,
      }),
      input: 'count',
    });
    run.start();
    await flush();
    run.interrupt('enough');
    next.resolve();
    const result = await run.result();
    expect(result).toMatchObject({ reason: 'interrupted', reply: 'stopped: enough' });
    expect(pulled).toBe(2); // stopped right after the chunk that followed the interrupt
    expect(summarize(result.messages)).toEqual([
      'user: count',
      'assistant(interrupted): one two ',
      'assistant(interrupted): stopped: enough',
    ]);
  });

  it('interrupt during a slow tool: the tool is signalled, its result is an error, no further model call', async () => {
    const { clock, runtime } = setup();
    const started = deferred();
    let sawAbort = false;
    const slow = defineTool({
      name: 'search',
      description: 'Slow search',
      parameters: z.object({ q: z.string() }),
      execute: async ({ q }, ctx) => {
        started.resolve();
        try {
          await sleep(ctx.clock, 60_000, ctx.signal);
        } catch (error) {
          sawAbort = ctx.signal.aborted;
          throw error;
        }
        return `results for ${q}`;
      },
    });
    const model = createScriptedModel(
      [
        { text: 'Searching.', toolCalls: [{ id: 'tu-s', name: 'search', args: { q: 'hotels' } }] },
        { text: 'never' },
      ],
      { clock },
    );
    const run = startReActRun(runtime, { model, tools: [slow] }, 'Find hotels');
    await started.promise;
    run.interrupt();
    const outcome = await run.termination;
    expect(outcome).toMatchObject({ status: 'COMPLETED', interrupted: true });
    expect(sawAbort).toBe(true);
    expect(model.requests).toHaveLength(1);
    const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
    expect(summarize(history)).toEqual([
      'user: Find hotels',
      'assistant: Searching. [search]',
      'tool(error) search: Error: the run was interrupted while search ran: run interrupted',
      `assistant(interrupted): ${recovery}`,
    ]);
    expectNoHalfToolCalls(history);
    const result = (await eventsOf(runtime)).find((e) => e.type === 'agent.tool_result');
    expect(result?.payload).toMatchObject({ tool_use_id: 'tu-s', status: 'interrupted' });
  });

  it('interrupt during a tool that ignores it: the real result is kept, then the recovery reply', async () => {
    const { clock, runtime } = setup();
    const started = deferred();
    const stubborn = defineTool({
      name: 'book',
      description: 'Books a room',
      parameters: z.object({}),
      execute: async (_args, ctx) => {
        started.resolve();
        await sleep(ctx.clock, 1_000); // no signal: cannot be stopped
        return 'booked';
      },
    });
    const model = createScriptedModel([{ toolCalls: [{ name: 'book' }] }, { text: 'never' }], {
      clock,
    });
    const run = startReActRun(runtime, { model, tools: [stubborn] }, 'Book it');
    await started.promise;
    run.interrupt();
    await flush();
    expect(run.status).toBe('RUNNING'); // cooperative: waits for the tool
    clock.increment(1_000);
    const result = await run.result();
    expect(result.reason).toBe('interrupted');
    expect(summarize(result.messages).slice(2)).toEqual([
      'tool book: booked',
      `assistant(interrupted): ${recovery}`,
    ]);
    expect(model.requests).toHaveLength(1);
  });

  it('interrupt noticed at the safe point: pending tool calls get "interrupted before it ran"', async () => {
    const { clock, runtime } = setup();
    const gate = createGate();
    let executed = 0;
    const tool = defineTool({
      name: 'act',
      description: 'Acts',
      parameters: z.object({}),
      execute: () => ++executed,
    });
    // The gate sits before the finish chunk: the tool call is complete when the interrupt lands.
    const model = createScriptedModel(
      [
        {
          toolCalls: [
            { id: 'a1', name: 'act' },
            { id: 'a2', name: 'act' },
          ],
          gate,
          gateAt: 4,
        },
      ],
      { clock },
    );
    const deafToGate: ChatModel = {
      // Ignores the signal so that the reply completes: the interrupt is seen after the model.
      stream: (messages, options) =>
        model.stream(messages, { ...options, signal: new AbortController().signal }),
    };
    const run = startReActRun(runtime, { model: deafToGate, tools: [tool] }, 'act twice');
    await gate.reached;
    run.interrupt();
    gate.open();
    const result = await run.result();
    expect(executed).toBe(0);
    expect(summarize(result.messages)).toEqual([
      'user: act twice',
      'assistant:  [act, act]',
      'tool(error) act: Error: the run was interrupted before this tool call ran.',
      'tool(error) act: Error: the run was interrupted before this tool call ran.',
      `assistant(interrupted): ${recovery}`,
    ]);
    expectNoHalfToolCalls(
      await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session }),
    );
  });

  it('still returns the recovery reply when the session store fails, and logs session.error', async () => {
    const failing = {
      load: () => Promise.resolve([]),
      append: () => Promise.reject(new Error('disk full')),
      clear: () => Promise.resolve(),
    };
    const { clock, runtime } = setup({ stores: { sessionStore: failing } });
    const gate = createGate();
    const model = createScriptedModel([{ text: ['a', 'b'], gate, gateAt: 1 }], { clock });
    const run = startReActRun(runtime, { model }, 'hi');
    await gate.reached;
    run.interrupt();
    const result = await run.result();
    expect(result).toMatchObject({ reason: 'interrupted', reply: recovery });
    const error = (await eventsOf(runtime)).find((e) => e.type === 'session.error');
    expect(error?.payload).toMatchObject({ operation: 'history.append', code: 'STORE_FAILED' });
    expect(String(error?.payload.error)).toContain('disk full');
    expect(error?.runId).toBe(run.id);
  });
});
