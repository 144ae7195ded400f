/**
 * The SessionStore contract (docs/architecture.md, "Checkpoints and stores", "Cluster on
 * Redis"): one suite, run against memory, SQLite and the cluster's Redis store.
 */
import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/agent/messages.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { useStoreHarness, type StoreHarness } from './record-store-contract.js';

const a = { ownerId: 'alice', sessionId: 's1' };
const b = { ownerId: 'bob', sessionId: 's1' };

/** A run's worth of messages: a tool call with its result, an interrupted reply, a hint. */
export const turn: ChatMessage[] = [
  { role: 'user', content: 'Weather?' },
  {
    role: 'assistant',
    id: 'm1',
    content: '',
    toolCalls: [{ id: 't1', name: 'weather', arguments: '{"city":"Paris"}' }],
  },
  { role: 'tool', toolCallId: 't1', name: 'weather', content: 'sunny', isError: false },
  { role: 'assistant', id: 'm2', content: 'Sunny.', stop: 'interrupted' },
  { role: 'user', content: 'a hint', hintId: 'h1' },
];

/** Runs the contract against the harnesses `open` makes (one per test). */
export function describeSessionStoreContract(
  name: string,
  open: () => Promise<StoreHarness<SessionStore>>,
): void {
  describe(`SessionStore contract: ${name}`, () => {
    const opened = useStoreHarness(open);

    it('loads an unknown session as empty', async () => {
      const store = await opened();
      expect(await store.load({}, a)).toEqual([]);
    });

    it('appends in order and loads the messages back unchanged', async () => {
      const store = await opened();
      await store.append({}, a, turn.slice(0, 2));
      await store.append({}, a, turn.slice(2));
      expect(await store.load({}, a)).toEqual(turn);
    });

    it('keeps text exactly: unicode, escapes, JSON look-alikes, an empty append', async () => {
      const store = await opened();
      const messages: ChatMessage[] = [
        { role: 'user', content: 'héllo 🌍 \u2028 \u0000 "quoted" \\ {"a":[]} 你好' },
        { role: 'assistant', id: 'm\u{1F600}', content: '[]', stop: 'interrupted' },
      ];
      await store.append({}, a, messages);
      await store.append({}, a, []);
      expect(await store.load({}, a)).toEqual(messages);
    });

    it('keys histories by owner and session', async () => {
      const store = await opened();
      await store.append({}, a, [{ role: 'user', content: 'alice' }]);
      await store.append({}, b, [{ role: 'user', content: 'bob' }]);
      await store.append({}, { ownerId: 'alice', sessionId: 's2' }, [
        { role: 'user', content: 'other' },
      ]);
      expect(await store.load({}, a)).toEqual([{ role: 'user', content: 'alice' }]);
      expect(await store.load({}, b)).toEqual([{ role: 'user', content: 'bob' }]);
    });

    it('clears one session only', async () => {
      const store = await opened();
      await store.append({}, a, turn);
      await store.append({}, b, turn);
      await store.clear({}, a);
      expect(await store.load({}, a)).toEqual([]);
      expect(await store.load({}, b)).toHaveLength(turn.length);
      await store.append({}, a, [{ role: 'user', content: 'again' }]);
      expect(await store.load({}, a)).toEqual([{ role: 'user', content: 'again' }]);
    });

    it('never shares objects with its callers', async () => {
      const store = await opened();
      const messages: ChatMessage[] = [{ role: 'user', content: 'mine' }];
      await store.append({}, a, messages);
      messages[0] = { role: 'user', content: 'mutated' };
      const loaded = await store.load({}, a);
      (loaded as unknown[]).push('junk');
      expect(await store.load({}, a)).toEqual([{ role: 'user', content: 'mine' }]);
    });
  });
}
