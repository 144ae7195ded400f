/**
 * One contract suite for every CheckpointStore implementation (docs/architecture.md, "Checkpoints and stores", §14): memory,
 * SQLite on a real file in a temporary directory, and the cluster's store on a real private Redis.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryCheckpointStore, type CheckpointStore } from '../../src/index.js';
import { createSqliteCheckpointStore } from '../../src/stores/sqlite/index.js';
import { createRedisCheckpointStore } from '../../src/cluster/redis-checkpoint-store.js';
import { useCluster } from '../cluster/cluster-helpers.js';
import { skipRedis } from '../redis/redis-server.js';

interface Harness {
  store: CheckpointStore;
  /** A second handle on the same data (a new connection for SQLite), if the backend has one. */
  reopen?: () => CheckpointStore;
  dispose(): void;
}

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (data: Uint8Array | undefined) =>
  data === undefined ? undefined : new TextDecoder().decode(data);

const implementations: Array<[string, () => Harness, { shared: boolean }]> = [
  [
    'memory',
    () => ({ store: createMemoryCheckpointStore(), dispose: () => undefined }),
    { shared: false },
  ],
  [
    'sqlite',
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'runplane-store-'));
      const filename = join(dir, 'checkpoints.db');
      const opened = [createSqliteCheckpointStore({ filename })];
      return {
        store: opened[0]!,
        reopen: () => {
          const next = createSqliteCheckpointStore({ filename });
          opened.push(next);
          return next;
        },
        dispose: () => {
          for (const store of opened) store.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
    { shared: true },
  ],
];

/** The contract, against the harnesses `make` gives (one per test). */
function describeCheckpointContract(make: () => Harness, traits: { shared: boolean }): void {
  let harness: Harness | undefined;
  const open = () => (harness = make());
  afterEach(() => {
    harness?.dispose();
    harness = undefined;
  });

  it('get of a missing id is undefined', async () => {
    const { store } = open();
    expect(await store.get({}, 'nope')).toBeUndefined();
  });

  it('set then get returns the same bytes', async () => {
    const { store } = open();
    const data = new Uint8Array([0, 1, 2, 255, 128, 7]);
    await store.set({}, 'c1', data);
    expect(await store.get({}, 'c1')).toEqual(data);
  });

  it('set replaces the previous checkpoint', async () => {
    const { store } = open();
    await store.set({}, 'c1', bytes('first'));
    await store.set({}, 'c1', bytes('second, longer'));
    expect(text(await store.get({}, 'c1'))).toBe('second, longer');
  });

  it('ids are independent', async () => {
    const { store } = open();
    await store.set({}, 'a', bytes('A'));
    await store.set({}, 'b', bytes('B'));
    expect(await store.delete({}, 'a')).toBe(true);
    expect(await store.get({}, 'a')).toBeUndefined();
    expect(text(await store.get({}, 'b'))).toBe('B');
  });

  it('delete reports whether a checkpoint was there', async () => {
    const { store } = open();
    expect(await store.delete({}, 'c1')).toBe(false);
    await store.set({}, 'c1', bytes('x'));
    expect(await store.delete({}, 'c1')).toBe(true);
    expect(await store.get({}, 'c1')).toBeUndefined();
    expect(await store.delete({}, 'c1')).toBe(false);
  });

  it('neither the caller nor the store can change the other side’s bytes', async () => {
    const { store } = open();
    const data = bytes('abc');
    await store.set({}, 'c1', data);
    data[0] = 120;
    const read = await store.get({}, 'c1');
    expect(text(read)).toBe('abc');
    read![1] = 120;
    expect(text(await store.get({}, 'c1'))).toBe('abc');
  });

  it('an aborted signal rejects every method with its reason and changes nothing', async () => {
    const { store } = open();
    await store.set({}, 'c1', bytes('kept'));
    const controller = new AbortController();
    const reason = new Error('gave up');
    controller.abort(reason);
    const ctx = { signal: controller.signal };
    await expect(store.get(ctx, 'c1')).rejects.toBe(reason);
    await expect(store.set(ctx, 'c1', bytes('lost'))).rejects.toBe(reason);
    await expect(store.delete(ctx, 'c1')).rejects.toBe(reason);
    expect(text(await store.get({}, 'c1'))).toBe('kept');
  });

  it('a large checkpoint round-trips', async () => {
    const { store } = open();
    const data = new Uint8Array(2 * 1024 * 1024);
    for (let i = 0; i < data.length; i++) data[i] = i % 251;
    await store.set({}, 'big', data);
    const read = await store.get({}, 'big');
    expect(read?.length).toBe(data.length);
    expect(Buffer.compare(Buffer.from(read!), Buffer.from(data))).toBe(0);
  });

  describe('incremental: append and load', () => {
    const incremental = (store: CheckpointStore) => {
      if (store.append === undefined || store.load === undefined)
        throw new Error('not incremental');
      return {
        append: (ctx: { signal?: AbortSignal }, id: string, patch: Uint8Array) =>
          store.append!(ctx, id, patch),
        load: async (id: string) => {
          const record = await store.load!({}, id);
          return record && { base: text(record.base), patches: record.patches.map(text) };
        },
      };
    };

    it('load gives the base and the patches in append order; get gives the base alone', async () => {
      const { store } = open();
      const inc = incremental(store);
      expect(await inc.load('c1')).toBeUndefined();
      await store.set({}, 'c1', bytes('base'));
      await inc.append({}, 'c1', bytes('p1'));
      await inc.append({}, 'c1', bytes('p2'));
      expect(await inc.load('c1')).toEqual({ base: 'base', patches: ['p1', 'p2'] });
      expect(text(await store.get({}, 'c1'))).toBe('base');
    });

    it('set starts a new chain; delete removes base and patches; ids are independent', async () => {
      const { store } = open();
      const inc = incremental(store);
      await store.set({}, 'a', bytes('a0'));
      await store.set({}, 'b', bytes('b0'));
      await inc.append({}, 'a', bytes('a1'));
      await inc.append({}, 'b', bytes('b1'));
      await store.set({}, 'a', bytes('a-compacted'));
      expect(await inc.load('a')).toEqual({ base: 'a-compacted', patches: [] });
      expect(await inc.load('b')).toEqual({ base: 'b0', patches: ['b1'] });
      expect(await store.delete({}, 'b')).toBe(true);
      expect(await inc.load('b')).toBeUndefined();
      await store.set({}, 'b', bytes('b-new'));
      expect(await inc.load('b')).toEqual({ base: 'b-new', patches: [] });
    });

    it('append to a missing checkpoint rejects and stores nothing', async () => {
      const { store } = open();
      const inc = incremental(store);
      await expect(inc.append({}, 'nope', bytes('p'))).rejects.toThrow(/no checkpoint nope/);
      await store.set({}, 'nope', bytes('base'));
      expect(await inc.load('nope')).toEqual({ base: 'base', patches: [] });
    });

    it('an aborted signal rejects append and load; the caller cannot change stored patches', async () => {
      const { store } = open();
      const inc = incremental(store);
      await store.set({}, 'c1', bytes('base'));
      const patch = bytes('p1');
      await inc.append({}, 'c1', patch);
      patch[0] = 120;
      const controller = new AbortController();
      controller.abort(new Error('gave up'));
      await expect(inc.append({ signal: controller.signal }, 'c1', bytes('lost'))).rejects.toThrow(
        'gave up',
      );
      await expect(store.load!({ signal: controller.signal }, 'c1')).rejects.toThrow('gave up');
      expect(await inc.load('c1')).toEqual({ base: 'base', patches: ['p1'] });
    });

    it.runIf(traits.shared)(
      'patches appended through one handle are loaded through another',
      async () => {
        const h = open();
        await h.store.set({}, 'c1', bytes('base'));
        await incremental(h.store).append({}, 'c1', bytes('p1'));
        const other = incremental(h.reopen!());
        expect(await other.load('c1')).toEqual({ base: 'base', patches: ['p1'] });
      },
    );
  });

  // Only for backends with several handles on one store (memory has one handle only).
  it.runIf(traits.shared)(
    'what is set is seen through another handle on the same store',
    async () => {
      const h = open();
      await h.store.set({}, 'c1', bytes('shared'));
      const other = h.reopen!();
      expect(text(await other.get({}, 'c1'))).toBe('shared');
      await other.delete({}, 'c1');
      expect(await h.store.get({}, 'c1')).toBeUndefined();
    },
  );
}

