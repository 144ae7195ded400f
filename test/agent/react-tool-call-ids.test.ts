/**
 * Tool-call ids as OpenAI-compatible providers really send them (README "Agents"), over a real
 * HTTP server on 127.0.0.1 that, like the OpenAI and Anthropic APIs, refuses (400) a request
 * whose history answers one tool-call id twice or holds an empty id:
 * - Gemini's endpoint streams calls without an `index`: each call that comes with an id is a
 *   call of its own, not a continuation of the one before;
 * - Alibaba DashScope (Qwen) repeats `"id": ""` on every continuation delta of a call: that is
 *   no id, and must not replace the id of the call's first delta;
 * - providers that number calls per reply (`call_0`, Kimi's `functions.x:0`) reuse an id the
 *   session already answered: kept as is, that id is answered twice in every later request,
 *   and the stored history fails every turn of the session from then on.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ServerResponse } from 'node:http';
import { createOpenAIModel } from '../../src/agent/openai-model.js';
import {
  countedWeather,
  expectNoHalfToolCalls,
  owner,
  session,
  setup,
  startReActRun,
  summarize,
} from './helpers.js';
import { delta, done, startWireServer } from './openai-server.js';

type WireMessage = { role: string; tool_call_id?: string; tool_calls?: Array<{ id: string }> };

/** Answers 400 when the request's history reuses or empties a tool-call id, as strict APIs do. */
function refusedHistory(res: ServerResponse, messages: WireMessage[]): boolean {
  const ids = messages.flatMap((m) => (m.tool_calls ?? []).map((call) => call.id));
  const answered = messages.flatMap((m) => (m.role === 'tool' ? [m.tool_call_id] : []));
  const bad = (list: unknown[]) => list.includes('') || new Set(list).size !== list.length;
  if (!bad(ids) && !bad(answered)) return false;
  res.writeHead(400, { 'content-type': 'application/json' });
  const message = "Invalid parameter: Duplicate value for 'tool_call_id'.";
  res.end(JSON.stringify({ error: { message, type: 'invalid_request_error' } }));
  return true;
}

/** Streams one reply asking `weather` for each city, each call's arguments in two deltas. */
function streamCalls(
  res: ServerResponse,
  calls: Array<{ id: string; city: string }>,
  empty: boolean,
) {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  calls.forEach(({ id, city }, index) => {
    const head = { index, id, type: 'function', function: { name: 'weather', arguments: '' } };
    res.write(delta({ tool_calls: [head] }));
    const rest = {
      index,
      ...(empty ? { id: '' } : {}),
      function: { arguments: JSON.stringify({ city }) },
    };
    res.write(delta({ tool_calls: [rest] }));
  });
  res.write(delta({}, 'tool_calls'));
  res.end(done);
}

function streamText(res: ServerResponse, text: string) {
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  res.write(delta({ role: 'assistant', content: text }));
  res.write(delta({}, 'stop'));
  res.end(done);
}

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

/** A server answering each request with `script[n]` (n: the request's number), 400 on a bad history. */
async function modelOf(script: Array<(res: ServerResponse) => void>) {
  let requests = 0;
  const server = await startWireServer((res, body) => {
    const answer = script[requests++];
    if (refusedHistory(res, body.messages as WireMessage[])) return;
    answer?.(res);
  });
  close = () => server.close();
  const model = createOpenAIModel({
    baseURL: server.baseURL,
    apiKey: 'sk-local',
    model: 'test-model',
    maxRetries: 0,
  });
  return { model, requests: () => requests };
}

describe('createReActAgent: tool-call ids of OpenAI-compatible providers', () => {
  it('keeps apart parallel calls streamed without an index (Gemini)', async () => {
    const { runtime } = setup();
    const weather = countedWeather();
    const call = (id: string, city: string) => ({
      id,
      type: 'function',
      function: { name: 'weather', arguments: JSON.stringify({ city }) },
    });
    const { model } = await modelOf([
      (res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(delta({ tool_calls: [call('call_p', 'Paris'), call('call_r', 'Rome')] }));
        res.write(delta({ tool_calls: [call('call_l', 'Lima')] }));
        res.write(delta({}, 'tool_calls'));
        res.end(done);
      },
      (res) => streamText(res, 'Sunny in all three.'),
    ]);
    const run = startReActRun(runtime, { model, tools: [weather.tool] }, 'Weather?');
    await expect(run.result()).resolves.toMatchObject({ reply: 'Sunny in all three.' });
    // Before, the three calls fell on one index: one call "weatherweatherweather", unknown.
    expect(weather.ran.sort()).toEqual(['Lima', 'Paris', 'Rome']);
    const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
    const asked = history[1];
    expect(asked?.role === 'assistant' ? asked.toolCalls?.map((c) => c.id) : []).toEqual([
      'call_p',
      'call_r',
      'call_l',
    ]);
    expectNoHalfToolCalls(history);
  });

  it('keeps the first delta id when continuation deltas repeat "id": "" (DashScope)', async () => {
    const { runtime } = setup();
    const weather = countedWeather();
    const calls = [
      { id: 'call_a', city: 'Paris' },
      { id: 'call_b', city: 'Rome' },
    ];
    const { model } = await modelOf([
      (res) => streamCalls(res, calls, true),
      (res) => streamText(res, 'Sunny in both.'),
    ]);
    const run = startReActRun(runtime, { model, tools: [weather.tool] }, 'Weather?');
    await expect(run.result()).resolves.toMatchObject({ reply: 'Sunny in both.' });
    expect(weather.ran.sort()).toEqual(['Paris', 'Rome']);
    const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
    const asked = history[1];
    expect(asked?.role === 'assistant' ? asked.toolCalls?.map((c) => c.id) : []).toEqual([
      'call_a',
      'call_b',
    ]);
    expectNoHalfToolCalls(history);
  });

  it('renames a call id the session already answered (per-reply numbering), so later turns still run', async () => {
    const { runtime } = setup();
    const weather = countedWeather();
    const { model, requests } = await modelOf([
      (res) => streamCalls(res, [{ id: 'call_0', city: 'Paris' }], false),
      (res) => streamCalls(res, [{ id: 'call_0', city: 'Rome' }], false),
      (res) => streamText(res, 'Sunny in both.'),
      (res) => streamCalls(res, [{ id: 'call_0', city: 'Lima' }], false),
      (res) => streamText(res, 'Sunny in Lima.'),
    ]);
    const first = startReActRun(runtime, { model, tools: [weather.tool] }, 'Paris, then Rome?');
    await expect(first.result()).resolves.toMatchObject({ reply: 'Sunny in both.' });
    const second = startReActRun(runtime, { model, tools: [weather.tool] }, 'And Lima?');
    await expect(second.result()).resolves.toMatchObject({ reply: 'Sunny in Lima.' });
    expect(requests()).toBe(5);
    expect(weather.ran).toEqual(['Paris', 'Rome', 'Lima']);
    const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
    expect(summarize(history)).toEqual([
      'user: Paris, then Rome?',
      'assistant:  [weather]',
      'tool weather: sunny in Paris',
      'assistant:  [weather]',
      'tool weather: sunny in Rome',
      'assistant: Sunny in both.',
      'user: And Lima?',
      'assistant:  [weather]',
      'tool weather: sunny in Lima',
      'assistant: Sunny in Lima.',
    ]);
    expectNoHalfToolCalls(history);
    const ids = history.flatMap((m) => (m.role === 'tool' ? [m.toolCallId] : []));
    expect(new Set(ids).size).toBe(3);
    expect(ids[0]).toBe('call_0');
  });
});
