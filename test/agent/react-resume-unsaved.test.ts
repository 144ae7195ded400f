/**
 * A run resumed from the session history (`{ resume: state }`, not carried: a TurnLoop's
 * `genResume`) whose cut could not save its turn there (the history's append failed: a
 * `session.error`). The state is then the only record of the turn, so the resumed run starts
 * from the state's messages as a carried turn does (README "Agents"): the model reads the
 * question, the pending tool call runs, and the history gets the whole turn once.
 */
import { describe, expect, it } from 'vitest';
import { CancelMode } from '../../machines/cancel-request.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { createReActAgent, type ReActSafePointState } from '../../src/agent/react-agent.js';
import { createMemorySessionStore } from '../../src/stores/memory-session-store.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { StoreFailedError } from '../../src/errors.js';
import {
  countedWeather,
  deferred,
  eventsOf,
  expectNoHalfToolCalls,
  owner,
  session,
  setup,
  summarize,
} from './helpers.js';

const key = { ownerId: owner, sessionId: session };

/** A memory session store whose next `append` fails once `failNext` is set. */
function flakyStore(): SessionStore & { failNext: boolean } {
  const inner = createMemorySessionStore();
  const store = {
    failNext: false,
    load: inner.load.bind(inner),
    clear: inner.clear.bind(inner),
    append(
      ctx: Parameters<SessionStore['append']>[0],
      k: typeof key,
      messages: Parameters<SessionStore['append']>[2],
    ) {
      if (store.failNext) {
        store.failNext = false;
        return Promise.reject(new StoreFailedError('append', 'session', new Error('disk full')));
      }
      return inner.append(ctx, k, messages);
    },
  };
  return store;
}

describe('createReActAgent: a turn resumed from a history that lacks it', () => {
  it('starts from the state: the model reads the question and the pending call runs once', async () => {
    const sessionStore = flakyStore();
    const { runtime } = setup({ stores: { sessionStore } });
    const { ran, tool: weather } = countedWeather();
    const model = createScriptedModel([
      { toolCalls: [{ id: 'tu-1', name: 'weather', args: { city: 'Lima' } }] },
      { text: ['It is sunny.'] },
    ]);
    const atSafePoint = deferred();
    const agent = createReActAgent({ model, tools: [weather] });
    const cut = runtime.prepare({
      ...key,
      agent: {
        execute: (input: string, ctx) =>
          agent.execute(input, {
            ...ctx,
            safePoint: (kind, state) => {
              if (kind === 'afterChatModel') {
                // The stop lands here, before the call runs; the cut's save then fails.
                sessionStore.failNext = true;
                cut.cancel({ mode: CancelMode.AfterChatModel });
                atSafePoint.resolve();
              }
              ctx.safePoint(kind, state);
            },
          }),
      },
      input: 'Weather in Lima?',
    });
    cut.start();
    await atSafePoint.promise;
    expect(await cut.termination).toMatchObject({ status: 'CANCELLED' });
    expect(ran).toEqual([]);
    expect((await eventsOf(runtime)).some((e) => e.type === 'session.error')).toBe(true);
    expect(await runtime.sessionStore.load({}, key)).toEqual([]);

    const resumed = runtime.prepare({
      ...key,
      agent,
      input: { resume: cut.safePointState as ReActSafePointState },
    });
    resumed.start();
    expect(await resumed.result()).toMatchObject({ reply: 'It is sunny.', reason: 'completed' });
    expect(ran).toEqual(['Lima']);
    // The model's one request of the resumed run holds the question, the call and its result.
    expect(summarize(model.requests[1]!.messages)).toEqual([
      'user: Weather in Lima?',
      'assistant:  [weather]',
      'tool weather: sunny in Lima',
    ]);
    const history = await runtime.sessionStore.load({}, key);
    expect(summarize(history)).toEqual([
      'user: Weather in Lima?',
      'assistant:  [weather]',
      'tool weather: sunny in Lima',
      'assistant: It is sunny.',
    ]);
    expectNoHalfToolCalls(history);
  });
});
