import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ChatChunk, ChatModel } from '../../src/agent/chat-model.js';
import { ModelError } from '../../src/agent/model-error.js';
import { createOpenAIModel } from '../../src/agent/openai-model.js';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { defineTool } from '../../src/agent/tool.js';
import { deferred, owner, session, setup, startReActRun } from './helpers.js';
import { chunk, delta, done, startWireServer, type WireHandler } from './openai-server.js';

// A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions streaming wire format.

interface Received {
  readonly url: string;
  readonly authorization: string | undefined;
  readonly body: Record<string, unknown>;
}
let server: Awaited<ReturnType<typeof startWireServer>>;
let baseURL: string;
let handlers: WireHandler[] = [];
let received: Received[] = [];

const usage = (prompt: number, completion: number) =>
  chunk([], {
    usage: {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
    },
  });

function startSse(res: ServerResponse): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  });
}

function sse(frames: string[]): WireHandler {
  return (res) => {
    startSse(res);
    for (const frame of frames) res.write(frame);
    res.end();
  };
}

function errorAnswer(
  status: number,
  message: string,
  headers: Record<string, string> = {},
): WireHandler {
  return (res) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify({ error: { message, type: 'test_error', code: null } }));
  };
}

beforeAll(async () => {
  server = await startWireServer((res, body, req) => {
    received.push({ url: req.url ?? '', authorization: req.headers.authorization, body });
    const handler = handlers.shift();
    if (handler === undefined) {
      res.writeHead(500).end('no handler');
      return;
    }
    handler(res, body, req);
  });
  baseURL = server.baseURL;
});

afterAll(() => server.close());

beforeEach(() => {
  handlers = [];
  received = [];
});

const model = (options: { maxRetries?: number } = {}): ChatModel =>
  createOpenAIModel({
    baseURL,
    apiKey: 'sk-local',
    model: 'test-model',
    maxRetries: options.maxRetries ?? 0,
  });

async function collect(iterable: AsyncIterable<ChatChunk>): Promise<ChatChunk[]> {
  const out: ChatChunk[] = [];
  for await (const c of iterable) out.push(c);
  return out;
}

