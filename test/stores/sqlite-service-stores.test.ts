/**
 * The SQLite stores behind `runplane serve`: the shared database and its migrations, the
 * inbox, on a real file (its contract also against the cluster's inbox on a real private Redis) (the record stores' contract suites are in `record-stores.test.ts`).
 */
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createMemoryInbox } from '../../src/inbox/memory-inbox.js';
import type { Inbox } from '../../src/inbox/inbox.js';
import { applySqliteMigrations, openSqliteDatabase } from '../../src/stores/sqlite/database.js';
import { createSqliteInbox } from '../../src/stores/sqlite/inbox.js';
import {
  createSqliteSessionRecords,
  sessionRecordMigrations,
} from '../../src/stores/sqlite/session-records.js';
import { createRedisInbox } from '../../src/cluster/redis-inbox.js';
import { useCluster } from '../cluster/cluster-helpers.js';
import { holderOf } from '../cluster/record-harnesses.js';
import { skipRedis } from '../redis/redis-server.js';

const dir = mkdtempSync(join(tmpdir(), 'runplane-sqlite-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const freshPath = () => join(dir, `db-${++files}.db`);
const a = { ownerId: 'alice', sessionId: 's1' };
const b = { ownerId: 'bob', sessionId: 's1' };

describe('openSqliteDatabase', () => {
  it('creates the folder and the file, in WAL mode', () => {
    const path = join(dir, 'nested', 'deeper', 'runplane.db');
    const db = openSqliteDatabase({ path });
    expect(existsSync(path)).toBe(true);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    db.close();
  });

  it('applies each named migration once, in order', () => {
    const db = openSqliteDatabase({ path: freshPath() });
    const migrations = [
      { id: 't/1', sql: 'CREATE TABLE t (x INTEGER)' },
      { id: 't/2', sql: 'INSERT INTO t VALUES (1)' },
    ];
    expect(applySqliteMigrations(db, migrations)).toEqual(['t/1', 't/2']);
    expect(applySqliteMigrations(db, migrations)).toEqual([]);
    expect(db.prepare('SELECT COUNT(*) AS n FROM t').get()).toEqual({ n: 1 });
    db.close();
  });

  it('rolls a failing migration back and reports STORE_FAILED', () => {
    const db = openSqliteDatabase({ path: freshPath() });
    expect(() =>
      applySqliteMigrations(db, [{ id: 'bad/1', sql: 'CREATE TABLE u (x); NOT SQL' }]),
    ).toThrow(/STORE_FAILED/);
    expect(db.prepare("SELECT name FROM sqlite_master WHERE name = 'u'").get()).toBeUndefined();
    db.close();
  });

  it("adds the failover column to a database from before it: its sessions read 'mark'", () => {
    const db = openSqliteDatabase({ path: freshPath() });
    // The session records' schema as it was before `session-records/5`.
    applySqliteMigrations(
      db,
      sessionRecordMigrations.filter((m) => m.id !== 'session-records/5'),
    );
    db.prepare(
      `INSERT INTO runplane_sessions (owner_id, session_id, strategy, grace_ms, created_at, updated_at)
       VALUES ('alice', 'old', 'enqueue', 5000, 1, 1)`,
    ).run();
    const sessions = createSqliteSessionRecords({ database: db });
    expect(sessions.get('alice', 'old')).toMatchObject({ failover: 'mark', strategy: 'enqueue' });
    expect(sessions.update('alice', 'old', { failover: 'resume' }, 2)?.failover).toBe('resume');
    db.close();
  });

  it('refuses an empty path', () => {
    expect(() => openSqliteDatabase({ path: '' })).toThrow(/INVALID_ARGUMENT/);
  });
});

const hint = (id: string, text: string) => ({ id, text, source: 'user-supplement', at: 1 });

/** The Inbox contract, against the inboxes `open` makes (one per test, holding `a` and `b`). */
function describeInboxContract(name: string, open: () => Promise<Inbox & { close?: () => void }>) {
  describe(`Inbox contract: ${name}`, () => {
    it('drains hints in push order, once, per owner and session', async () => {
      const inbox = await open();
      inbox.push({}, a, hint('h1', 'one'));
      inbox.push({}, a, hint('h2', 'two'));
      inbox.push({}, b, hint('h3', 'bob'));
      expect(inbox.size({}, a)).toBe(2);
      expect(inbox.drain({}, a).map((h) => h.text)).toEqual(['one', 'two']);
      expect(inbox.drain({}, a)).toEqual([]);
      expect(inbox.drain({}, b)).toEqual([hint('h3', 'bob')]);
      inbox.close?.();
    });
  });
}

describeInboxContract('memory', () => Promise.resolve(createMemoryInbox()));
describeInboxContract('sqlite', () => Promise.resolve(createSqliteInbox({ path: freshPath() })));

describe.skipIf(skipRedis)('on Redis', () => {
  const cluster = useCluster();
  describeInboxContract('redis', async () => {
    const holder = holderOf(cluster);
    const inbox = createRedisInbox(holder);
    await holder.acquire(a);
    await holder.acquire(b);
    return inbox;
  });
});

describe('SQLite inbox durability', () => {
  it('keeps waiting hints across a reopen', () => {
    const path = freshPath();
    const first = createSqliteInbox({ path });
    first.push({}, a, hint('h1', 'kept'));
    first.close();
    const second = createSqliteInbox({ path });
    expect(second.drain({}, a)).toEqual([hint('h1', 'kept')]);
    second.close();
  });
});
