/**
 * A run resumed from an `afterChatModel` safe point taken when the model's reply had tool
 * calls (README "Agents"): the state holds that reply, not the results of its calls, which had
 * not run. The resumed run runs those calls (each once: a call the state answers ran already),
 * then calls the model, so the request never holds a tool call without its result. The model
 * is a real OpenAI-compatible HTTP server on 127.0.0.1 that refuses such a request with a 400,
 * as the OpenAI API does.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CancelMode } from '../../machines/cancel-request.js';
import { createOpenAIModel } from '../../src/agent/openai-model.js';
import { createReActAgent, type ReActSafePointState } from '../../src/agent/react-agent.js';
import { defineTool } from '../../src/agent/tool.js';
import type { Runtime } from '../../src/runtime/create-runtime.js';
import {
  eventsOf,
  expectNoHalfToolCalls,
  owner,
  session,
  setup,
  startReActRun,
  summarize,
} from './helpers.js';
import { delta, done, startWireServer } from './openai-server.js';

const key = { ownerId: owner, sessionId: session };

interface WireMessage {
  readonly role: string;
  readonly content?: string | null;
  readonly tool_calls?: ReadonlyArray<{ readonly id: string }>;
  readonly tool_call_id?: string;
}

/** One scripted answer of the server: text, then tool calls `[id, name, arguments JSON]`. */
interface Answer {
  readonly text?: string;
  readonly calls?: ReadonlyArray<readonly [string, string, string]>;
}

/**
 * Why the OpenAI API refuses `messages` (400), or `undefined`: every assistant `tool_calls` id
 * is answered by one `tool` message before the next user or assistant message, and every
 * `tool` message answers a call of the assistant message before it.
 */
function shapeError(messages: readonly WireMessage[]): string | undefined {
  let open: Set<string> | undefined;
  const unanswered = () =>
    open !== undefined && open.size > 0
      ? `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...open].join(', ')}`
      : undefined;
  for (const message of messages) {
    if (message.role === 'tool') {
      if (open === undefined || !open.delete(message.tool_call_id ?? '')) {
        return "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.";
      }
      continue;
    }
    const error = unanswered();
    if (error !== undefined) return error;
    open =
      message.tool_calls === undefined ? undefined : new Set(message.tool_calls.map((c) => c.id));
  }
  return unanswered();
}

let server: Awaited<ReturnType<typeof startWireServer>>;
let answers: Answer[] = [];
/** The messages of every request received, and the status answered. */
let received: Array<{ messages: WireMessage[]; status: number }> = [];

