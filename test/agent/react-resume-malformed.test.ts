/**
 * A resumed ReAct turn whose state's last reply carries malformed tool calls (a state no safe
 * point records: a hand-written or damaged `{ resume: state }`) fails its run with a typed
 * `INVALID_ARGUMENT`, not a bare TypeError, and runs no tool (two calls under one id included:
 * a live reply like that is refused too, README "Agents"), whichever way it resumes (carried,
 * without a history, or from the session history, where such a state was not checked and the
 * run went on); a well-formed call of a tool not registered is answered as a tool error, as in
 * a live turn.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { InvalidArgumentError } from '../../src/errors.js';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { defineTool } from '../../src/agent/tool.js';
import { owner, session, setup } from './helpers.js';

const key = { ownerId: owner, sessionId: session };

type From = 'carried' | 'no history' | 'history';

async function resumeWith(toolCalls: unknown, from: From) {
  let ran = 0;
  const clock = defineTool({
    name: 'clock',
    description: 'The time',
    parameters: z.object({}),
    execute: () => {
      ran++;
      return '12:00';
    },
  });
  const { runtime } = setup();
  const agent = createReActAgent({
    model: createScriptedModel([{ text: 'done' }]),
    tools: [clock],
    ...(from === 'no history' ? { history: 'none' as const } : {}),
  });
  const reply = { role: 'assistant', id: 'a1', content: '', toolCalls };
  const state = { step: 1, messages: [{ role: 'user', content: 'time?' }, reply] };
  const input = { resume: state, ...(from === 'carried' ? { carried: true } : {}) };
  const run = runtime.prepare({ ...key, agent, input: input as never });
  run.start();
  const termination = await run.termination;
  const result: unknown = await run.result().catch((error: unknown) => error);
  return { status: termination.status, result, ran };
}

describe('createReActAgent: resumed with malformed tool calls', () => {
  const malformed: Record<string, unknown> = {
    'not a list': { id: 'c1', name: 'clock', arguments: '{}' },
    'a null call': [null],
    'a call without id': [{ name: 'clock', arguments: '{}' }],
    'a call with a numeric name': [{ id: 'c1', name: 7, arguments: '{}' }],
    'two calls with one id': [
      { id: 'c1', name: 'clock', arguments: '{}' },
      { id: 'c1', name: 'clock', arguments: '{}' },
    ],
  };
  for (const [what, toolCalls] of Object.entries(malformed)) {
    for (const from of ['carried', 'no history', 'history'] as const) {
      it(`${what} (${from}): INVALID_ARGUMENT, no tool run`, async () => {
        const { status, result, ran } = await resumeWith(toolCalls, from);
        expect(status).toBe('FAILED');
        expect(result).toBeInstanceOf(InvalidArgumentError);
        expect((result as InvalidArgumentError).message).toMatch(/toolCalls/);
        expect(ran).toBe(0);
      });
    }
  }

  it('a call of a tool not registered is answered as a tool error, then the model replies', async () => {
    const { status, result } = await resumeWith(
      [{ id: 'c1', name: 'nope', arguments: '{}' }],
      'carried',
    );
    expect(status).toBe('COMPLETED');
    const messages = (result as { messages: Array<{ role: string; isError?: boolean }> }).messages;
    expect(messages.filter((m) => m.role === 'tool').map((m) => m.isError)).toEqual([true]);
  });

  it('a state with a negative step: INVALID_ARGUMENT, the model never asked', async () => {
    // Read as is, the run counted its steps from there and called the model past maxSteps.
    const { runtime } = setup();
    const ask = { toolCalls: [{ name: 'clock', args: {} }] };
    const model = createScriptedModel([ask, ask, ask, ask, ask, { text: 'done' }]);
    const agent = createReActAgent({ model, tools: [], maxSteps: 2 });
    const input = { resume: { step: -3, messages: [{ role: 'user', content: 'time?' }] } };
    const run = runtime.prepare({ ...key, agent, input: input as never });
    run.start();
    expect((await run.termination).status).toBe('FAILED');
    await expect(run.result()).rejects.toBeInstanceOf(InvalidArgumentError);
    expect(model.requests).toHaveLength(0);
  });
});
