import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createGate } from '../../src/agent/gate.js';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { defineTool, type ToolContext } from '../../src/agent/tool.js';
import type { ChatChunk, ChatModel } from '../../src/agent/chat-model.js';
import { ModelError } from '../../src/agent/model-error.js';
import { sleep } from '../../src/clock.js';
import { RunplaneError } from '../../src/errors.js';
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

describe('createReActAgent: the ReAct loop', () => {
  it('runs a tool round trip, links its events by ids and saves the history', async () => {
    const { clock, runtime } = setup();
    const seen: ToolContext[] = [];
    const weather = defineTool({
      name: 'weather',
      description: 'Weather of a city',
      parameters: z.object({ city: z.string() }),
      execute: ({ city }, ctx) => {
        seen.push(ctx);
        return { city, sky: 'sunny' };
      },
    });
    const model = createScriptedModel(
      [
        {
          text: ['Let me ', 'check.'],
          toolCalls: [{ id: 'tu-1', name: 'weather', args: { city: 'Paris' } }],
        },
        {
          text: ['It is ', 'sunny.'],
          usage: { promptTokens: 5, completionTokens: 3, totalTokens: 8 },
        },
      ],
      { clock },
    );
    const agent = createReActAgent({ model, tools: [weather], instructions: 'Be brief.' });
    const run = runtime.prepare({
      ownerId: owner,
      sessionId: session,
      agent,
      input: 'Weather in Paris?',
    });
    run.start();
    const result = await run.result();

    expect(result).toMatchObject({ reply: 'It is sunny.', reason: 'completed', steps: 2 });
    expect(result.usage.totalTokens).toBe(8);
    // Every tool gets the run's signal and id.
    expect(seen).toHaveLength(1);
    expect(seen[0]?.runId).toBe(run.id);
    expect(seen[0]?.toolUseId).toBe('tu-1');
    expect(seen[0]?.signal.aborted).toBe(false);
    // The second request carries the instructions, the call and its result.
    expect(summarize(model.requests[1]?.messages ?? [])).toEqual([
      'system: Be brief.',
      'user: Weather in Paris?',
      'assistant: Let me check. [weather]',
      'tool weather: {"city":"Paris","sky":"sunny"}',
    ]);
    expect(model.requests[0]?.toolNames).toEqual(['weather']);

    const events = (await eventsOf(runtime)).filter((e) => e.type.startsWith('agent.'));
    expect(events.map((e) => e.type)).toEqual([
      'agent.message_delta',
      'agent.message_delta',
      'agent.message',
      'agent.tool_use',
      'agent.tool_result',
      'agent.message_delta',
      'agent.message_delta',
      'agent.message',
    ]);
    const [d1, , m1, use, res, d2, , m2] = events;
    expect(d1?.payload.message_id).toBe(m1?.payload.message_id);
    expect(use?.payload).toMatchObject({
      message_id: m1?.payload.message_id,
      tool_use_id: 'tu-1',
      name: 'weather',
    });
    expect(res?.payload).toMatchObject({ tool_use_id: 'tu-1', status: 'ok', is_error: false });
    expect(d2?.payload.message_id).toBe(m2?.payload.message_id);
    expect(m2?.payload.message_id).toBe(result.messageId);
    expect(m1?.payload.tool_use_ids).toEqual(['tu-1']);
    expect(events.every((e) => e.runId === run.id)).toBe(true);

    const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
    expect(summarize(history)).toEqual([
      'user: Weather in Paris?',
      'assistant: Let me check. [weather]',
      'tool weather: {"city":"Paris","sky":"sunny"}',
      'assistant: It is sunny.',
    ]);
    expectNoHalfToolCalls(history);
  });

  it('gives the next run of the session the saved history', async () => {
    const { clock, runtime } = setup();
    const model = createScriptedModel([{ text: 'Hi Ann.' }, { text: 'You are Ann.' }], { clock });
    const agent = createReActAgent({ model });
    const first = runtime.prepare({
      ownerId: owner,
      sessionId: session,
      agent,
      input: 'I am Ann.',
    });
    first.start();
    await first.result();
    const second = runtime.prepare({
      ownerId: owner,
      sessionId: session,
      agent,
      input: 'Who am I?',
    });
    second.start();
    expect((await second.result()).reply).toBe('You are Ann.');
    expect(summarize(model.requests[1]?.messages ?? [])).toEqual([
      'user: I am Ann.',
      'assistant: Hi Ann.',
      'user: Who am I?',
    ]);
    // Another session of the same owner starts empty.
    const other = runtime.prepare({
      ownerId: owner,
      sessionId: 'other',
      agent: createReActAgent({ model: createScriptedModel([{ text: 'Hello.' }]) }),
      input: 'Who am I?',
    });
    other.start();
    expect((await other.result()).messages).toHaveLength(2);
  });

  it('stops at maxSteps with reason max_steps, after running the last tools', async () => {
    const { clock, runtime } = setup();
    let calls = 0;
    const ping = defineTool({
      name: 'ping',
      description: 'Ping',
      parameters: z.object({}),
      execute: () => `pong ${++calls}`,
    });
    const model = createScriptedModel(
      [
        { text: 'one', toolCalls: [{ name: 'ping' }] },
        { text: 'two', toolCalls: [{ name: 'ping' }] },
        { text: 'never' },
      ],
      { clock },
    );
    const run = startReActRun(runtime, { model, tools: [ping], maxSteps: 2 }, 'go');
    const result = await run.result();
    expect(result).toMatchObject({ reason: 'max_steps', steps: 2, reply: 'two' });
    expect(calls).toBe(2);
    expect(model.requests).toHaveLength(2);
    expectNoHalfToolCalls(
      await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session }),
    );
  });

  it('turns invalid arguments and unknown tools into error results the model sees', async () => {
    const { clock, runtime } = setup();
    let executed = 0;
    const add = defineTool({
      name: 'add',
      description: 'Adds two numbers',
      parameters: z.object({ a: z.number(), b: z.number() }),
      execute: ({ a, b }) => {
        executed++;
        return a + b;
      },
    });
    const model = createScriptedModel(
      [
        {
          toolCalls: [
            { id: 'bad-json', name: 'add', args: '{"a": 1,' },
            { id: 'bad-type', name: 'add', args: { a: 'one', b: 2 } },
            { id: 'nope', name: 'subtract', args: {} },
            { id: 'good', name: 'add', args: { a: 1, b: 2 } },
          ],
        },
        { text: 'Done.' },
      ],
      { clock },
    );
    const run = startReActRun(runtime, { model, tools: [add] }, 'add');
    expect((await run.termination).status).toBe('COMPLETED');
    expect(executed).toBe(1);
    const results = (model.requests[1]?.messages ?? []).filter((m) => m.role === 'tool');
    expect(results.map((m) => [m.toolCallId, m.isError])).toEqual([
      ['bad-json', true],
      ['bad-type', true],
      ['nope', true],
      ['good', false],
    ]);
    expect(results[0]?.content).toContain('not valid JSON');
    expect(results[1]?.content).toContain('expected number');
    expect(results[2]?.content).toContain('no tool named "subtract"');
    expect(results[3]?.content).toBe('3');
    const statuses = (await eventsOf(runtime))
      .filter((e) => e.type === 'agent.tool_result')
      .map((e) => e.payload.status);
    expect(statuses).toEqual(['invalid_arguments', 'invalid_arguments', 'unknown_tool', 'ok']);
  });

  it('runs the tools of one reply in parallel', async () => {
    const { clock, runtime } = setup();
    const started: string[] = [];
    const slow = defineTool({
      name: 'slow',
      description: 'Waits',
      parameters: z.object({ id: z.string() }),
      execute: async ({ id }, ctx) => {
        started.push(id);
        await sleep(ctx.clock, 100, ctx.signal);
        return id;
      },
    });
    const model = createScriptedModel(
      [
        {
          toolCalls: [
            { name: 'slow', args: { id: 'a' } },
            { name: 'slow', args: { id: 'b' } },
          ],
        },
        { text: 'ok' },
      ],
      { clock },
    );
    const run = startReActRun(runtime, { model, tools: [slow] }, 'go');
    await flush();
    expect(started).toEqual(['a', 'b']);
    clock.increment(100); // one period serves both: they run at once
    expect((await run.result()).reply).toBe('ok');
  });

  it('gives a tool that passes its timeoutMs a timeout error result and aborts its signal', async () => {
    const { clock, runtime } = setup();
    let toolSignal: AbortSignal | undefined;
    const stuck = defineTool({
      name: 'stuck',
      description: 'Never answers',
      parameters: z.object({}),
      timeoutMs: 50,
      execute: (_args, ctx) => {
        toolSignal = ctx.signal;
        return new Promise<never>(() => undefined);
      },
    });
    const model = createScriptedModel([{ toolCalls: [{ name: 'stuck' }] }, { text: 'gave up' }], {
      clock,
    });
    const run = startReActRun(runtime, { model, tools: [stuck] }, 'go');
    await flush();
    expect(toolSignal?.aborted).toBe(false);
    clock.increment(50);
    expect((await run.result()).reply).toBe('gave up');
    expect(toolSignal?.aborted).toBe(true);
    const result = model.requests[1]?.messages.find((m) => m.role === 'tool');
    expect(result).toMatchObject({ isError: true, content: 'Error: stuck timed out after 50 ms.' });
  });

  it('fails the run with the typed model error and still saves what it produced', async () => {
    const { clock, runtime } = setup();
    const model = createScriptedModel(
      [{ text: ['partial '], error: new ModelError('the model answered 500', 500) }],
      { clock },
    );
    const run = startReActRun(runtime, { model }, 'hi');
    const outcome = await run.termination;
    expect(outcome.status).toBe('FAILED');
    if (outcome.status !== 'FAILED') return;
    expect(outcome.error).toBeInstanceOf(ModelError);
    expect(outcome.error).toMatchObject({ code: 'MODEL_ERROR', status: 500 });
    const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
    expect(summarize(history)).toEqual(['user: hi', 'assistant(failed): partial ']);
  });

  it('wraps a non-runplane model failure into MODEL_ERROR and rejects bad input with INVALID_ARGUMENT', async () => {
    const { runtime } = setup();
    const broken: ChatModel = {
      // eslint-disable-next-line require-yield -- a model that fails before its first chunk
      async *stream(): AsyncGenerator<ChatChunk> {
        await Promise.resolve();
        throw new TypeError('socket hang up');
      },
    };
    const run = startReActRun(runtime, { model: broken }, 'hi');
    await expect(run.result()).rejects.toMatchObject({ code: 'MODEL_ERROR', status: undefined });

    const bad = runtime.prepare({
      ownerId: owner,
      sessionId: 's2',
      agent: createReActAgent({ model: broken }) as never,
      input: 42,
    });
    bad.start();
    await expect(bad.result()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', field: 'input' });
  });

  it('validates its options with INVALID_ARGUMENT', () => {
    const model = createScriptedModel([]);
    const t = defineTool({
      name: 't',
      description: 'd',
      parameters: z.object({}),
      execute: () => 1,
    });
    expect(() => createReActAgent({ model, maxSteps: 0 })).toThrow(RunplaneError);
    expect(() => createReActAgent({ model, maxSteps: 0 })).toThrow(
      /expected `maxSteps` to be a positive integer, got 0/,
    );
    expect(() => createReActAgent({ model, tools: [t, t] })).toThrow(/unique names/);
    expect(() => createReActAgent({ model: {} as ChatModel })).toThrow(/INVALID_ARGUMENT/);
    expect(() => createReActAgent({ model, history: 'all' as never })).toThrow(/history/);
  });
});

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
