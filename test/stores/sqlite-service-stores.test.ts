/**
 * The SQLite stores behind `runplane serve`: the shared database and its migrations, the
 * inbox, session records and run records, each on a real file.
 */
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createMemoryInbox } from '../../src/inbox/memory-inbox.js';
import type { Inbox } from '../../src/inbox/inbox.js';
import { applySqliteMigrations, openSqliteDatabase } from '../../src/stores/sqlite/database.js';
import { createSqliteInbox } from '../../src/stores/sqlite/inbox.js';
import { createSqliteRunRecords } from '../../src/stores/sqlite/run-records.js';
import { createSqliteSessionRecords } from '../../src/stores/sqlite/session-records.js';

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

  it('refuses an empty path', () => {
    expect(() => openSqliteDatabase({ path: '' })).toThrow(/INVALID_ARGUMENT/);
  });
});

const hint = (id: string, text: string) => ({ id, text, source: 'user-supplement', at: 1 });

describe.each<[string, () => Inbox & { close?: () => void }]>([
  ['memory', () => createMemoryInbox()],
  ['sqlite', () => createSqliteInbox({ path: freshPath() })],
])('Inbox contract: %s', (_name, create) => {
  it('drains hints in push order, once, per owner and session', () => {
    const inbox = create();
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

describe('SQLite session records', () => {
  it('creates, finds by owner only, updates, and refuses a duplicate id', () => {
    const db = openSqliteDatabase({ path: freshPath() });
    const sessions = createSqliteSessionRecords({ database: db });
    const created = sessions.create({ ...a, strategy: 'enqueue', graceMs: 5000, at: 10 });
    expect(created).toEqual({
      ...a,
      mode: 'runs',
      strategy: 'enqueue',
      graceMs: 5000,
      createdAt: 10,
      updatedAt: 10,
    });
    expect(sessions.create({ ...a, strategy: 'reject', graceMs: 1, at: 11 })).toBeUndefined();
    expect(sessions.get('bob', 's1')).toBeUndefined();
    expect(sessions.update('alice', 's1', { strategy: 'preempt' }, 20)).toMatchObject({
      strategy: 'preempt',
      graceMs: 5000,
      updatedAt: 20,
    });
    expect(sessions.update('bob', 's1', { strategy: 'reject' }, 21)).toBeUndefined();
    expect(sessions.get('alice', 's1')?.strategy).toBe('preempt');
    db.close();
  });
});

describe('SQLite session records: loop sessions', () => {
  it('keeps the mode and lists live loop sessions of every owner, oldest first', () => {
    const db = openSqliteDatabase({ path: freshPath() });
    const sessions = createSqliteSessionRecords({ database: db });
    const make = (ownerId: string, sessionId: string, mode: 'runs' | 'loop', at: number) =>
      sessions.create({ ownerId, sessionId, mode, strategy: 'enqueue', graceMs: 1, at });
    expect(make('bob', 'l2', 'loop', 20)?.mode).toBe('loop');
    make('alice', 'r1', 'runs', 5);
    make('alice', 'l1', 'loop', 10);
    make('alice', 'l3', 'loop', 30);
    expect(sessions.get('alice', 'r1')?.mode).toBe('runs');
    sessions.markDeleted('alice', 'l3', 40);
    expect(sessions.listLoops()).toEqual([
      { ownerId: 'alice', sessionId: 'l1' },
      { ownerId: 'bob', sessionId: 'l2' },
    ]);
    db.close();
  });
});

describe('SQLite run records', () => {
  const setup = () => {
    const db = openSqliteDatabase({ path: freshPath() });
    const runs = createSqliteRunRecords({ database: db });
    runs.create({ runId: 'r1', ...a, input: 'hello', at: 1 });
    return { db, runs };
  };

  it('follows status changes; the first terminal status and outcome win', () => {
    const { db, runs } = setup();
    expect(runs.setStatus('r1', 'QUEUED', 2)).toBe(true);
    expect(runs.setStatus('r1', 'RUNNING', 3)).toBe(true);
    expect(runs.setStatus('r1', 'CANCELLED', 4)).toBe(true);
    expect(runs.setStatus('r1', 'FAILED', 5)).toBe(false);
    expect(runs.finish('r1', { status: 'COMPLETED', reason: 'completed' }, 6)).toBe(false);
    expect(runs.finish('r1', { status: 'CANCELLED', cause: 'cancel' }, 7)).toBe(true);
    expect(runs.finish('r1', { status: 'CANCELLED', cause: 'other' }, 8)).toBe(false);
    expect(runs.get('alice', 'r1')).toEqual({
      runId: 'r1',
      ...a,
      status: 'CANCELLED',
      input: 'hello',
      createdAt: 1,
      updatedAt: 7,
      endedAt: 4,
      outcome: { status: 'CANCELLED', cause: 'cancel' },
    });
    db.close();
  });

  it('is owner-checked and lists unfinished runs oldest first', () => {
    const { db, runs } = setup();
    runs.create({ runId: 'r2', ...a, input: 'two', at: 2 });
    runs.create({ runId: 'r3', ...a, input: 'three', at: 3 });
    runs.setStatus('r2', 'RUNNING', 4);
    runs.setStatus('r3', 'COMPLETED', 5);
    expect(runs.get('bob', 'r1')).toBeUndefined();
    expect(runs.listUnfinished().map((r) => [r.runId, r.status])).toEqual([
      ['r1', 'CREATED'],
      ['r2', 'RUNNING'],
    ]);
    db.close();
  });
});