describe.each(implementations)('CheckpointStore contract: %s', (_name, make, traits) =>
  describeCheckpointContract(make, traits),
);

describe.skipIf(skipRedis)('CheckpointStore contract: redis', () => {
  const cluster = useCluster();
  describeCheckpointContract(
    () => {
      const keyPrefix = cluster.freshPrefix();
      const open = () => createRedisCheckpointStore({ redis: cluster.connect(), keyPrefix });
      return { store: open(), reopen: open, dispose: () => undefined };
    },
    { shared: true },
  );
});

describe('SQLite checkpoint store specifics', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('keeps checkpoints in a real file in WAL mode, across close and reopen', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runplane-store-'));
    const filename = join(dir, 'cp.db');
    const store = createSqliteCheckpointStore({ filename });
    await store.set({}, 'c1', bytes('durable'));
    expect(existsSync(filename)).toBe(true);
    store.close();
    store.close(); // idempotent
    await expect(store.get({}, 'c1')).rejects.toThrow();

    const raw = new Database(filename, { readonly: true });
    expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
    raw.close();

    const again = createSqliteCheckpointStore({ filename, table: 'runplane_checkpoints' });
    expect(text(await again.get({}, 'c1'))).toBe('durable');
    again.close();
  });

  it('refuses :memory:, a bad table name and a bad pragma value with INVALID_ARGUMENT', () => {
    expect(() => createSqliteCheckpointStore({ filename: ':memory:' })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'filename' }),
    );
    expect(() =>
      createSqliteCheckpointStore({ filename: 'x.db', table: 'cp; DROP TABLE users' }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'table' }));
    expect(() =>
      createSqliteCheckpointStore({ filename: 'x.db', synchronous: 'OFF' as 'FULL' }),
    ).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'synchronous' }));
    expect(existsSync('x.db')).toBe(false);
  });
});
