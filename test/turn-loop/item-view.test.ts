/**
 * Item views (issue 15, "patch save O(change)"): a save after pushes finds the new items without
 * reading the ones held, and whatever the loop did to its arrays the view's diff is exact.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createMemoryCheckpointStore, jsonCheckpointCodec } from '../../src/index.js';
import { createSqliteCheckpointStore } from '../../src/stores/sqlite/index.js';
import {
  createCheckpointKeeper,
  type CheckpointDraft,
} from '../../src/turn-loop/checkpoint-keeper.js';
import {
  appendedSince,
  flattenView,
  viewOf,
  type ItemView,
} from '../../src/turn-loop/item-view.js';

const draft = (unhandled: ItemView, savedAt: number): CheckpointDraft => ({
  format: 'runplane.checkpoint',
  version: 1,
  kind: 'between-turns',
  loop: { status: 'active', value: {}, context: { turnSeq: 1 } },
  unhandled,
  interrupted: [],
  savedAt,
});

/** An array that counts reads of the items below `watchedBelow`. */
function watchedArray(items: unknown[]) {
  const reads = { below: 0, watchedBelow: 0 };
  const proxy = new Proxy(items, {
    get(target, key, receiver) {
      if (typeof key === 'string' && /^\d+$/.test(key) && Number(key) < reads.watchedBelow) {
        reads.below++;
      }
      return Reflect.get(target, key, receiver) as unknown;
    },
  });
  return { proxy, reads };
}

describe('item views', () => {
  it('appendedSince is exactly the items added when the parts only grew, else undefined', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 4 }),
        fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 4 }),
        fc.integer({ min: 0, max: 3 }),
        (sizes, growth, change) => {
          let seq = 0;
          const arrays = sizes.map((n) => Array.from({ length: n }, () => seq++));
          const before = viewOf(arrays);
          const flatBefore = flattenView(before);
          // change 0: the last array grows; 1: new arrays after it; 2: a middle array is
          // replaced; 3: the last array is replaced (a turn took its front, a push came).
          const after = [...arrays];
          if (change === 0 && after.length > 0) after.at(-1)!.push(...growth.map(() => seq++));
          if (change === 1) after.push(...growth.map(() => [seq++]));
          if (change === 2 && after.length > 1) after[0] = [...after[0]!, seq++];
          if (change === 3 && after.length > 0) {
            after[after.length - 1] = [...after.at(-1)!.slice(1), seq++, seq++];
          }
          const view = viewOf(after);
          const appended = appendedSince(before, view);
          const flatAfter = flattenView(view);
          const grewOnly =
            flatAfter.length >= flatBefore.length &&
            flatBefore.every((item, i) => flatAfter[i] === item);
          if (appended !== undefined) {
            expect(grewOnly).toBe(true);
            expect([...flatBefore, ...appended]).toEqual(flatAfter);
          }
          // Growing in place or adding arrays after is always found.
          if (change <= 1) expect(appended).toBeDefined();
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a patch save after pushes reads none of the items held before (O(pushes))', async () => {
    const store = createMemoryCheckpointStore();
    const keeper = createCheckpointKeeper({
      store,
      checkpointId: 'cp',
      codec: jsonCheckpointCodec,
      incremental: true,
      compactAfterPatches: 32,
    });
    const items = Array.from({ length: 5_000 }, (_, i) => `item-${i}`);
    const { proxy, reads } = watchedArray(items);
    const requeued = ['requeued'];
    await keeper.save(draft(viewOf([requeued, proxy]), 1));
    reads.watchedBelow = 5_000;
    reads.below = 0;
    items.push('pushed-1', 'pushed-2');
    await keeper.save(draft(viewOf([requeued, proxy]), 2));
    expect(reads.below).toBe(0);
    expect((await store.load!({}, 'cp'))?.patches).toHaveLength(1);

    // A turn took the front (a new buffer): the lists are aligned item by item, and the chain
    // still replays to exactly the items held.
    const remaining = items.slice(10);
    await keeper.save(draft(viewOf([remaining]), 3));
    expect((await store.load!({}, 'cp'))?.patches).toHaveLength(2);
    const loaded = await createCheckpointKeeper({
      store,
      checkpointId: 'cp',
      codec: jsonCheckpointCodec,
      incremental: true,
      compactAfterPatches: 32,
    }).load();
    expect(loaded?.unhandled).toEqual(remaining);
  });

  it('the SQLite store finds a base through its ids index, also in a file made before it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'runplane-ids-'));
    try {
      const filename = join(dir, 'cp.db');
      const old = new Database(filename);
      old.exec(
        `CREATE TABLE runplane_checkpoints (id TEXT PRIMARY KEY, data BLOB NOT NULL,
           updated_at INTEGER NOT NULL) WITHOUT ROWID`,
      );
      old.close();
      createSqliteCheckpointStore({ filename }).close();
      const db = new Database(filename, { readonly: true });
      const indexes = db
        .prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?`)
        .all('runplane_checkpoints');
      db.close();
      expect(indexes).toContainEqual({ name: 'runplane_checkpoints_ids' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
