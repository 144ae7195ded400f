/**
 * The record-store contract suites (run records, session records, idempotency keys) against
 * every backend: memory where there is one, SQLite on a real file, and the cluster's stores on
 * a real private Redis (skipped, with a notice, where `redis-server` is missing).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe } from 'vitest';
import { createMemoryIdempotencyKeys } from '../../src/stores/idempotency-keys.js';
import { openSqliteDatabase } from '../../src/stores/sqlite/database.js';
import { createSqliteIdempotencyKeys } from '../../src/stores/sqlite/idempotency-keys.js';
import { createSqliteRunRecords } from '../../src/stores/sqlite/run-records.js';
import { createSqliteSessionRecords } from '../../src/stores/sqlite/session-records.js';
import { useCluster } from '../cluster/cluster-helpers.js';
import {
  redisIdempotencyKeysHarness,
  redisRunRecordsHarness,
  redisSessionRecordsHarness,
} from '../cluster/record-harnesses.js';
import { skipRedis } from '../redis/redis-server.js';
import { describeIdempotencyKeysContract } from './idempotency-keys.contract.js';
import type { Awaitable, StoreHarness } from './record-store-contract.js';
import { describeRunRecordsContract } from './run-records.contract.js';
import { describeSessionRecordsContract } from './session-records.contract.js';

const dir = mkdtempSync(join(tmpdir(), 'runplane-records-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** A store on a fresh SQLite file, closed with the harness. */
const sqlite =
  <T>(create: (options: { database: ReturnType<typeof openSqliteDatabase> }) => T) =>
  (): Promise<StoreHarness<T>> => {
    const database = openSqliteDatabase({ path: join(dir, `db-${++files}.db`) });
    // A synchronous store is its own awaitable view (each result is a value, not a promise).
    const store = create({ database }) as Awaitable<T>;
    return Promise.resolve({ store, dispose: () => void database.close() });
  };

describeRunRecordsContract('sqlite', sqlite(createSqliteRunRecords));
describeSessionRecordsContract('sqlite', sqlite(createSqliteSessionRecords));
describeIdempotencyKeysContract('memory', () =>
  Promise.resolve({ store: createMemoryIdempotencyKeys(), dispose: () => undefined }),
);
describeIdempotencyKeysContract('sqlite', sqlite(createSqliteIdempotencyKeys));

describe.skipIf(skipRedis)('on Redis', () => {
  const cluster = useCluster();
  describeRunRecordsContract('redis', redisRunRecordsHarness(cluster));
  describeSessionRecordsContract('redis', redisSessionRecordsHarness(cluster));
  describeIdempotencyKeysContract('redis', redisIdempotencyKeysHarness(cluster));
});
