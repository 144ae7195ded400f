/**
 * A carried turn's reply (`{ resume: state, carried: true }`, a cluster's failover policy
 * `resume`, README "Cluster"): the resumed run is the same run as the lost attempts, so its
 * `reply` is the whole reply, its cut replies (one per lost attempt) before the continuation,
 * while the history keeps each cut reply as a message of its own (`stop: 'cancelled'`).
 */
import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/agent/messages.js';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { createScriptedModel, type ScriptedReply } from '../../src/agent/scripted-model.js';
import { defineTool } from '../../src/agent/tool.js';
import { z } from 'zod';
import { owner, session, setup } from './helpers.js';

const cutReply = (content: string): ChatMessage => ({
  role: 'assistant',
  id: `cut-${content.length}`,
  content,
  stop: 'cancelled',
});

/** Runs a carried resume of `messages` and `partial` on a model scripted with `replies`. */
async function resume(messages: ChatMessage[], partial: string, replies: ScriptedReply[]) {
  const { clock, runtime } = setup();
  const note = defineTool({
    name: 'note',
    description: 'Takes a note',
    parameters: z.object({}),
    execute: () => 'noted',
  });
  const model = createScriptedModel(replies, { clock });
  const agent = createReActAgent({ model, tools: [note] });
  const key = { ownerId: owner, sessionId: session };
  const run = runtime.prepare({
    ...key,
    agent,
    input: { resume: { step: 1, messages, partial }, carried: true },
  });
  run.start();
  const result = await run.result();
  const history = await runtime.sessionStore.load({}, key);
  return { result, history: history.map((m) => m.content), model };
}

describe('createReActAgent: the reply of a carried turn', () => {
  it('is the cut reply and its continuation, the history keeping them apart', async () => {
    const { result, history } = await resume([{ role: 'user', content: 'hi' }], 'One. ', [
      { text: ['Two. ', 'Three.'] },
    ]);
    expect(result.reply).toBe('One. Two. Three.');
    expect(history).toEqual(['hi', 'One. ', 'Two. Three.']);
  });

  it('after two lost attempts: both cut replies, in order, then the continuation', async () => {
    const { result, history } = await resume(
      [{ role: 'user', content: 'hi' }, cutReply('One. ')],
      'Two. ',
      [{ text: ['Three.'] }],
    );
    expect(result.reply).toBe('One. Two. Three.');
    expect(history).toEqual(['hi', 'One. ', 'Two. ', 'Three.']);
  });

  it('is only the final reply when the continuation called a tool first', async () => {
    const { result, model } = await resume([{ role: 'user', content: 'hi' }], 'One. ', [
      { text: ['Two. '], toolCalls: [{ id: 'tu-1', name: 'note', args: {} }] },
      { text: ['Noted.'] },
    ]);
    expect(model.requests).toHaveLength(2);
    expect(result.reply).toBe('Noted.');
  });

  it('is the reply alone when nothing was cut (a safe point between steps)', async () => {
    const { result } = await resume([{ role: 'user', content: 'hi' }], '', [{ text: ['Hello.'] }]);
    expect(result.reply).toBe('Hello.');
  });
});
