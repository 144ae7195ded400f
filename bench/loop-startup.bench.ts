/**
 * Loop-session startup (issue 15): what `runplane serve` spends on loop sessions when it starts
 * (`createLoopSessions` and `LoopSessions.resumeAll`, after crash recovery), against how many
 * idle loop sessions the SQLite file holds. Each idle session has three answered messages in its
 * log (`user.message`, its turn's `session.run_started` with the item ids, `run.completed`).
 * Real SQLite file; prints JSON. Run with `npx tsx bench/loop-startup.bench.ts [sessions]
 * [rounds]`. Never part of `npm test`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createRuntime, type Agent } from '../src/index.js';
import { createLoopSessions } from '../src/server/loop-sessions.js';
import {
  createSqliteCheckpointStore,
  createSqliteEventLog,
  createSqliteRunRecords,
  createSqliteSessionRecords,
  openSqliteDatabase,
} from '../src/stores/sqlite/index.js';

const unusedAgent: Agent<never, unknown> = { execute: () => Promise.resolve('unused') };

/** Writes `sessions` idle loop sessions into a fresh SQLite file; returns its path. */
function populate(dir: string, sessions: number): string {
  const path = join(dir, `startup-${sessions}.db`);
  const db = openSqliteDatabase({ path });
  const records = createSqliteSessionRecords({ database: db });
  const eventLog = createSqliteEventLog({ database: db });
  db.transaction(() => {
    for (let s = 0; s < sessions; s++) {
      const key = { ownerId: `owner-${s % 10}`, sessionId: `loop-${s}` };
      records.create({ ...key, mode: 'loop', strategy: 'enqueue', graceMs: 5_000, at: s });
      for (let m = 0; m < 3; m++) {
        const itemId = `item_${s}_${m}`;
        const runId = `run_${s}_${m}`;
        eventLog.append({}, key, {
          type: 'user.message',
          payload: { item_id: itemId, text: `message ${m}`, preempt: false },
          at: s,
        });
        eventLog.append({}, key, {
          runId,
          type: 'session.run_started',
          payload: { item_ids: [itemId] },
          at: s,
        });
        eventLog.append({}, key, { runId, type: 'run.completed', payload: {}, at: s });
      }
    }
  })();
  db.close();
  return path;
}

/** Opens the file as `serve` does and times the loop sessions' part of the start. */
async function timeStart(path: string) {
  const db = openSqliteDatabase({ path });
  const eventLog = createSqliteEventLog({ database: db });
  const sessions = createSqliteSessionRecords({ database: db });
  const runs = createSqliteRunRecords({ database: db });
  const store = createSqliteCheckpointStore({ filename: path });
  const runtime = createRuntime({ stores: { eventLog } });
  const t0 = performance.now();
  const loopSessions = createLoopSessions({
    runtime,
    agent: unusedAgent,
    runs,
    sessions,
    store,
    reportError: (error) => {
      throw error as Error;
    },
  });
  const resumed = await loopSessions.resumeAll();
  const ms = performance.now() - t0;
  await loopSessions.stopAll({ graceMs: 0 });
  await runtime.shutdown({ graceMs: 0 });
  store.close();
  db.close();
  return { ms, resumed };
}

export async function loopStartup(sessions: number, rounds: number) {
  const dir = mkdtempSync(join(tmpdir(), 'runplane-startup-'));
  try {
    const path = populate(dir, sessions);
    const times: number[] = [];
    let resumed = 0;
    for (let r = 0; r < rounds; r++) {
      const round = await timeStart(path);
      times.push(round.ms);
      resumed = round.resumed;
    }
    times.sort((a, b) => a - b);
    return {
      idleLoopSessions: sessions,
      resumed,
      sortedMs: times.map((ms) => +ms.toFixed(2)),
      medianMs: +(times[Math.floor(times.length / 2)] ?? Number.NaN).toFixed(2),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [sessions = 1_000, rounds = 5] = process.argv.slice(2).map(Number);
  console.log(JSON.stringify(await loopStartup(sessions, rounds), null, 2));
}
