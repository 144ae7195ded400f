/**
 * What a turn resumed from the session history asks again (README "Agents"): only the calls
 * the cut saved with its not-run `cancelled` result, under new ids; nothing when the history
 * does not end with the cut reply and its results.
 */
import { describe, expect, it } from 'vitest';
import type { AssistantMessage, ChatMessage } from '../../src/agent/messages.js';
import { reissuedCalls, unansweredCalls } from '../../src/agent/resumed-turn.js';
import { notRunContent } from '../../src/agent/tool-runner.js';

const reply: AssistantMessage = {
  role: 'assistant',
  id: 'r1',
  content: 'Checking.',
  toolCalls: [
    { id: 'c1', name: 'weather', arguments: '{"city":"Oslo"}' },
    { id: 'c2', name: 'clock', arguments: '{}' },
  ],
};
const user: ChatMessage = { role: 'user', content: 'Weather and time?' };
const result = (toolCallId: string, content: string): ChatMessage => ({
  role: 'tool',
  toolCallId,
  name: toolCallId === 'c1' ? 'weather' : 'clock',
  content,
  isError: content !== 'ok',
});
const pending = unansweredCalls([user, reply]);

describe('reissuedCalls', () => {
  it('asks again only the calls the cut answered "cancelled", under new ids', () => {
    const past = [user, reply, result('c1', 'ok'), result('c2', notRunContent.cancelled)];
    expect(pending?.calls.map((call) => call.id)).toEqual(['c1', 'c2']);
    expect(pending && reissuedCalls(past, pending, 'm2')).toEqual({
      reply: {
        role: 'assistant',
        id: 'm2',
        content: '',
        toolCalls: [{ id: 'm2_0', name: 'clock', arguments: '{}' }],
      },
      calls: [{ id: 'm2_0', name: 'clock', arguments: '{}' }],
    });
  });

  it('asks nothing when the history does not end with the cut reply and its results', () => {
    const cancelled = [
      result('c1', notRunContent.cancelled),
      result('c2', notRunContent.cancelled),
    ];
    const later: ChatMessage = { role: 'assistant', id: 'r2', content: 'Done.' };
    for (const past of [
      [user],
      [user, reply, ...cancelled, later],
      [user, reply, result('c1', 'ok'), result('c2', 'ok')],
    ]) {
      expect(pending && reissuedCalls(past, pending, 'm2')).toBeUndefined();
    }
  });
});
