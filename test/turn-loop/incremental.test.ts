/**
 * Incremental checkpoints (issue 15 item 5): items frozen at push, `loop.checkpoint()` of a
 * live loop, saves after the first as immer patches on the base (memory and SQLite), compaction
 * after a bound, whole saves for a store without `append`, and a corrupt patch on load.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CheckpointCorruptError,
  createMemoryCheckpointStore,
  type CheckpointStore,
  type GenResumeArgs,
} from '../../src/index.js';
import { createSqliteCheckpointStore } from '../../src/stores/sqlite/index.js';
import { createTestLoop, decodeStored, until } from './helpers.js';

const decoder = new TextDecoder();
const patchesOf = async (store: CheckpointStore, id = 'cp') =>
  ((await store.load!({}, id))?.patches ?? []).map(
    (patch) => JSON.parse(decoder.decode(patch)) as { patches: Array<{ path: unknown[] }> },
  );

/** A loop on `store` whose first turn runs (holding item `first`) until the test says. */
async function busyLoop(store: CheckpointStore, overrides = {}) {
  const made = createTestLoop({ store, checkpointId: 'cp', ...overrides });
  made.loop.push('first');
  made.loop.run();
  await until(() => made.stepped.executions.length === 1, 'the first turn runs');
  return made;
}

