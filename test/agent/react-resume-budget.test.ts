/**
 * A turn resumed from the session history (a TurnLoop's `genResume`, README "Agents") under a
 * tight request budget (README "Agents", `historyPolicy`): the cut turn, which the cut saved to
 * the history, is still the current turn. Its user message is sent, its long tool results are
 * left out first, as in the run before the cut; it is never dropped or summarized as an older
 * turn, which sent the model a request without the question it was answering.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createReActAgent, type ReActSafePointState } from '../../src/agent/react-agent.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { defineTool } from '../../src/agent/tool.js';
import { CancelMode } from '../../machines/cancel-request.js';
import { owner, session, setup, summarize } from './helpers.js';

const key = { ownerId: owner, sessionId: session };

describe('createReActAgent: a history-resumed turn under the request budget', () => {
  it('keeps the cut turn as the current one: its question is sent, its long result left out', async () => {
    const { runtime } = setup();
    const report = defineTool({
      name: 'report',
      description: 'A long report',
      parameters: z.object({}),
      execute: () => 'data '.repeat(400),
    });
    const model = createScriptedModel([
      { text: 'Reading.', toolCalls: [{ id: 'call_r', name: 'report', args: {} }] },
      { text: 'The report says data.' },
    ]);
    const historyPolicy = { maxRequestTokens: 300, maxToolResultTokens: 10_000 };
    const agent = createReActAgent({ model, tools: [report], historyPolicy });

    // The first run reads the report; a cancel cuts it at its afterToolCalls safe point.
    const first = runtime.prepare({ ...key, agent, input: 'Summarize the report.' });
    first.start();
    first.cancel({ mode: CancelMode.AfterToolCalls });
    expect((await first.termination).status).toBe('CANCELLED');
    const state = JSON.parse(JSON.stringify(first.safePointState)) as ReActSafePointState;
    expect(summarize(await runtime.sessionStore.load({}, key))).toEqual([
      'user: Summarize the report.',
      'assistant: Reading. [report]',
      `tool report: ${'data '.repeat(400)}`,
    ]);

    // Resumed from the history, it asks the model with the question and the call, the result
    // left out to fit; before, the whole cut turn was an older turn over the budget, folded
    // into a summary: the request held no user message, no call, no result.
    const resumed = runtime.prepare({ ...key, agent, input: { resume: state } });
    resumed.start();
    await expect(resumed.result()).resolves.toMatchObject({ reply: 'The report says data.' });
    const request = model.requests[1]?.messages ?? [];
    expect(summarize(request)).toEqual([
      'user: Summarize the report.',
      'assistant: Reading. [report]',
      expect.stringMatching(
        /^tool report: \[… tool result left out by runplane to fit the context/,
      ),
    ]);
  });
});