beforeAll(async () => {
  server = await startWireServer((res, body) => {
    const messages = body.messages as WireMessage[];
    const error = shapeError(messages);
    const answer = answers.shift();
    const status = error !== undefined ? 400 : answer === undefined ? 500 : 200;
    received.push({ messages, status });
    if (status !== 200 || answer === undefined) {
      res.writeHead(status, { 'content-type': 'application/json' });
      const message = error ?? 'no answer scripted';
      res.end(JSON.stringify({ error: { message, type: 'invalid_request_error', code: null } }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(delta({ role: 'assistant', content: answer.text ?? '' }));
    (answer.calls ?? []).forEach(([id, name, args], index) => {
      const call = { index, id, type: 'function', function: { name, arguments: args } };
      res.write(delta({ tool_calls: [call] }));
    });
    res.write(delta({}, answer.calls === undefined ? 'stop' : 'tool_calls'));
    res.end(done);
  });
});

afterAll(() => server.close());

beforeEach(() => {
  answers = [];
  received = [];
});

const model = () =>
  createOpenAIModel({
    baseURL: server.baseURL,
    apiKey: 'sk-local',
    model: 'test-model',
    maxRetries: 0,
  });

/** The tools `weather` and `clock`, counting their executions. */
function countedTools() {
  const ran = { weather: 0, clock: 0 };
  let onWeather = () => {};
  const weather = defineTool({
    name: 'weather',
    description: 'Weather of a city',
    parameters: z.object({ city: z.string() }),
    execute: ({ city }) => {
      ran.weather++;
      onWeather();
      return `sunny in ${city}`;
    },
  });
  const clock = defineTool({
    name: 'clock',
    description: 'The time',
    parameters: z.object({}),
    execute: () => {
      ran.clock++;
      return '12:00';
    },
  });
  return { ran, tools: [weather, clock], afterWeather: (f: () => void) => (onWeather = f) };
}

/** The request messages as `role[:tool_call ids|:answered id]`, to read their shape at once. */
const shapeOf = (messages: readonly WireMessage[]) =>
  messages.map((m) =>
    m.role === 'tool'
      ? `tool:${m.tool_call_id}`
      : m.tool_calls === undefined
        ? m.role
        : `${m.role}:${m.tool_calls.map((c) => c.id).join(',')}`,
  );

/** The requests received since the last call: each one's status and the shape of its messages. */
function takeRequests() {
  const taken = received.map((r) => ({ status: r.status, shape: shapeOf(r.messages) }));
  received = [];
  return taken;
}

/**
 * Runs `input` until its first `afterChatModel` safe point with tool calls, where a safe-point
 * cancel cuts it (as a drain or a graceful stop does): the safe point's state, through JSON as
 * a cluster records it.
 */
async function cutAfterChatModel(
  runtime: Runtime,
  tools: ReturnType<typeof countedTools>,
  cutWhen: 'at once' | 'after weather',
) {
  const run = startReActRun(runtime, { model: model(), tools: tools.tools }, 'Weather and time?');
  const cut = () => void run.cancel({ mode: CancelMode.AfterChatModel });
  if (cutWhen === 'at once') cut();
  else tools.afterWeather(cut);
  expect((await run.termination).status).toBe('CANCELLED');
  return JSON.parse(JSON.stringify(run.safePointState)) as ReActSafePointState;
}

/**
 * Resumes `state`: `carried` (a cluster failover) or `no history` (`history: 'none'`) in a new
 * runtime, a new holder with nothing in its history; `history` in `runtime`, the cut run's,
 * whose history the cut saved (a TurnLoop's genResume).
 */
async function resume(
  state: ReActSafePointState,
  tools: ReturnType<typeof countedTools>,
  how:
    { from: 'carried' | 'no history'; maxSteps?: number } | { from: 'history'; runtime: Runtime },
) {
  const runtime = how.from === 'history' ? how.runtime : setup().runtime;
  const agent = createReActAgent({
    model: model(),
    tools: tools.tools,
    ...(how.from === 'no history' ? { history: 'none' as const } : {}),
    ...('maxSteps' in how && how.maxSteps !== undefined ? { maxSteps: how.maxSteps } : {}),
  });
  const input = { resume: state, ...(how.from === 'carried' ? { carried: true } : {}) };
  const run = runtime.prepare({ ...key, agent, input });
  run.start();
  const result = await run.result().catch((error: unknown) => error);
  return { runtime, result, history: await runtime.sessionStore.load({}, key) };
}

describe('createReActAgent: resumed from an afterChatModel safe point with tool calls', () => {
  it('a carried turn (a cluster failover) runs the pending calls once, then asks the model', async () => {
    const tools = countedTools();
    answers.push({
      text: 'Checking.',
      calls: [
        ['call_w', 'weather', '{"city":"Paris"}'],
        ['call_c', 'clock', '{}'],
      ],
    });
    const state = await cutAfterChatModel(setup().runtime, tools, 'at once');
    expect(tools.ran).toEqual({ weather: 0, clock: 0 });
    expect(takeRequests()).toEqual([{ status: 200, shape: ['user'] }]);
    const cutReply = state.messages.at(-1);
    expect(cutReply).toMatchObject({ role: 'assistant', toolCalls: [{ id: 'call_w' }, {}] });

    answers.push({ text: 'Sunny in Paris, and it is noon.' });
    const { runtime, result, history } = await resume(state, tools, { from: 'carried' });
    expect(takeRequests()).toEqual([
      { status: 200, shape: ['user', 'assistant:call_w,call_c', 'tool:call_w', 'tool:call_c'] },
    ]);
    expect(result).toMatchObject({ reply: 'Sunny in Paris, and it is noon.', steps: 2 });
    expect(tools.ran).toEqual({ weather: 1, clock: 1 });
    expect(summarize(history)).toEqual([
      'user: Weather and time?',
      'assistant: Checking. [weather, clock]',
      'tool weather: sunny in Paris',
      'tool clock: 12:00',
      'assistant: Sunny in Paris, and it is noon.',
    ]);
    expectNoHalfToolCalls(history);
    // The results answer the cut reply's calls, under its message id, before the next reply.
    const events = (await eventsOf(runtime)).filter((e) => e.type.startsWith('agent.'));
    expect(events.map((e) => e.type).slice(0, 3)).toEqual([
      'agent.tool_result',
      'agent.tool_result',
      'agent.message_delta',
    ]);
    expect(events[0]?.payload).toMatchObject({
      message_id: cutReply?.role === 'assistant' ? cutReply.id : 'none',
      tool_use_id: 'call_w',
      status: 'ok',
    });
  });

  it('runs only the calls of the last reply: a call the state answers ran already', async () => {
    const tools = countedTools();
    answers.push(
      { calls: [['call_w', 'weather', '{"city":"Oslo"}']] },
      { text: 'And the time.', calls: [['call_c', 'clock', '{}']] },
    );
    const state = await cutAfterChatModel(setup().runtime, tools, 'after weather');
    expect(tools.ran).toEqual({ weather: 1, clock: 0 });
    expect(state.step).toBe(2);
    takeRequests();

    answers.push({ text: 'Sunny in Oslo at noon.' });
    const { result, history } = await resume(state, tools, { from: 'carried' });
    const shape = ['user', 'assistant:call_w', 'tool:call_w', 'assistant:call_c', 'tool:call_c'];
    expect(takeRequests()).toEqual([{ status: 200, shape }]);
    expect(result).toMatchObject({ reply: 'Sunny in Oslo at noon.', steps: 3 });
    expect(tools.ran).toEqual({ weather: 1, clock: 1 });
    expectNoHalfToolCalls(history);
  });

  it('a resume without a session history (history none) runs them too', async () => {
    const tools = countedTools();
    answers.push({ calls: [['call_w', 'weather', '{"city":"Rome"}']] });
    const state = await cutAfterChatModel(setup().runtime, tools, 'at once');
    takeRequests();

    answers.push({ text: 'Sunny in Rome.' });
    const { result } = await resume(state, tools, { from: 'no history' });
    expect(takeRequests()).toEqual([
      { status: 200, shape: ['user', 'assistant:call_w', 'tool:call_w'] },
    ]);
    expect(result).toMatchObject({ reply: 'Sunny in Rome.' });
    expect(tools.ran).toEqual({ weather: 1, clock: 0 });
  });

  it('with no step left (maxSteps), runs the calls and ends on their reply', async () => {
    const tools = countedTools();
    answers.push({ text: 'Checking.', calls: [['call_c', 'clock', '{}']] });
    const state = await cutAfterChatModel(setup().runtime, tools, 'at once');
    takeRequests();

    const { result, history } = await resume(state, tools, { from: 'carried', maxSteps: 1 });
    expect(takeRequests()).toEqual([]);
    expect(tools.ran).toEqual({ weather: 0, clock: 1 });
    expect(result).toMatchObject({ reply: 'Checking.', reason: 'max_steps', steps: 1 });
    expect(summarize(history)).toEqual([
      'user: Weather and time?',
      'assistant: Checking. [clock]',
      'tool clock: 12:00',
    ]);
  });

  it('a resume from the session history (a TurnLoop genResume) asks the calls the cut saved as cancelled again', async () => {
    const { runtime } = setup();
    const tools = countedTools();
    answers.push({ calls: [['call_w', 'weather', '{"city":"Lima"}']] });
    const state = await cutAfterChatModel(runtime, tools, 'at once');
    takeRequests();

    answers.push({ text: 'Sunny in Lima.' });
    const { result, history } = await resume(state, tools, { from: 'history', runtime });
    expect(result).toMatchObject({ reply: 'Sunny in Lima.' });
    // The cut saved the call's result, "cancelled", with the turn: an id takes one result, so
    // the resumed run asks the call again under a new id, runs it once, then asks the model.
    const asked = history[3];
    const askedId = asked?.role === 'assistant' ? asked.toolCalls?.[0]?.id : undefined;
    expect(askedId).toBe(`${asked?.role === 'assistant' ? asked.id : ''}_0`);
    expect(takeRequests()).toEqual([
      {
        status: 200,
        shape: [
          'user',
          'assistant:call_w',
          'tool:call_w',
          `assistant:${askedId}`,
          `tool:${askedId}`,
        ],
      },
    ]);
    expect(tools.ran).toEqual({ weather: 1, clock: 0 });
    expect(summarize(history)).toEqual([
      'user: Weather and time?',
      'assistant:  [weather]',
      'tool(error) weather: Error: the run was cancelled before this tool call finished.',
      'assistant:  [weather]',
      'tool weather: sunny in Lima',
      'assistant: Sunny in Lima.',
    ]);
    expectNoHalfToolCalls(history);
  });
});