describe('TurnLoop incremental checkpoints', () => {
  let dir: string | undefined;
  afterEach(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('an item is frozen at push: mutating it afterwards cannot change what is checkpointed', async () => {
    const store = createMemoryCheckpointStore();
    const { loop, runtime } = await busyLoop(store);
    const item = { text: 'original', tags: ['a'] } as unknown as string;
    loop.push(item);
    const mutable = item as unknown as { text: string; tags: string[] };
    expect(() => (mutable.text = 'changed')).toThrow(TypeError);
    expect(() => mutable.tags.push('b')).toThrow(TypeError);
    loop.stop({ mode: 'immediate' });
    await loop.wait();
    expect(decodeStored(await store.get({}, 'cp')).unhandled).toEqual([
      { text: 'original', tags: ['a'] },
    ]);
    await runtime.shutdown({ graceMs: 0 });
  });

  it('checkpoint() of a live loop, then a push: the second save is one small patch; SQLite replays it', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runplane-incremental-'));
    const filename = join(dir, 'cp.db');
    const store = createSqliteCheckpointStore({ filename });
    const { loop, stepped, runtime } = await busyLoop(store);
    for (let i = 0; i < 1_200; i++) loop.push(`item-${i}`);
    stepped.last().safePoint('afterToolCalls', { step: 1 });
    expect(await loop.checkpoint()).toBe(true);
    expect(await patchesOf(store)).toEqual([]);
    loop.push('one more');
    expect(await loop.checkpoint()).toBe(true);
    const [record, ...rest] = await patchesOf(store);
    expect(rest).toEqual([]);
    const itemPatches = record!.patches.filter((p) => p.path[0] === 'unhandled');
    expect(itemPatches).toEqual([
      { op: 'add', path: ['unhandled', 'chunks', '2', 176], value: 'one more' },
    ]);

    // A crash now: a new loop on a new handle resumes the running turn from the chain.
    const resumed: Array<GenResumeArgs<string>> = [];
    const other = createSqliteCheckpointStore({ filename });
    const second = createTestLoop({
      store: other,
      checkpointId: 'cp',
      genResume: (args) => {
        resumed.push(args);
        return { input: 'resume', consumed: args.interrupted, remaining: [...args.unhandled] };
      },
    });
    second.loop.run();
    await until(() => resumed.length === 1, 'genResume');
    expect(resumed[0]!.interrupted).toEqual(['first']);
    expect(resumed[0]!.agentState).toEqual({ step: 1 });
    expect(resumed[0]!.unhandled).toEqual([
      ...Array.from({ length: 1_200 }, (_, i) => `item-${i}`),
      'one more',
    ]);
    second.loop.stop({ mode: 'immediate', skipCheckpoint: true });
    await second.loop.wait();
    loop.stop({ mode: 'immediate', skipCheckpoint: true });
    await loop.wait();
    store.close();
    other.close();
    await runtime.shutdown({ graceMs: 0 });
    await second.runtime.shutdown({ graceMs: 0 });
  });

  it('the chain is compacted into a whole save after compactAfterPatches records; the exit save continues it', async () => {
    const store = createMemoryCheckpointStore();
    const { loop, runtime } = await busyLoop(store, { compactAfterPatches: 2 });
    for (let i = 0; i < 100; i++) loop.push(`a longer item, number ${i}, to outweigh a patch`);
    const counts: number[] = [];
    for (let i = 0; i < 4; i++) {
      loop.push(`p${i}`);
      await loop.checkpoint();
      counts.push((await patchesOf(store)).length);
    }
    expect(counts).toEqual([0, 1, 2, 0]);
    loop.push('last');
    loop.stop({ mode: 'immediate' });
    const exit = await loop.wait();
    expect(exit.checkpointError).toBeUndefined();
    expect(await patchesOf(store)).toHaveLength(1);
    await runtime.shutdown({ graceMs: 0 });
  });

  it('a store without append and load gets whole saves', async () => {
    const inner = createMemoryCheckpointStore();
    const sets: number[] = [];
    const store: CheckpointStore = {
      get: (ctx, id) => inner.get(ctx, id),
      set: (ctx, id, data) => {
        sets.push(data.length);
        return inner.set(ctx, id, data);
      },
      delete: (ctx, id) => inner.delete(ctx, id),
    };
    const { loop, runtime } = await busyLoop(store);
    loop.push('a');
    await loop.checkpoint();
    loop.push('b');
    await loop.checkpoint();
    expect(sets).toHaveLength(2);
    expect(decodeStored(await inner.get({}, 'cp')).unhandled).toEqual(['a', 'b']);
    loop.stop({ mode: 'immediate', skipCheckpoint: true });
    await loop.wait();
    await runtime.shutdown({ graceMs: 0 });
  });

  it('a live checkpoint is deleted once the turn it interrupted has finished', async () => {
    const store = createMemoryCheckpointStore();
    const { loop, stepped, runtime } = await busyLoop(store);
    expect(await loop.checkpoint()).toBe(true);
    expect(decodeStored(await store.get({}, 'cp')).interrupted).toEqual(['first']);
    loop.push('second');
    stepped.last().finish();
    // The next turn starts only after the used checkpoint was deleted.
    await until(() => stepped.executions.length === 2, 'the next turn runs');
    expect(await store.get({}, 'cp')).toBeUndefined();
    loop.stop({ mode: 'immediate', skipCheckpoint: true });
    await loop.wait();
    await runtime.shutdown({ graceMs: 0 });
  });

  it('checkpoint() answers false with no store, before run() and after the exit', async () => {
    const bare = createTestLoop();
    expect(await bare.loop.checkpoint()).toBe(false);
    const store = createMemoryCheckpointStore();
    const { loop, runtime } = createTestLoop({ store, checkpointId: 'cp' });
    expect(await loop.checkpoint()).toBe(false);
    loop.stop();
    await loop.wait();
    expect(await loop.checkpoint()).toBe(false);
    expect(await store.get({}, 'cp')).toBeUndefined();
    await runtime.shutdown({ graceMs: 0 });
    await bare.runtime.shutdown({ graceMs: 0 });
  });

  it.each([
    ['a truncated patch', (good: Uint8Array) => good.slice(0, good.length - 7)],
    ['bytes that are not UTF-8', () => new Uint8Array([0xff, 0xfe, 0x00])],
    ['a record of the wrong shape', () => new TextEncoder().encode('{"format":"nope"}')],
    [
      'a patch that does not fit the image',
      () =>
        new TextEncoder().encode(
          JSON.stringify({
            format: 'runplane.checkpoint-patch',
            version: 1,
            patches: [{ op: 'add', path: ['unhandled', 'chunks', '0', 'x', 'y', 1], value: 1 }],
          }),
        ),
    ],
    [
      'a patch that breaks the envelope',
      () =>
        new TextEncoder().encode(
          JSON.stringify({
            format: 'runplane.checkpoint-patch',
            version: 1,
            patches: [{ op: 'replace', path: ['kind'], value: 'sideways' }],
          }),
        ),
    ],
  ])('%s on load is CHECKPOINT_CORRUPT, and the checkpoint stays', async (_name, corrupt) => {
    const store = createMemoryCheckpointStore();
    const { loop, runtime } = await busyLoop(store);
    for (let i = 0; i < 50; i++) loop.push(`item ${i} with a little text`);
    await loop.checkpoint();
    loop.push('x');
    await loop.checkpoint();
    const stored = (await store.load!({}, 'cp'))!;
    expect(stored.patches).toHaveLength(1);
    loop.stop({ mode: 'immediate', skipCheckpoint: true });
    await loop.wait();
    await store.set({}, 'cp', stored.base);
    await store.append!({}, 'cp', corrupt(stored.patches[0]!));

    const second = createTestLoop({ store, checkpointId: 'cp' });
    second.loop.run();
    const exit = await second.loop.wait();
    expect(exit.exitReason).toBeInstanceOf(CheckpointCorruptError);
    expect(exit.exitReason).toMatchObject({ code: 'CHECKPOINT_CORRUPT', checkpointId: 'cp' });
    expect((await store.load!({}, 'cp'))?.patches).toHaveLength(1);
    await runtime.shutdown({ graceMs: 0 });
    await second.runtime.shutdown({ graceMs: 0 });
  });
});
