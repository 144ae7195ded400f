import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createGate } from '../../src/agent/gate.js';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { createMemorySessionStore } from '../../src/stores/memory-session-store.js';
import type { SessionStore } from '../../src/stores/session-store.js';
import { createSqliteSessionStore } from '../../src/stores/sqlite/index.js';
import { setup, summarize } from '../agent/helpers.js';
import { useCluster } from '../cluster/cluster-helpers.js';
import { redisSessionStoreHarness } from '../cluster/record-harnesses.js';
import { skipRedis } from '../redis/redis-server.js';
import type { StoreHarness } from './record-store-contract.js';
import { describeSessionStoreContract, turn } from './session-store.contract.js';

const dir = mkdtempSync(join(tmpdir(), 'runplane-session-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const a = { ownerId: 'alice', sessionId: 's1' };

/** A store of a synchronous backend, disposed of by closing it (when it has `close`). */
const harness =
  (create: () => SessionStore & { close?: () => void }) =>
  (): Promise<StoreHarness<SessionStore>> => {
    const store = create();
    return Promise.resolve({ store, dispose: () => store.close?.() });
  };

describeSessionStoreContract('memory', harness(createMemorySessionStore));
describeSessionStoreContract(
  'sqlite :memory:',
  harness(() => createSqliteSessionStore({ path: ':memory:' })),
);
describeSessionStoreContract(
  'sqlite file',
  harness(() => createSqliteSessionStore({ path: join(dir, `contract-${Math.random()}.db`) })),
);

describe.skipIf(skipRedis)('on Redis', () => {
  describeSessionStoreContract('redis', redisSessionStoreHarness(useCluster()));
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
