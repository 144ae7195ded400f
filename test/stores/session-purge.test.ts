/**
 * The session purge contract (`session-purge.contract.ts`) against SQLite on a real file and
 * against the cluster's purge on a real private Redis.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe } from 'vitest';
import { openSqliteDatabase } from '../../src/stores/sqlite/database.js';
import { createSqliteEventLog } from '../../src/stores/sqlite/event-log.js';
import { createSqliteInbox } from '../../src/stores/sqlite/inbox.js';
import { createSqliteIdempotencyKeys } from '../../src/stores/sqlite/idempotency-keys.js';
import { createSqliteRunRecords } from '../../src/stores/sqlite/run-records.js';
import { createSqliteSessionPurge } from '../../src/stores/sqlite/session-purge.js';
import { createSqliteSessionRecords } from '../../src/stores/sqlite/session-records.js';
import { createSqliteSessionStore } from '../../src/stores/sqlite/session-store.js';
import { useCluster } from '../cluster/cluster-helpers.js';
import { redisPurgeHarness } from '../cluster/purge-harness.js';
import { skipRedis } from '../redis/redis-server.js';
import { sessionPurgeContract } from './session-purge.contract.js';

const dir = mkdtempSync(join(tmpdir(), 'runplane-purge-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

sessionPurgeContract('SQLite', async () => {
  const database = openSqliteDatabase({ path: join(dir, `purge-${++files}.db`) });
  const eventLog = createSqliteEventLog({ database });
  createSqliteInbox({ database });
  createSqliteIdempotencyKeys({ database });
  const tables = [
    'runplane_events',
    'runplane_session_messages',
    'runplane_inbox',
    'runplane_runs',
    'runplane_idempotency_keys',
    'runplane_event_seqs',
    'runplane_sessions',
  ];
  // The purge's tables first, then the purge.
  const sessions = createSqliteSessionRecords({ database });
  const runs = createSqliteRunRecords({ database });
  const sessionStore = createSqliteSessionStore({ database });
  return {
    purge: createSqliteSessionPurge({ database, onPurged: (key) => eventLog.forget(key) }),
    eventLog,
    sessions,
    runs,
    sessionStore,
    hold: async () => undefined,
    settle: async () => undefined,
    async left({ ownerId, sessionId }) {
      let n = 0;
      for (const table of tables) {
        const row = database
          .prepare(`SELECT COUNT(*) AS n FROM ${table} WHERE owner_id = ? AND session_id = ?`)
          .get(ownerId, sessionId) as { n: number };
        n += row.n;
      }
      return n;
    },
    async close() {
      eventLog.close();
      database.close();
    },
  };
});

describe.skipIf(skipRedis)('on Redis', () => {
  const cluster = useCluster();
  sessionPurgeContract('Redis', redisPurgeHarness(cluster));
});
