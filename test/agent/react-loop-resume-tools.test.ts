/**
 * A TurnLoop stopped right after the model asked for tools, before they ran (its `afterChatModel`
 * safe point), resumes the turn through `genResume` with the ReAct agent's safe-point state
 * (README "TurnLoop", "Agents"): the resumed run runs those calls, once, then asks the model,
 * as a cluster's failover resume does (test/agent/react-resume-tools.test.ts). The stop's
 * cancel saved each call with a "cancelled" result, so the run asks them again in a reply of
 * its own. Real TurnLoop, real checkpoint store, the scripted model.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createGate } from '../../src/agent/gate.js';
import { createReActAgent, type ReActSafePointState } from '../../src/agent/react-agent.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { defineTool, type Tool } from '../../src/agent/tool.js';
import { createMemoryCheckpointStore } from '../../src/stores/memory-checkpoint-store.js';
import { createTurnLoop } from '../../src/turn-loop/create-turn-loop.js';
import {
  countedWeather,
  eventsOf,
  expectNoHalfToolCalls,
  nextEvent,
  owner,
  session,
  setup,
  summarize,
} from './helpers.js';

describe('createReActAgent in a TurnLoop: a turn stopped before its tool calls ran', () => {
  it('resumes through genResume by running the pending calls, then asking the model', async () => {
    const { runtime } = setup();
    const { ran, tool: weather } = countedWeather();
    const { loopOf, resumedWith, model } = await stoppedAtAfterChatModel(runtime, weather);
    expect(ran).toEqual([]);

    // Loop 2 resumes the turn from the checkpoint, with the state of that safe point.
    const second = loopOf();
    const resumedRunEnded = nextEvent(runtime, 'run.completed');
    second.run();
    const { runId: resumedRunId } = await resumedRunEnded;
    second.stop();
    const resumed = await second.wait();
    expect(resumed.exitReason).toBeUndefined();
    const state = resumedWith[0] as ReActSafePointState;
    expect(state.messages.at(-1)).toMatchObject({ toolCalls: [{ id: 'call_w' }] });

    // The cut saved the call with a "cancelled" result: the resumed run asks it again, under
    // a new id (an id takes one result), runs it once, then asks the model.
    expect(ran).toEqual(['Lima']);
    expect(model.requests).toHaveLength(2);
    const turn = [
      'user: Weather in Lima?',
      'assistant: Checking. [weather]',
      'tool(error) weather: Error: the run was cancelled before this tool call finished.',
      'assistant:  [weather]',
      'tool weather: sunny in Lima',
    ];
    expect(summarize(model.requests[1]?.messages ?? [])).toEqual(turn);
    const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
    expect(summarize(history)).toEqual([...turn, 'assistant: Sunny in Lima.']);
    const asked = history[3];
    expect(asked?.role === 'assistant' && asked.toolCalls?.[0]).toMatchObject({
      id: `${asked?.role === 'assistant' ? asked.id : ''}_0`,
      name: 'weather',
      arguments: '{"city":"Lima"}',
    });
    // The log tells the same story: the reply that asks again, its call, the call's result.
    const resumedRun = (await eventsOf(runtime)).filter(
      (event) => event.runId === resumedRunId && event.type.startsWith('agent.'),
    );
    expect(resumedRun.map((event) => event.type).slice(0, 3)).toEqual([
      'agent.message',
      'agent.tool_use',
      'agent.tool_result',
    ]);
    expectNoHalfToolCalls(history);
  });

  it('a resumed turn cut again while its re-asked calls run asks them again on the next resume', async () => {
    const { runtime } = setup();
    // The first run of the tool hangs until the cut aborts it; later runs answer.
    const hang = createGate();
    const ran: string[] = [];
    const weather = defineTool({
      name: 'weather',
      description: 'Weather of a city',
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }, { signal }) => {
        if (!hang.isOpen) await hang.wait(signal);
        ran.push(city);
        return `sunny in ${city}`;
      },
    });
    const { loopOf } = await stoppedAtAfterChatModel(runtime, weather);

    // Loop 2 asks the call again and runs it; an immediate stop cuts it while it runs.
    const second = loopOf();
    second.run();
    await hang.reached;
    second.stop({ mode: 'immediate', cause: 'deploy' });
    expect((await second.wait()).interruptedItems).toEqual(['Weather in Lima?']);
    hang.open();
    expect(ran).toEqual([]);

    // Loop 3: the history answers both asks "cancelled"; the call is asked a third time and runs.
    // Before, loop 3 resumed from the first cut's state, found the history past that reply,
    // asked nothing, and the model answered with the weather never fetched.
    const third = loopOf();
    const resumedRunEnded = nextEvent(runtime, 'run.completed');
    third.run();
    await resumedRunEnded;
    third.stop();
    expect((await third.wait()).exitReason).toBeUndefined();
    expect(ran).toEqual(['Lima']);
    const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
    const cancelled =
      'tool(error) weather: Error: the run was cancelled before this tool call finished.';
    expect(summarize(history)).toEqual([
      'user: Weather in Lima?',
      'assistant: Checking. [weather]',
      cancelled,
      'assistant:  [weather]',
      cancelled,
      'assistant:  [weather]',
      'tool weather: sunny in Lima',
      'assistant: Sunny in Lima.',
    ]);
    expectNoHalfToolCalls(history);
  });
});

/**
 * A TurnLoop (memory checkpoint store) whose turn 'Weather in Lima?' was stopped gracefully at
 * its `afterChatModel` safe point, the model's reply asking `weather` for Lima, before it ran.
 *
 * @returns `loopOf()`, a new loop on the same checkpoint, and the states its `genResume` got
 */
async function stoppedAtAfterChatModel(
  runtime: ReturnType<typeof setup>['runtime'],
  weather: Tool,
) {
  const gate = createGate();
  const model = createScriptedModel([
    {
      text: 'Checking.',
      toolCalls: [{ id: 'call_w', name: 'weather', args: { city: 'Lima' } }],
      gate,
    },
    { text: 'Sunny in Lima.' },
  ]);
  const agent = createReActAgent({ model, tools: [weather] });
  const store = createMemoryCheckpointStore();
  const resumedWith: unknown[] = [];
  const loopOf = () =>
    createTurnLoop<string>({
      runtime,
      ownerId: owner,
      sessionId: session,
      store,
      checkpointId: 'chat',
      genInput: (items) => ({ input: items.join('\n'), consumed: items }),
      genResume: ({ interrupted, agentState }) => {
        resumedWith.push(agentState);
        return { input: { resume: agentState }, consumed: interrupted };
      },
      prepareAgent: () => agent,
    });
  const first = loopOf();
  first.push('Weather in Lima?');
  first.run();
  await gate.reached;
  first.stop({ mode: 'graceful', cause: 'deploy' });
  gate.open();
  const stopped = await first.wait();
  expect(stopped.interruptedItems).toEqual(['Weather in Lima?']);
  return { loopOf, resumedWith, model };
}
