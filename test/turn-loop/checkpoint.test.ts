/**
 * Checkpoint rules of the TurnLoop (issue 3, "Checkpoints"): when it is saved, loaded,
 * deleted, and what a bad one does. Stores are in memory here; the SQLite round trip is in
 * conformance-checkpoint.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  CancelMode,
  CheckpointCorruptError,
  StoreFailedError,
  TurnCancelledError,
  checkpointFormat,
  createMemoryCheckpointStore,
  jsonCheckpointCodec,
  type Checkpoint,
  type CheckpointCodec,
  type CheckpointStore,
  type GenResumeArgs,
} from '../../src/index.js';
import { decodeCheckpoint } from '../../src/turn-loop/checkpoint.js';
import { createTestLoop, decodeStored, deferred, flush, until } from './helpers.js';

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

const envelope = (overrides: Partial<Record<keyof Checkpoint, unknown>> = {}) => ({
  format: checkpointFormat,
  version: 1,
  kind: 'between-turns',
  loop: { status: 'active', value: {}, context: { turnSeq: 4 } },
  unhandled: ['old-1', 'old-2'],
  interrupted: [],
  savedAt: 0,
  ...overrides,
});

/** A store that counts calls and can be made to fail one operation. */
function spyStore(fail: Partial<Record<'get' | 'set' | 'delete', Error>> = {}) {
  const inner = createMemoryCheckpointStore();
  const calls: string[] = [];
  const store: CheckpointStore = {
    get: (ctx, id) => {
      calls.push('get');
      return fail.get ? Promise.reject(fail.get) : inner.get(ctx, id);
    },
    set: (ctx, id, data) => {
      calls.push('set');
      return fail.set ? Promise.reject(fail.set) : inner.set(ctx, id, data);
    },
    delete: (ctx, id) => {
      calls.push('delete');
      return fail.delete ? Promise.reject(fail.delete) : inner.delete(ctx, id);
    },
  };
  return { store, inner, calls };
}

