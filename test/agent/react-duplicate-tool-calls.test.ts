/**
 * A model reply with two tool calls under one id (README "Agents"): some OpenAI-compatible
 * providers emit it, and the OpenAI API refuses a history answering one id twice ("Duplicate
 * value for 'tool_call_id'", a 400). The ReAct agent refuses such a reply as a malformed model
 * answer: the run fails with `ModelError` (`MODEL_ERROR`, no status), no tool runs, and the
 * history keeps the reply's text, not its calls. Shown with the scripted model and with a real
 * OpenAI-compatible HTTP server on 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelError } from '../../src/agent/model-error.js';
import { createOpenAIModel } from '../../src/agent/openai-model.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import type { ChatModel } from '../../src/agent/chat-model.js';
import {
  countedWeather,
  eventsOf,
  expectNoHalfToolCalls,
  owner,
  session,
  setup,
  startReActRun,
  summarize,
} from './helpers.js';
import { delta, done, startWireServer } from './openai-server.js';

/** Runs the agent on `model` until the run ends: its outcome, what ran, the history, the events. */
async function runWith(model: ChatModel) {
  const { runtime } = setup();
  const weather = countedWeather();
  const run = startReActRun(runtime, { model, tools: [weather.tool] }, 'Weather?');
  const error = await run.result().catch((caught: unknown) => caught);
  const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
  const events = await eventsOf(runtime);
  return { error, status: (await run.termination).status, ran: weather.ran, history, events };
}

/** What every refused reply shows: a failed run, no tool run, nothing of the calls kept. */
function expectRefused(outcome: Awaited<ReturnType<typeof runWith>>) {
  expect(outcome.status).toBe('FAILED');
  expect(outcome.error).toBeInstanceOf(ModelError);
  expect(outcome.error).toMatchObject({ code: 'MODEL_ERROR', status: undefined });
  expect((outcome.error as Error).message).toContain('"call_1"');
  expect(outcome.ran).toEqual([]);
  expect(summarize(outcome.history)).toEqual(['user: Weather?', 'assistant(failed): Checking.']);
  expectNoHalfToolCalls(outcome.history);
  const types = outcome.events.map((event) => event.type);
  expect(types).not.toContain('agent.tool_use');
  expect(types).not.toContain('agent.tool_result');
}

describe('createReActAgent: a reply with a duplicate tool-call id', () => {
  it('a scripted reply is refused: the run fails with MODEL_ERROR, no tool runs', async () => {
    const model = createScriptedModel([
      {
        text: 'Checking.',
        toolCalls: [
          { id: 'call_1', name: 'weather', args: { city: 'Paris' } },
          { id: 'call_1', name: 'weather', args: { city: 'Rome' } },
        ],
      },
      { text: 'never asked' },
    ]);
    expectRefused(await runWith(model));
    expect(model.requests).toHaveLength(1);
  });

  describe('an OpenAI-compatible server', () => {
    let server: Awaited<ReturnType<typeof startWireServer>>;
    let requests = 0;

    beforeAll(async () => {
      server = await startWireServer((res, body) => {
        requests++;
        const messages = body.messages as Array<{ role: string; tool_call_id?: string }>;
        const answered = messages.flatMap((m) => (m.role === 'tool' ? [m.tool_call_id] : []));
        if (new Set(answered).size !== answered.length) {
          // What the OpenAI API answers to a history that answers one id twice.
          res.writeHead(400, { 'content-type': 'application/json' });
          const message = "Invalid parameter: Duplicate value for 'tool_call_id'.";
          res.end(JSON.stringify({ error: { message, type: 'invalid_request_error' } }));
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(delta({ role: 'assistant', content: 'Checking.' }));
        ['Paris', 'Rome'].forEach((city, index) => {
          const args = JSON.stringify({ city });
          const call = {
            index,
            id: 'call_1',
            type: 'function',
            function: { name: 'weather', arguments: args },
          };
          res.write(delta({ tool_calls: [call] }));
        });
        res.write(delta({}, 'tool_calls'));
        res.end(done);
      });
    });

    afterAll(() => server.close());

    it('refuses the streamed reply the same way, before any tool runs', async () => {
      const model = createOpenAIModel({
        baseURL: server.baseURL,
        apiKey: 'sk-local',
        model: 'test-model',
        maxRetries: 0,
      });
      expectRefused(await runWith(model));
      expect(requests).toBe(1);
    });
  });
});
