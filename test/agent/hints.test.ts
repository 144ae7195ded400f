import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createGate } from '../../src/agent/gate.js';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { defineTool } from '../../src/agent/tool.js';
import { createMemoryInbox } from '../../src/inbox/memory-inbox.js';
import { deferred, eventsOf, owner, session, setup, summarize, startReActRun } from './helpers.js';

describe('inbox hints', () => {
  it('a hint pushed while a tool runs reaches the very next model request', async () => {
    const { clock, runtime } = setup();
    const started = deferred();
    const finish = deferred();
    const search = defineTool({
      name: 'search_hotels',
      description: 'Searches hotels',
      parameters: z.object({}),
      execute: async () => {
        started.resolve();
        await finish.promise;
        return '3 hotels';
      },
    });
    const model = createScriptedModel(
      [{ toolCalls: [{ name: 'search_hotels' }] }, { text: 'The one near the venue.' }],
      { clock },
    );
    const run = runtime.prepare({
      ownerId: owner,
      sessionId: session,
      agent: createReActAgent({
        model,
        tools: [search],
        formatHint: (h) => `[supplement] ${h.text}`,
      }),
      input: 'Find a hotel',
    });
    run.start();
    await started.promise;
    const hintId = runtime.inbox.push(owner, session, 'Prefer hotels near the venue');
    expect(runtime.inbox.size(owner, session)).toBe(1);
    finish.resolve();
    await run.result();

    expect(summarize(model.requests[0]?.messages ?? [])).toEqual(['user: Find a hotel']);
    expect(summarize(model.requests[1]?.messages ?? [])).toEqual([
      'user: Find a hotel',
      'assistant:  [search_hotels]',
      'tool search_hotels: 3 hotels',
      'hint: [supplement] Prefer hotels near the venue',
    ]);
    expect(model.requests[1]?.messages[3]).toMatchObject({ role: 'user', hintId });
    expect(runtime.inbox.size(owner, session)).toBe(0);
    const events = await eventsOf(runtime);
    const consumed = events.find((e) => e.type === 'agent.hint_consumed');
    const replies = events.filter((e) => e.type === 'agent.message');
    expect(consumed?.payload).toMatchObject({
      hint_id: hintId,
      step: 2,
      source: 'user-supplement',
    });
    // It names the reply of the request it went into.
    expect(consumed?.payload.message_id).toBe(replies[1]?.payload.message_id);
    // And the hint is part of the saved conversation.
    const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
    expect(history.filter((m) => m.role === 'user' && m.hintId === hintId)).toHaveLength(1);
  });

  it('a hint pushed while the model streams is not lost: it goes into the next request', async () => {
    const { clock, runtime } = setup();
    const gate = createGate();
    const noop = defineTool({
      name: 'noop',
      description: 'Nothing',
      parameters: z.object({}),
      execute: () => 'ok',
    });
    const model = createScriptedModel(
      [{ text: ['a', 'b'], toolCalls: [{ name: 'noop' }], gate, gateAt: 1 }, { text: 'done' }],
      { clock },
    );
    const run = startReActRun(runtime, { model, tools: [noop] }, 'go');
    await gate.reached;
    runtime.inbox.push(owner, session, { text: 'budget is 5000', source: 'ops' });
    gate.open();
    await run.result();
    expect(model.requests[0]?.messages.some((m) => m.content === 'budget is 5000')).toBe(false);
    expect(model.requests[1]?.messages.at(-1)).toMatchObject({
      role: 'user',
      content: 'budget is 5000',
    });
    const consumed = (await eventsOf(runtime)).find((e) => e.type === 'agent.hint_consumed');
    expect(consumed?.payload.source).toBe('ops');
  });

  it('a hint pushed while no run is active waits for the next run', async () => {
    const { clock, runtime } = setup();
    const hintId = runtime.inbox.push(owner, session, 'I am vegetarian');
    expect(runtime.inbox.size(owner, session)).toBe(1);
    const model = createScriptedModel([{ text: 'Noted.' }], { clock });
    const run = startReActRun(runtime, { model }, 'Plan dinner');
    await run.result();
    expect(summarize(model.requests[0]?.messages ?? [])).toEqual([
      'user: Plan dinner',
      'hint: I am vegetarian',
    ]);
    expect(model.requests[0]?.messages[1]).toMatchObject({ hintId });
    expect(runtime.inbox.size(owner, session)).toBe(0);
  });

  it('hints are keyed by owner and session: another owner never reads them', async () => {
    const { clock, runtime } = setup();
    runtime.inbox.push('someone-else', session, 'secret of someone else');
    runtime.inbox.push(owner, 'another-session', 'for another session');
    const model = createScriptedModel([{ text: 'Hi.' }], { clock });
    const run = startReActRun(runtime, { model }, 'hi');
    await run.result();
    expect(summarize(model.requests[0]?.messages ?? [])).toEqual(['user: hi']);
    expect(runtime.inbox.size('someone-else', session)).toBe(1);
    expect(runtime.inbox.size(owner, 'another-session')).toBe(1);
    expect((await eventsOf(runtime)).some((e) => e.type === 'agent.hint_consumed')).toBe(false);
  });

  it('rejects an empty hint, owner or session with INVALID_ARGUMENT', () => {
    const { runtime } = setup();
    expect(() => runtime.inbox.push(owner, session, '')).toThrow(
      /INVALID_ARGUMENT: expected `hint`/,
    );
    expect(() => runtime.inbox.push('', session, 'x')).toThrow(
      /expected `ownerId` to be a non-empty string/,
    );
    expect(() => runtime.inbox.push(owner, session, { text: 7 } as never)).toThrow(
      /INVALID_ARGUMENT/,
    );
    expect(runtime.inbox.size(owner, session)).toBe(0);
  });

  it('the memory inbox drains in push order and only its own key', () => {
    const inbox = createMemoryInbox();
    const a = { ownerId: 'a', sessionId: 's' };
    const b = { ownerId: 'b', sessionId: 's' };
    const hint = (id: string) => ({ id, text: id, source: 'test', at: 0 });
    inbox.push({}, a, hint('1'));
    inbox.push({}, b, hint('x'));
    inbox.push({}, a, hint('2'));
    expect(inbox.drain({}, a).map((h) => h.id)).toEqual(['1', '2']);
    expect(inbox.drain({}, a)).toEqual([]);
    expect(inbox.size({}, b)).toBe(1);
  });
});
