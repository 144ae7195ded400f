/**
 * Lazy loop-session startup (issue 15): on start only the loop sessions that may owe an answer
 * (`loop_owes`) are read and rebuilt; a settled session's loop is built on its next message, and
 * a loop that settles unmarks its session. Real SQLite file, simulated clock; every wait is for
 * an agent call, never for time.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SimulatedClock } from 'xstate';
import { afterEach, describe, expect, it } from 'vitest';
import { createRuntime, type Agent } from '../../src/index.js';
import type { SessionKey } from '../../src/events/event-log.js';
import { createLoopSessions } from '../../src/server/loop-sessions.js';
import {
  createSqliteCheckpointStore,
  createSqliteEventLog,
  createSqliteRunRecords,
  createSqliteSessionRecords,
  openSqliteDatabase,
} from '../../src/stores/sqlite/index.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const settled: SessionKey = { ownerId: 'alice', sessionId: 'settled' };
const owing: SessionKey = { ownerId: 'alice', sessionId: 'owing' };
const later: SessionKey = { ownerId: 'bob', sessionId: 'later' };

/**
 * A file as a stopped service leaves it: `settled` answered its message and was unmarked;
 * `owing` and `later` each logged a message no turn took (their process died).
 */
function writeFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'runplane-loop-startup-'));
  dirs.push(dir);
  const path = join(dir, 'service.db');
  const db = openSqliteDatabase({ path });
  const sessions = createSqliteSessionRecords({ database: db });
  const eventLog = createSqliteEventLog({ database: db });
  for (const [n, key] of [settled, owing, later].entries()) {
    sessions.create({ ...key, mode: 'loop', strategy: 'enqueue', graceMs: 1_000, at: n });
    const itemId = `item_${key.sessionId}`;
    if (key !== settled) sessions.markLoopOwes(key.ownerId, key.sessionId, true);
    eventLog.append({}, key, {
      type: 'user.message',
      payload: { item_id: itemId, text: `old ${key.sessionId}`, preempt: false },
      at: n,
    });
    if (key !== settled) continue;
    eventLog.append({}, key, {
      runId: 'r1',
      type: 'session.run_started',
      payload: { item_ids: [itemId] },
      at: n,
    });
    eventLog.append({}, key, { runId: 'r1', type: 'run.completed', payload: {}, at: n });
  }
  db.close();
  return path;
}

/** The service's loop sessions on `path`; its agent records each turn's input and answers. */
function open(path: string) {
  const db = openSqliteDatabase({ path });
  const sqliteLog = createSqliteEventLog({ database: db });
  const read: string[] = [];
  const eventLog: typeof sqliteLog = Object.create(sqliteLog, {
    read: {
      value: (...args: Parameters<typeof sqliteLog.read>) => {
        read.push(args[1].sessionId);
        return sqliteLog.read(...args);
      },
    },
  }) as typeof sqliteLog;
  const sessions = createSqliteSessionRecords({ database: db });
  const store = createSqliteCheckpointStore({ filename: path });
  const clock = new SimulatedClock();
  const runtime = createRuntime({ clock, stores: { eventLog } });
  const inputs: unknown[] = [];
  let wake: (() => void) | undefined;
  const agent: Agent<never, unknown> = {
    execute: (input) => {
      inputs.push(input);
      wake?.();
      return Promise.resolve({ reply: 'ok' });
    },
  };
  const loops = createLoopSessions({
    runtime,
    agent,
    runs: createSqliteRunRecords({ database: db }),
    sessions,
    store,
    idleMs: 1_000,
    reportError: (error) => {
      throw error as Error;
    },
  });
  const turns = async (n: number) => {
    while (inputs.length < n) await new Promise<void>((resolve) => (wake = resolve));
  };
  const close = async () => {
    await loops.stopAll({ graceMs: 0 });
    await runtime.shutdown({ graceMs: 0 });
    store.close();
    db.close();
  };
  return { loops, sessions, read, inputs, turns, clock, close };
}

const owingKeys = (sessions: ReturnType<typeof open>['sessions']) =>
  sessions.listLoops({ owing: true }).map((key) => key.sessionId);

describe('loop sessions: lazy startup', () => {
  it('a new session owes nothing; a message marks it; only marked sessions are listed as owing', () => {
    const s = open(writeFile());
    expect(owingKeys(s.sessions)).toEqual(['owing', 'later']);
    expect(s.sessions.listLoops().map((key) => key.sessionId)).toEqual([
      'settled',
      'owing',
      'later',
    ]);
    return s.close();
  });

  it('on start only sessions that may owe are read and rebuilt; a settled one is built on its next message', async () => {
    const s = open(writeFile());
    expect(await s.loops.resumeAll()).toBe(2);
    expect(s.read.sort()).toEqual(['later', 'owing']);
    await s.turns(2);
    expect(s.inputs.sort()).toEqual(['old later', 'old owing']);
    // The settled session: its loop is built by its next message, without reading its log,
    // and its answered message is never offered again.
    s.loops.push(settled, { text: 'new settled', preempt: false, graceMs: 1_000 });
    await s.turns(3);
    expect(s.inputs[2]).toBe('new settled');
    expect(s.read.sort()).toEqual(['later', 'owing']);
    await s.close();
  });

  it('a message to a session that may owe, before its rebuild, rebuilds it first: one turn, in send order', async () => {
    const s = open(writeFile());
    s.loops.push(later, { text: 'new later', preempt: false, graceMs: 1_000 });
    await s.turns(1);
    expect(s.inputs).toEqual(['old later\n\nnew later']);
    // resumeAll finds it rebuilt and rebuilds only the other.
    expect(await s.loops.resumeAll()).toBe(1);
    await s.turns(2);
    expect(s.inputs[1]).toBe('old owing');
    expect(s.read.filter((id) => id === 'later')).toHaveLength(1);
    await s.close();
  });

  it('a loop that settles (idle, nothing left) unmarks its session: the next start does not read it', async () => {
    const path = writeFile();
    const s = open(path);
    await s.loops.resumeAll();
    await s.turns(2);
    expect(owingKeys(s.sessions)).toEqual(['owing', 'later']);
    // Once their turns have settled, both loops are idle for idleMs and stop with nothing left.
    for (let i = 0; i < 50 && s.loops.size > 0; i++) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      s.clock.increment(1_000);
    }
    expect(s.loops.size).toBe(0);
    expect(owingKeys(s.sessions)).toEqual([]);
    await s.close();
    const next = open(path);
    expect(await next.loops.resumeAll()).toBe(0);
    expect(next.read).toEqual([]);
    await next.close();
  });
});