const weatherSpec = {
  name: 'weather',
  description: 'Weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};

describe('createOpenAIModel against a local wire-format server', () => {
  it('streams text deltas, tool-call deltas, the finish reason and the usage', async () => {
    handlers.push(
      sse([
        delta({ role: 'assistant', content: '' }),
        delta({ content: 'Let me ' }),
        delta({ content: 'check.' }),
        delta({
          tool_calls: [
            {
              index: 0,
              id: 'call_abc',
              type: 'function',
              function: { name: 'weather', arguments: '' },
            },
          ],
        }),
        delta({ tool_calls: [{ index: 0, function: { arguments: '{"ci' } }] }),
        delta({ tool_calls: [{ index: 0, function: { arguments: 'ty":"Paris"}' } }] }),
        delta({}, 'tool_calls'),
        usage(12, 7),
        done,
      ]),
    );
    const chunks = await collect(
      model().stream(
        [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'Weather?' },
          {
            role: 'assistant',
            id: 'm0',
            content: '',
            toolCalls: [{ id: 'call_0', name: 'weather', arguments: '{"city":"Lyon"}' }],
          },
          { role: 'tool', toolCallId: 'call_0', name: 'weather', content: 'rain', isError: false },
          { role: 'user', content: 'And Paris?', hintId: 'h1' },
        ],
        { tools: [weatherSpec], signal: new AbortController().signal },
      ),
    );
    expect(chunks).toEqual([
      { type: 'text', delta: 'Let me ' },
      { type: 'text', delta: 'check.' },
      { type: 'tool_call', index: 0, id: 'call_abc', name: 'weather', argumentsDelta: '' },
      { type: 'tool_call', index: 0, id: undefined, name: undefined, argumentsDelta: '{"ci' },
      {
        type: 'tool_call',
        index: 0,
        id: undefined,
        name: undefined,
        argumentsDelta: 'ty":"Paris"}',
      },
      {
        type: 'finish',
        reason: 'tool_calls',
        usage: { promptTokens: 12, completionTokens: 7, totalTokens: 19 },
      },
    ]);
    expect(received).toHaveLength(1);
    expect(received[0]?.url).toBe('/v1/chat/completions');
    expect(received[0]?.authorization).toBe('Bearer sk-local');
    expect(received[0]?.body).toMatchObject({
      model: 'test-model',
      stream: true,
      stream_options: { include_usage: true },
      tools: [{ type: 'function', function: weatherSpec }],
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Weather?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: 'call_0',
              type: 'function',
              function: { name: 'weather', arguments: '{"city":"Lyon"}' },
            },
          ],
        },
        { role: 'tool', tool_call_id: 'call_0', content: 'rain' },
        { role: 'user', content: 'And Paris?' },
      ],
    });
  });

  it('aborting the signal mid-stream closes the HTTP request and rejects with the reason', async () => {
    const closed = deferred();
    handlers.push((res) => {
      startSse(res);
      res.write(delta({ content: 'Hello' }));
      res.on('close', () => closed.resolve()); // the client went away
    });
    const controller = new AbortController();
    const stream = model().stream([{ role: 'user', content: 'hi' }], {
      tools: [],
      signal: controller.signal,
    });
    const iterator = stream[Symbol.asyncIterator]();
    expect(await iterator.next()).toEqual({ done: false, value: { type: 'text', delta: 'Hello' } });
    const reason = new Error('stop now');
    const pending = iterator.next();
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    await closed.promise;
  });

  it('aborting before the server answers rejects with the reason, not a MODEL_ERROR', async () => {
    const arrived = deferred();
    const closed = deferred();
    handlers.push((res) => {
      res.on('close', () => closed.resolve()); // never answers
      arrived.resolve();
    });
    const controller = new AbortController();
    const pending = collect(
      model().stream([{ role: 'user', content: 'hi' }], { tools: [], signal: controller.signal }),
    );
    await arrived.promise;
    const reason = new Error('user left');
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    await closed.promise;
  });

  it('a disconnect mid-stream is a MODEL_ERROR without status', async () => {
    handlers.push((res) => {
      startSse(res);
      res.write(delta({ content: 'Hel' }));
      res.write(delta({ content: 'lo' }), () => res.socket?.destroy());
    });
    const seen: ChatChunk[] = [];
    const error = await (async () => {
      try {
        for await (const c of model().stream([{ role: 'user', content: 'hi' }], {
          tools: [],
          signal: new AbortController().signal,
        })) {
          seen.push(c);
        }
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ code: 'MODEL_ERROR', status: undefined });
    expect(seen.every((c) => c.type === 'text')).toBe(true); // never a finish chunk
  });

  it('a stream that ends without a finish_reason is a MODEL_ERROR, not a short reply', async () => {
    handlers.push(sse([delta({ content: 'Hel' })]));
    await expect(
      collect(
        model().stream([{ role: 'user', content: 'hi' }], {
          tools: [],
          signal: new AbortController().signal,
        }),
      ),
    ).rejects.toMatchObject({
      code: 'MODEL_ERROR',
      message: expect.stringContaining('finish_reason') as string,
    });
  });

  it('a 429 answer is a MODEL_ERROR with status 429 (no retry with maxRetries 0)', async () => {
    handlers.push(errorAnswer(429, 'Rate limit reached'));
    const error = await collect(
      model().stream([{ role: 'user', content: 'hi' }], {
        tools: [],
        signal: new AbortController().signal,
      }),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ModelError);
    expect(error).toMatchObject({ code: 'MODEL_ERROR', status: 429 });
    expect((error as Error).message).toContain('Rate limit reached');
    expect(received).toHaveLength(1);
  });

  it('a 500 answer is a MODEL_ERROR with status 500', async () => {
    handlers.push(errorAnswer(500, 'upstream exploded'));
    await expect(
      collect(
        model().stream([{ role: 'user', content: 'hi' }], {
          tools: [],
          signal: new AbortController().signal,
        }),
      ),
    ).rejects.toMatchObject({ code: 'MODEL_ERROR', status: 500 });
    expect(received).toHaveLength(1);
  });

  it('retries only when asked to: maxRetries 1 turns a 500 then a stream into a reply', async () => {
    handlers.push(errorAnswer(500, 'flaky', { 'retry-after-ms': '0' }));
    handlers.push(sse([delta({ content: 'ok' }, 'stop'), done]));
    const chunks = await collect(
      model({ maxRetries: 1 }).stream([{ role: 'user', content: 'hi' }], {
        tools: [],
        signal: new AbortController().signal,
      }),
    );
    expect(chunks).toEqual([
      { type: 'text', delta: 'ok' },
      { type: 'finish', reason: 'stop', usage: undefined },
    ]);
    expect(received).toHaveLength(2);
  });

  it('retries a 429 after its retry-after, as the openai client does (maxRetries 2)', async () => {
    handlers.push(errorAnswer(429, 'slow down', { 'retry-after-ms': '0' }));
    handlers.push(errorAnswer(503, 'busy', { 'retry-after-ms': '0' }));
    handlers.push(sse([delta({ content: 'ok' }, 'stop'), done]));
    const chunks = await collect(
      model({ maxRetries: 2 }).stream([{ role: 'user', content: 'hi' }], {
        tools: [],
        signal: new AbortController().signal,
      }),
    );
    expect(chunks.at(0)).toEqual({ type: 'text', delta: 'ok' });
    expect(received).toHaveLength(3);
  });

  it('a cancel ends a call that waits to retry at once, and no retry is sent', async () => {
    // The client has the 429 in hand (its fetch returned): from here it waits out the backoff.
    const inBackoff = deferred<void>();
    const watched: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (response.status !== 429) return response;
      await response.text();
      inBackoff.resolve();
      return new Response(null, { status: 429, headers: response.headers });
    };
    // A retry-after of 50 s: only an abort that does not wait for the backoff ends this test.
    handlers.push(errorAnswer(429, 'slow down', { 'retry-after': '50' }));
    const controller = new AbortController();
    const call = collect(
      createOpenAIModel({
        baseURL,
        apiKey: 'sk-local',
        model: 'test-model',
        maxRetries: 2,
        fetch: watched,
      }).stream([{ role: 'user', content: 'hi' }], { tools: [], signal: controller.signal }),
    ).catch((error: unknown) => error);
    await inBackoff.promise;
    const reason = new Error('stop');
    controller.abort(reason);
    expect(await call).toBe(reason);
    expect(received).toHaveLength(1);
  });

  it('rejects bad options with INVALID_ARGUMENT', () => {
    expect(() => createOpenAIModel({ apiKey: '', model: 'm' })).toThrow(
      /expected `apiKey` to be a non-empty string/,
    );
    expect(() => createOpenAIModel({ apiKey: 'k', model: 'm', baseURL: 'not a url' })).toThrow(
      /INVALID_ARGUMENT/,
    );
    expect(() => createOpenAIModel({ apiKey: 'k', model: 'm', maxRetries: -1 })).toThrow(
      /maxRetries/,
    );
  });

  it('drives a ReAct run end to end: tool call, tool result on the wire, final reply', async () => {
    const { runtime } = setup();
    handlers.push(
      sse([
        delta({
          tool_calls: [
            {
              index: 0,
              id: 'call_w',
              type: 'function',
              function: { name: 'weather', arguments: '{"city":' },
            },
          ],
        }),
        delta({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
        delta({}, 'tool_calls'),
        usage(10, 5),
        done,
      ]),
    );
    handlers.push(
      sse([
        delta({ content: 'Sunny in ' }),
        delta({ content: 'Paris.' }),
        delta({}, 'stop'),
        usage(20, 4),
        done,
      ]),
    );
    const weather = defineTool({
      name: 'weather',
      description: 'Weather of a city',
      parameters: z.object({ city: z.string() }),
      execute: ({ city }) => `sunny in ${city}`,
    });
    const run = startReActRun(runtime, { model: model(), tools: [weather] }, 'Weather in Paris?');
    const result = await run.result();
    expect(result).toMatchObject({ reply: 'Sunny in Paris.', reason: 'completed', steps: 2 });
    expect(result.usage).toEqual({ promptTokens: 30, completionTokens: 9, totalTokens: 39 });
    expect(received[1]?.body.messages).toEqual([
      { role: 'user', content: 'Weather in Paris?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          {
            id: 'call_w',
            type: 'function',
            function: { name: 'weather', arguments: '{"city":"Paris"}' },
          },
        ],
      },
      { role: 'tool', tool_call_id: 'call_w', content: 'sunny in Paris' },
    ]);
    expect((received[0]?.body.tools as unknown[])[0]).toMatchObject({
      type: 'function',
      function: { name: 'weather', parameters: { type: 'object', required: ['city'] } },
    });
  });

  it('a cancel during the HTTP stream ends the run CANCELLED and closes the request', async () => {
    const { runtime } = setup();
    const closed = deferred();
    const firstSent = deferred();
    handlers.push((res) => {
      startSse(res);
      res.write(delta({ content: 'Thinking' }), () => firstSent.resolve());
      res.on('close', () => closed.resolve());
    });
    const run = runtime.prepare({
      ownerId: owner,
      sessionId: session,
      agent: createReActAgent({ model: model() }),
      input: 'think',
    });
    const firstDelta = new Promise<void>((resolve) => {
      const off = runtime.onEvent((event) => {
        if (event.type === 'agent.message_delta') {
          off();
          resolve();
        }
      });
    });
    run.start();
    await firstSent.promise;
    await firstDelta;
    run.cancel();
    expect(await run.termination).toMatchObject({ status: 'CANCELLED', unsettled: false });
    await closed.promise;
    const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
    expect(history.at(-1)).toMatchObject({
      role: 'assistant',
      content: 'Thinking',
      stop: 'cancelled',
    });
  });

  it('a failed HTTP call fails the run with the MODEL_ERROR and its status', async () => {
    const { runtime } = setup();
    handlers.push(errorAnswer(429, 'slow down'));
    const run = startReActRun(runtime, { model: model() }, 'hi');
    await expect(run.result()).rejects.toMatchObject({ code: 'MODEL_ERROR', status: 429 });
  });
});