describe('TurnLoop checkpoints', () => {
  it('a corrupt checkpoint is a CheckpointCorruptError exit and is left in place', async () => {
    const { store, inner, calls } = spyStore();
    const corrupt = new Uint8Array([123, 34, 0xff]);
    await inner.set({}, 'c', corrupt);
    const { loop, genInputCalls } = createTestLoop({ store, checkpointId: 'c' });
    loop.push('new');
    loop.run();
    const exit = await loop.wait();
    expect(exit.exitReason).toBeInstanceOf(CheckpointCorruptError);
    expect(exit.exitReason).toMatchObject({ code: 'CHECKPOINT_CORRUPT', checkpointId: 'c' });
    expect(genInputCalls).toEqual([]);
    expect(exit.unhandledItems).toEqual(['new']);
    expect(exit.checkpointAttempted).toBe(false);
    expect(calls).toEqual(['get']);
    expect(await inner.get({}, 'c')).toEqual(corrupt);
  });

  it('a loaded between-turns checkpoint is deleted once a turn after it succeeds: an error exit later offers nothing again', async () => {
    const { store, inner, calls } = spyStore();
    await inner.set({}, 'c', encode(envelope())); // unhandled old-1, old-2; turnSeq 4
    const { loop, stepped, genInputCalls } = createTestLoop({ store, checkpointId: 'c' });
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn 5 started');
    expect(genInputCalls[0]).toMatchObject({ turnId: 'turn-5', items: ['old-1', 'old-2'] });
    stepped.last().finish(); // turn-5 consumed old-1 and succeeded
    await until(() => stepped.executions.length === 2, 'turn 6 started');
    expect(calls).toEqual(['get', 'delete']);
    expect(await inner.get({}, 'c')).toBeUndefined();
    stepped.last().fail(new Error('model down')); // turn-6 (old-2) fails: an error exit
    const exit = await loop.wait();
    expect(exit.exitReason).toMatchObject({ message: 'model down' });
    expect(calls).toEqual(['get', 'delete']); // nothing saved on an error exit
    expect(await inner.get({}, 'c')).toBeUndefined(); // a restart does not run old-1 again
  });

  it('a preempted first turn after a load uses the checkpoint up too', async () => {
    const { store, inner, calls } = spyStore();
    await inner.set({}, 'c', encode(envelope())); // unhandled old-1, old-2
    const { loop, stepped, prepared } = createTestLoop({ store, checkpointId: 'c' });
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn 5 started');
    loop.push('urgent', { preempt: CancelMode.AnySafePoint });
    stepped.last().safePoint('afterToolCalls'); // old-1's turn is preempted: consumed
    await until(() => stepped.executions.length === 2, 'turn 6 started');
    expect(calls).toEqual(['get', 'delete']);
    stepped.last().fail(new Error('model down')); // an error exit
    await loop.wait();
    expect(prepared.map((p) => p.consumed)).toEqual([['old-1'], ['old-2']]);
    expect(await inner.get({}, 'c')).toBeUndefined(); // old-1 is not offered again
  });

  it('a resume turn preempted while its run waited in the session is planned again, with its resume', async () => {
    const { store, inner } = spyStore();
    await inner.set(
      {},
      'c',
      encode(
        envelope({ kind: 'mid-turn', interrupted: ['i'], unhandled: ['u'], agentState: { m: 42 } }),
      ),
    );
    const resumes: Array<Omit<GenResumeArgs<string>, 'signal'>> = [];
    const { loop, runtime, stepped } = createTestLoop({
      store,
      checkpointId: 'c',
      genResume: ({ turnId, interrupted, unhandled, newItems, agentState }) => {
        resumes.push({ turnId, interrupted, unhandled, newItems, agentState });
        const all = [...interrupted, ...unhandled, ...newItems];
        return { input: all, consumed: all };
      },
    });
    const gate = deferred();
    const other = { execute: async () => gate.promise };
    runtime.prepare({ ownerId: 'u1', sessionId: 's1', agent: other, input: 0 }).start();
    loop.run();
    await until(() => resumes.length === 1, 'resume planned');
    await flush(); // its run waits behind the other run
    loop.push('urgent', { preempt: CancelMode.AnySafePoint });
    await until(() => resumes.length === 2, 'resume planned again');
    expect(resumes[1]).toMatchObject({
      interrupted: ['i'],
      unhandled: ['u'],
      newItems: ['urgent'],
      agentState: { m: 42 },
    });
    gate.resolve();
    await until(() => stepped.executions.length === 1, 'the resume ran');
    stepped.last().finish();
    loop.stop();
    expect((await loop.wait()).exitReason).toBeUndefined();
    expect(await inner.get({}, 'c')).toBeUndefined(); // used up by the resume that ran
  });

  it('a preempt and an afterTurn stop on a turn that never ran end cleanly, with a between-turns checkpoint', async () => {
    const { store, inner } = spyStore();
    const { loop, runtime, stepped, prepared } = createTestLoop({ store, checkpointId: 'c' });
    const gate = deferred();
    const other = { execute: async () => gate.promise };
    runtime.prepare({ ownerId: 'u1', sessionId: 's1', agent: other, input: 0 }).start();
    loop.push('a');
    loop.run();
    await until(() => prepared.length === 1, 'turn planned');
    await flush(); // its run waits behind the other run
    loop.push('u', { preempt: CancelMode.AnySafePoint });
    loop.stop();
    const exit = await loop.wait();
    expect(exit.exitReason).toBeUndefined();
    expect(exit.unhandledItems).toEqual(['a', 'u']);
    expect(exit.interruptedItems).toEqual([]);
    expect(decodeStored(await inner.get({}, 'c'))).toMatchObject({
      kind: 'between-turns',
      unhandled: ['a', 'u'],
      interrupted: [],
    });
    expect(stepped.executions).toHaveLength(0);
    gate.resolve();
  });

  it('an unknown version or a wrong shape is CHECKPOINT_CORRUPT', () => {
    const cases: Array<[unknown, RegExp]> = [
      [envelope({ version: 2 }), /unknown version 2/],
      [envelope({ format: 'other' }), /expected format/],
      [envelope({ interrupted: ['x'] }), /interrupted/],
      [envelope({ loop: { status: 'active', value: {}, context: {} } }), /loop\.context\.turnSeq/],
      [[1, 2], /format/],
      ['"text"', /not an object/],
    ];
    for (const [value, message] of cases) {
      expect(() => decodeCheckpoint(jsonCheckpointCodec, encode(value), 'c')).toThrow(message);
    }
    expect(decodeCheckpoint(jsonCheckpointCodec, encode(envelope()), 'c').unhandled).toEqual([
      'old-1',
      'old-2',
    ]);
  });

  it('a between-turns checkpoint puts the stored items first, then the new ones', async () => {
    const { store, inner } = spyStore();
    await inner.set({}, 'c', encode(envelope()));
    const { loop, stepped, genInputCalls } = createTestLoop({ store, checkpointId: 'c' });
    loop.push('new-1');
    loop.run();
    loop.push('new-2');
    await until(() => stepped.executions.length === 1, 'turn started');
    expect(genInputCalls[0]).toMatchObject({ items: ['old-1', 'old-2', 'new-1', 'new-2'] });
    expect(genInputCalls[0]?.turnId).toBe('turn-5'); // numbering continues from the checkpoint
    stepped.last().finish();
    await until(() => stepped.executions.length === 2, 'turn 2 started');
    loop.stop({ mode: 'immediate' });
    const exit = await loop.wait();
    expect(exit.interruptedItems).toEqual(['old-2']);
    expect(exit.unhandledItems).toEqual(['new-1', 'new-2']);
  });

  it('the loaded checkpoint is deleted on a clean exit that saves nothing', async () => {
    const { store, inner, calls } = spyStore();
    await inner.set({}, 'c', encode(envelope({ unhandled: ['old'] })));
    const { loop, stepped } = createTestLoop({ store, checkpointId: 'c' });
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    loop.stop(); // afterTurn: nothing will be left
    stepped.last().finish();
    const exit = await loop.wait();
    expect(exit.exitReason).toBeUndefined();
    expect(exit.checkpointAttempted).toBe(false);
    expect(calls).toEqual(['get', 'delete']);
    expect(await inner.get({}, 'c')).toBeUndefined();
  });

  it('a clean exit with items left saves a between-turns checkpoint holding the loop snapshot', async () => {
    const { store, inner } = spyStore();
    const { loop, stepped, clock } = createTestLoop({ store, checkpointId: 'c' });
    loop.push('a');
    loop.push('b');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    clock.increment(1234);
    loop.stop();
    stepped.last().finish();
    const exit = await loop.wait();
    expect(exit.checkpointAttempted).toBe(true);
    const saved = decodeStored(await inner.get({}, 'c'));
    expect(saved).toMatchObject({
      format: 'runplane.checkpoint',
      version: 1,
      kind: 'between-turns',
      unhandled: ['b'],
      interrupted: [],
      savedAt: 1234,
    });
    expect(saved.agentState).toBeUndefined();
    expect(saved.loop).toMatchObject({
      status: 'active',
      value: { loop: { exiting: 'saving' }, stop: 'committed' },
      context: { turnSeq: 1, buffer: [], closed: true },
    });
  });

  it('a pending resume is saved again if the loop exits before running it', async () => {
    const { store, inner } = spyStore();
    const midTurn = envelope({
      kind: 'mid-turn',
      interrupted: ['i'],
      unhandled: ['u'],
      agentState: { step: 7 },
    });
    await inner.set({}, 'c', encode(midTurn));
    let resumeCalled = false;
    const { loop } = createTestLoop({
      store,
      checkpointId: 'c',
      genResume: async (args: GenResumeArgs<string>) => {
        resumeCalled = true;
        await new Promise<never>((_, reject) =>
          args.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }),
        );
        return { input: 0, consumed: [] };
      },
    });
    loop.push('n');
    loop.run();
    await until(() => resumeCalled, 'genResume called');
    loop.stop({ cause: 'not now' });
    const exit = await loop.wait();
    expect(exit.interruptedItems).toEqual(['i']);
    expect(exit.unhandledItems).toEqual(['u', 'n']);
    expect(exit.checkpointAttempted).toBe(true);
    const saved = decodeStored(await inner.get({}, 'c'));
    expect(saved).toMatchObject({
      kind: 'mid-turn',
      interrupted: ['i'],
      unhandled: ['u', 'n'],
      agentState: { step: 7 },
    });
  });

  it('no checkpoint is saved on an error exit, and the loaded one stays', async () => {
    const { store, inner, calls } = spyStore();
    await inner.set({}, 'c', encode(envelope({ unhandled: ['old'] })));
    const { loop, stepped } = createTestLoop({ store, checkpointId: 'c' });
    loop.push('b');
    loop.run();
    await until(() => stepped.executions.length === 1, 'turn started');
    const failure = new Error('agent crashed');
    stepped.last().fail(failure);
    const exit = await loop.wait();
    expect(exit.exitReason).toBe(failure);
    expect(exit.unhandledItems).toEqual(['b']);
    expect(exit.checkpointAttempted).toBe(false);
    expect(calls).toEqual(['get']);
    expect(decodeStored(await inner.get({}, 'c')).unhandled).toEqual(['old']);
  });

  it('a failing store.get ends the loop with STORE_FAILED before any turn', async () => {
    const { store, calls } = spyStore({ get: new Error('connection refused') });
    const { loop, genInputCalls } = createTestLoop({ store, checkpointId: 'c' });
    loop.push('a');
    loop.run();
    const exit = await loop.wait();
    expect(exit.exitReason).toBeInstanceOf(StoreFailedError);
    expect(exit.exitReason).toMatchObject({ code: 'STORE_FAILED', operation: 'get', key: 'c' });
    expect(exit.unhandledItems).toEqual(['a']);
    expect(genInputCalls).toEqual([]);
    expect(calls).toEqual(['get']);
  });

  it('a failing delete of a used checkpoint is checkpointError, not the exit reason; the loop goes on and tries again', async () => {
    const { store, inner, calls } = spyStore({ delete: new Error('read-only') });
    await inner.set(
      {},
      'c',
      encode(envelope({ kind: 'mid-turn', interrupted: ['i'], unhandled: [] })),
    );
    const { loop, stepped, prepared } = createTestLoop({ store, checkpointId: 'c' });
    loop.push('n');
    loop.run();
    await until(() => stepped.executions.length === 1, 'resume turn started');
    stepped.last().finish(); // the resume turn consumed 'i': the delete fails
    await until(() => stepped.executions.length === 2, 'the loop went on');
    stepped.last().finish();
    loop.stop(); // nothing left to save: the exit deletes the used checkpoint, and fails again
    const exit = await loop.wait();
    expect(prepared.map((p) => p.consumed)).toEqual([['i'], ['n']]);
    expect(exit.exitReason).toBeUndefined();
    expect(exit.checkpointError).toMatchObject({ code: 'STORE_FAILED', operation: 'delete' });
    expect(exit.checkpointAttempted).toBe(false);
    expect(calls).toEqual(['get', 'delete', 'delete', 'delete']); // after each turn, at exit
  });

  it('a codec that cannot encode gives checkpointError STORE_FAILED (encode); a custom codec is used both ways', async () => {
    const broken: CheckpointCodec = {
      encode: () => {
        throw new Error('not serializable');
      },
      decode: (data) => jsonCheckpointCodec.decode(data),
    };
    const first = createTestLoop({
      store: createMemoryCheckpointStore(),
      checkpointId: 'c',
      codec: broken,
    });
    first.loop.push('a');
    first.loop.stop();
    first.loop.run();
    const a = await first.loop.wait();
    expect(a.checkpointAttempted).toBe(false); // stopped before run: the store is never touched

    const { store, inner } = spyStore();
    const seen: string[] = [];
    const reversing: CheckpointCodec = {
      encode: (checkpoint) => {
        seen.push('encode');
        return jsonCheckpointCodec.encode(checkpoint).reverse();
      },
      decode: (data) => {
        seen.push('decode');
        return jsonCheckpointCodec.decode(data.slice().reverse());
      },
    };
    const second = createTestLoop({ store, checkpointId: 'c', codec: reversing });
    second.loop.push('a');
    second.loop.push('b');
    second.loop.run();
    await until(() => second.stepped.executions.length === 1, 'turn started');
    second.loop.stop({ mode: 'immediate' });
    const exit = await second.loop.wait();
    expect(exit.exitReason).toBeInstanceOf(TurnCancelledError);
    expect(seen).toEqual(['encode']);
    const stored = await inner.get({}, 'c');
    expect(() => decodeStored(stored)).toThrow(); // not plain JSON

    // Loads with the reversing codec, cannot encode on the way out.
    const failing = createTestLoop({
      store,
      checkpointId: 'c',
      codec: { encode: broken.encode, decode: reversing.decode },
    });
    failing.loop.run();
    await until(() => failing.stepped.executions.length === 1, 'resume turn started');
    failing.loop.stop({ mode: 'immediate' });
    const third = await failing.loop.wait();
    expect(seen).toEqual(['encode', 'decode']);
    expect(third.checkpointAttempted).toBe(true);
    expect(third.checkpointError).toMatchObject({ code: 'STORE_FAILED', operation: 'encode' });
  });

  it.each<[string, unknown]>([
    [
      'a cycle',
      (() => {
        const cyclic: Record<string, unknown> = { a: 1 };
        cyclic.self = cyclic;
        return cyclic;
      })(),
    ],
    ['a function', () => 1],
    ['a symbol', Symbol('x')],
    ['a bigint', 10n],
    ['NaN', { score: Number.NaN }],
    ['Infinity', [1, Number.POSITIVE_INFINITY]],
    ['a Map', { seen: new Map([['k', 1]]) }],
    ['a Set', new Set(['x'])],
  ])(
    'an item JSON cannot hold (%s) fails the save with STORE_FAILED (encode), never silently',
    async (_name, item) => {
      const { store, inner } = spyStore();
      const { loop, stepped } = createTestLoop({ store, checkpointId: 'c' });
      loop.push('first');
      loop.push(item as string); // what untyped code could push
      loop.run();
      await until(() => stepped.executions.length === 1, 'turn started');
      loop.stop({ mode: 'immediate' });
      const exit = await loop.wait();
      expect(exit.checkpointAttempted).toBe(true);
      expect(exit.checkpointError).toBeInstanceOf(StoreFailedError);
      expect(exit.checkpointError).toMatchObject({ code: 'STORE_FAILED', operation: 'encode' });
      expect(await inner.get({}, 'c')).toBeUndefined(); // nothing half-written
    },
  );
});
