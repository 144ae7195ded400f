import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { agentAsTool } from '../../src/agent/agent-as-tool.js';
import { createGate } from '../../src/agent/gate.js';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { eventsOf, owner, session, setup, summarize, startReActRun } from './helpers.js';

describe('agentAsTool: nested agents', () => {
  it('runs the child as a nested run and returns its reply; the child leaves the session history alone', async () => {
    const { clock, runtime } = setup();
    const childModel = createScriptedModel([{ text: 'Lyon has 3 museums.' }], { clock });
    const research = agentAsTool({
      name: 'research',
      description: 'Researches a topic',
      agent: createReActAgent({ model: childModel }),
    });
    const parentModel = createScriptedModel(
      [
        { toolCalls: [{ name: 'research', args: { input: 'museums in Lyon' } }] },
        { text: 'There are 3.' },
      ],
      { clock },
    );
    const run = startReActRun(
      runtime,
      { model: parentModel, tools: [research] },
      'How many museums in Lyon?',
    );
    expect((await run.result()).reply).toBe('There are 3.');
    expect(summarize(childModel.requests[0]?.messages ?? [])).toEqual(['user: museums in Lyon']);
    expect(parentModel.requests[1]?.messages.find((m) => m.role === 'tool')?.content).toBe(
      'Lyon has 3 museums.',
    );
    const history = await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session });
    expect(summarize(history)).toEqual([
      'user: How many museums in Lyon?',
      'assistant:  [research]',
      'tool research: Lyon has 3 museums.',
      'assistant: There are 3.',
    ]);
    const childRunIds = new Set(
      (await eventsOf(runtime))
        .map((e) => e.runId)
        .filter((id) => id !== undefined && id !== run.id),
    );
    expect(childRunIds.size).toBe(1);
  });

  it('a recursive cancel of the parent reaches the child: its model call is aborted and its run CANCELLED', async () => {
    const { clock, runtime } = setup();
    const gate = createGate();
    const childModel = createScriptedModel([{ text: ['thinking', '...'], gate, gateAt: 1 }], {
      clock,
    });
    const research = agentAsTool({
      name: 'research',
      description: 'Researches',
      agent: createReActAgent({ model: childModel }),
    });
    const parentModel = createScriptedModel(
      [{ toolCalls: [{ name: 'research', args: { input: 'x' } }] }],
      {
        clock,
      },
    );
    const run = startReActRun(runtime, { model: parentModel, tools: [research] }, 'go');
    await gate.reached;
    run.cancel(); // immediate cancels are recursive
    expect(await run.termination).toMatchObject({ status: 'CANCELLED', unsettled: false });
    expect(childModel.requests[0]?.signal.aborted).toBe(true);
    const events = await eventsOf(runtime);
    const childCancelled = events.filter((e) => e.type === 'run.cancelled' && e.runId !== run.id);
    expect(childCancelled).toHaveLength(1);
    expect(childCancelled[0]?.payload.initiator).toBe('parent');
    const parentCancelled = events.find((e) => e.type === 'run.cancelled' && e.runId === run.id);
    expect(parentCancelled?.payload.initiator).toBe('user');
    expect(runtime.runs.size).toBe(0);
  });

  it('an interrupt of the parent interrupts the child, which answers with its recovery reply', async () => {
    const { clock, runtime } = setup();
    const gate = createGate();
    const childModel = createScriptedModel([{ text: ['half', ' done'], gate, gateAt: 1 }], {
      clock,
    });
    const research = agentAsTool({
      name: 'research',
      description: 'Researches',
      agent: createReActAgent({ model: childModel, recoveryReply: 'child stopped' }),
      parameters: z.object({ topic: z.string() }),
      toInput: ({ topic }) => `research ${topic}`,
    });
    const parentModel = createScriptedModel(
      [{ toolCalls: [{ name: 'research', args: { topic: 'x' } }] }],
      {
        clock,
      },
    );
    const run = startReActRun(runtime, { model: parentModel, tools: [research] }, 'go');
    await gate.reached;
    run.interrupt('stop everything');
    const result = await run.result();
    expect(result.reason).toBe('interrupted');
    expect(summarize(childModel.requests[0]?.messages ?? [])).toEqual(['user: research x']);
    expect(summarize(result.messages)[2]).toBe('tool research: child stopped');
    const completed = (await eventsOf(runtime)).filter((e) => e.type === 'run.completed');
    expect(completed.map((e) => e.payload.reason)).toEqual(['interrupted', 'interrupted']);
  });
});
