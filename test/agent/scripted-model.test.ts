import { SimulatedClock } from 'xstate';
import { describe, expect, it } from 'vitest';
import type { ChatChunk } from '../../src/agent/chat-model.js';
import { createGate } from '../../src/agent/gate.js';
import { ModelError } from '../../src/agent/model-error.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { flush } from './helpers.js';

const open = () => new AbortController().signal;

async function collect(iterable: AsyncIterable<ChatChunk>): Promise<ChatChunk[]> {
  const out: ChatChunk[] = [];
  for await (const c of iterable) out.push(c);
  return out;
}

describe('createScriptedModel', () => {
  it('answers request N with entry N: text chunks, tool-call deltas, a finish chunk', async () => {
    const model = createScriptedModel([
      {
        text: ['a', 'b'],
        toolCalls: [
          { name: 'f', args: { x: 1 } },
          { id: 'mine', name: 'g', args: '{bad' },
        ],
      },
      (request) => ({ text: `you said ${request.messages.at(-1)?.content}` }),
    ]);
    expect(
      await collect(model.stream([{ role: 'user', content: 'q1' }], { tools: [], signal: open() })),
    ).toEqual([
      { type: 'text', delta: 'a' },
      { type: 'text', delta: 'b' },
      { type: 'tool_call', index: 0, id: 'call_0_0', name: 'f' },
      { type: 'tool_call', index: 0, argumentsDelta: '{"x":1}' },
      { type: 'tool_call', index: 1, id: 'mine', name: 'g' },
      { type: 'tool_call', index: 1, argumentsDelta: '{bad' },
      // No usage in the script: none reported (a scripted reply spent no tokens).
      { type: 'finish', reason: 'tool_calls' },
    ]);
    const second = await collect(
      model.stream([{ role: 'user', content: 'q2' }], { tools: [], signal: open() }),
    );
    expect(second[0]).toEqual({ type: 'text', delta: 'you said q2' });
    expect(second[1]).toMatchObject({ type: 'finish', reason: 'stop' });
    expect(model.requests.map((r) => r.messages)).toEqual([
      [{ role: 'user', content: 'q1' }],
      [{ role: 'user', content: 'q2' }],
    ]);
  });

  it('records a copy of each request: later mutation does not change the record', () => {
    const model = createScriptedModel([{ text: 'x' }]);
    const messages = [{ role: 'user' as const, content: 'original' }];
    void model.stream(messages, {
      tools: [{ name: 't', description: 'd', parameters: { type: 'object' } }],
      signal: open(),
    });
    messages[0] = { role: 'user', content: 'changed' };
    expect(model.requests[0]?.messages).toEqual([{ role: 'user', content: 'original' }]);
    expect(model.requests[0]?.toolNames).toEqual(['t']);
  });

  it('waits chunkDelayMs on the injected clock before each chunk', async () => {
    const clock = new SimulatedClock();
    const model = createScriptedModel([{ text: ['a', 'b'], chunkDelayMs: 100 }], { clock });
    const got: ChatChunk[] = [];
    const done = (async () => {
      for await (const c of model.stream([], { tools: [], signal: open() })) got.push(c);
    })();
    await flush();
    expect(got).toEqual([]);
    clock.increment(100);
    await flush();
    expect(got).toEqual([{ type: 'text', delta: 'a' }]);
    clock.increment(100);
    await flush();
    clock.increment(100);
    await done;
    expect(got.map((c) => c.type)).toEqual(['text', 'text', 'finish']);
  });

  it('blocks at its gate until released, and an abort there rejects with the reason', async () => {
    const gate = createGate();
    const model = createScriptedModel([
      { text: ['a', 'b'], gate, gateAt: 1 },
      { text: 'c', gate: createGate() },
    ]);
    const got: ChatChunk[] = [];
    const first = (async () => {
      for await (const c of model.stream([], { tools: [], signal: open() })) got.push(c);
    })();
    await gate.reached;
    await flush();
    expect(got).toEqual([{ type: 'text', delta: 'a' }]);
    expect(gate.isOpen).toBe(false);
    gate.open();
    await first;
    expect(got).toHaveLength(3);

    const controller = new AbortController();
    const second = collect(model.stream([], { tools: [], signal: controller.signal }));
    const reason = new Error('stop');
    controller.abort(reason);
    await expect(second).rejects.toBe(reason);
  });

  it('throws a MODEL_ERROR past the end of its script, and a scripted error after its chunks', async () => {
    const model = createScriptedModel([{ text: 'x', error: new ModelError('boom', 503) }]);
    const got: ChatChunk[] = [];
    await expect(
      (async () => {
        for await (const c of model.stream([], { tools: [], signal: open() })) got.push(c);
      })(),
    ).rejects.toMatchObject({ code: 'MODEL_ERROR', status: 503 });
    expect(got).toEqual([{ type: 'text', delta: 'x' }]);
    await expect(collect(model.stream([], { tools: [], signal: open() }))).rejects.toThrow(
      /MODEL_ERROR: scripted model has no reply for request 2/,
    );
    expect(() => createScriptedModel('nope' as never)).toThrow(/INVALID_ARGUMENT/);
  });
});
