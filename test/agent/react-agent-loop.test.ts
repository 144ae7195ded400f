/**
 * createReActAgent's ReAct loop: tool round trips, saved history, maxSteps, tool errors,
 * parallel tools and timeouts, model failures and option validation.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { defineTool, type ToolContext } from '../../src/agent/tool.js';
import type { ChatChunk, ChatModel } from '../../src/agent/chat-model.js';
import { ModelError } from '../../src/agent/model-error.js';
import { sleep } from '../../src/clock.js';
import { RunplaneError } from '../../src/errors.js';
import {
  eventsOf,
  expectNoHalfToolCalls,
  flush,
  owner,
  session,
  setup,
  summarize,
  startReActRun,
} from './helpers.js';

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
