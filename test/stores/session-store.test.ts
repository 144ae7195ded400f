import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createGate } from '../../src/agent/gate.js';
import type { ChatMessage } from '../../src/agent/messages.js';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { createMemorySessionStore } from '../../src/stores/memory-session-store.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { createSqliteSessionStore } from '../../src/stores/sqlite/index.js';
import { setup, summarize } from '../agent/helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'runplane-session-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const a = { ownerId: 'alice', sessionId: 's1' };
const b = { ownerId: 'bob', sessionId: 's1' };

const turn: ChatMessage[] = [
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

const implementations: Array<[string, () => SessionStore & { close?: () => void }]> = [
  ['memory', () => createMemorySessionStore()],
  ['sqlite :memory:', () => createSqliteSessionStore({ path: ':memory:' })],
  [
    'sqlite file',
    () => createSqliteSessionStore({ path: join(dir, `contract-${Math.random()}.db`) }),
  ],
];

describe.each(implementations)('SessionStore contract: %s', (_name, create) => {
  it('loads an unknown session as empty', async () => {
    const store = create();
    expect(await store.load({}, a)).toEqual([]);
    store.close?.();
  });

  it('appends in order and loads the messages back unchanged', async () => {
    const store = create();
    await store.append({}, a, turn.slice(0, 2));
    await store.append({}, a, turn.slice(2));
    expect(await store.load({}, a)).toEqual(turn);
    store.close?.();
  });

  it('keys histories by owner and session', async () => {
    const store = create();
    await store.append({}, a, [{ role: 'user', content: 'alice' }]);
    await store.append({}, b, [{ role: 'user', content: 'bob' }]);
    await store.append({}, { ownerId: 'alice', sessionId: 's2' }, [
      { role: 'user', content: 'other' },
    ]);
    expect(await store.load({}, a)).toEqual([{ role: 'user', content: 'alice' }]);
    expect(await store.load({}, b)).toEqual([{ role: 'user', content: 'bob' }]);
    store.close?.();
  });

  it('clears one session only', async () => {
    const store = create();
    await store.append({}, a, turn);
    await store.append({}, b, turn);
    await store.clear({}, a);
    expect(await store.load({}, a)).toEqual([]);
    expect(await store.load({}, b)).toHaveLength(turn.length);
    await store.append({}, a, [{ role: 'user', content: 'again' }]);
    expect(await store.load({}, a)).toEqual([{ role: 'user', content: 'again' }]);
    store.close?.();
  });

  it('never shares objects with its callers', async () => {
    const store = create();
    const messages: ChatMessage[] = [{ role: 'user', content: 'mine' }];
    await store.append({}, a, messages);
    messages[0] = { role: 'user', content: 'mutated' };
    const loaded = await store.load({}, a);
    (loaded as unknown[]).push('junk');
    expect(await store.load({}, a)).toEqual([{ role: 'user', content: 'mine' }]);
    store.close?.();
  });
});

describe('createSqliteSessionStore', () => {
  it('keeps histories across a reopen of the same file', async () => {
    const path = join(dir, 'reopen.db');
    const first = createSqliteSessionStore({ path });
    await first.append({}, a, turn);
    first.close();
    const second = createSqliteSessionStore({ path });
    expect(await second.load({}, a)).toEqual(turn);
    second.close();
  });

  it('reports a corrupt row as STORE_FAILED, never a crash', async () => {
    const database = new Database(':memory:');
    const store = createSqliteSessionStore({ database });
    await store.append({}, a, [{ role: 'user', content: 'ok' }]);
    database
      .prepare("INSERT INTO runplane_session_messages VALUES ('alice', 's1', 2, '{not json')")
      .run();
    await expect(store.load({}, a)).rejects.toMatchObject({ code: 'STORE_FAILED' });
    database
      .prepare('UPDATE runplane_session_messages SET message = \'{"role":"robot"}\' WHERE seq = 2')
      .run();
    await expect(store.load({}, a)).rejects.toThrow(
      /STORE_FAILED: session store load \(message 2 is not a chat message\)/,
    );
    store.close(); // a shared database stays open
    expect(database.open).toBe(true);
    database.close();
  });

  it('turns a failing database into a STORE_FAILED rejection', async () => {
    const database = new Database(':memory:');
    const store = createSqliteSessionStore({ database });
    database.close();
    await expect(store.append({}, a, turn)).rejects.toMatchObject({ code: 'STORE_FAILED' });
    await expect(store.load({}, a)).rejects.toMatchObject({ code: 'STORE_FAILED' });
  });

  it('rejects bad options with INVALID_ARGUMENT', () => {
    expect(() => createSqliteSessionStore({})).toThrow(
      /exactly one of `path` and `database`, got neither/,
    );
    expect(() => createSqliteSessionStore({ path: ':memory:', table: 'x; DROP TABLE y' })).toThrow(
      /expected `table` to be an SQL identifier/,
    );
  });

  it('backs a runtime: an interrupted run is saved to SQLite and read by the next run', async () => {
    const path = join(dir, 'runtime.db');
    const sessionStore = createSqliteSessionStore({ path });
    const { clock, runtime } = setup({ stores: { sessionStore } });
    const gate = createGate();
    const model = createScriptedModel(
      [{ text: ['Plan: ', 'A'], gate, gateAt: 1 }, { text: 'Resuming.' }],
      { clock },
    );
    const agent = createReActAgent({ model, recoveryReply: 'Stopped.' });
    const first = runtime.prepare({ ownerId: 'alice', sessionId: 's1', agent, input: 'Plan it' });
    first.start();
    await gate.reached;
    first.interrupt();
    await first.result();
    const second = runtime.prepare({ ownerId: 'alice', sessionId: 's1', agent, input: 'Go on' });
    second.start();
    await second.result();
    expect(summarize(model.requests[1]?.messages ?? [])).toEqual([
      'user: Plan it',
      'assistant(interrupted): Plan: ',
      'assistant(interrupted): Stopped.',
      'user: Go on',
    ]);
    sessionStore.close();
    const reopened = createSqliteSessionStore({ path });
    expect(await reopened.load({}, a)).toHaveLength(5);
    reopened.close();
  });
});
