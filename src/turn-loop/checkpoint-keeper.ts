/**
 * The checkpoint keeper: a TurnLoop's reads and writes of its checkpoint, one at a time, whole
 * or incremental (docs/architecture.md, "Checkpoints and stores").
 *
 * @remarks With a store that has `append` and `load` and the default codec, a save after the
 * first is the immer patches from the stored image to the new checkpoint (`checkpoint-image.ts`),
 * appended as one record; the chain is compacted into a whole save after
 * `compactAfterPatches` records, or once its patches outweigh the base. Any other store (or a
 * custom codec) gets whole saves. A load replays the chain; a corrupt or truncated patch is a
 * `CheckpointCorruptError`. Store calls are queued, so a live save and the exit's save or
 * delete reach the store in the order they were asked for.
 *
 * @module
 */
import type { Patch } from 'immer';
import { z } from 'zod';
import { CheckpointCorruptError, StoreFailedError } from '../errors.js';
import type { CheckpointStore } from '../stores/checkpoint-store.js';
import {
  checkCheckpoint,
  decodeCheckpoint,
  strictJsonValue,
  type Checkpoint,
  type CheckpointCodec,
} from './checkpoint.js';
import {
  applyImagePatches,
  fromImage,
  nextImage,
  toImage,
  type CheckpointImage,
} from './checkpoint-image.js';

/** The `format` of a patch record. */
const patchFormat = 'runplane.checkpoint-patch';

const patchRecordSchema = z.object({
  format: z.literal(patchFormat),
  version: z.literal(1),
  patches: z.array(
    z.object({
      op: z.enum(['add', 'replace', 'remove']),
      path: z.array(z.union([z.string(), z.number()])),
      value: z.unknown().optional(),
    }),
  ),
});

/** Reads and writes one loop's checkpoint. @internal */
export interface CheckpointKeeper {
  /** @throws StoreFailedError, CheckpointCorruptError */
  load(): Promise<Checkpoint | undefined>;
  /** @throws StoreFailedError (`encode` when the checkpoint is not JSON data for the codec) */
  save(checkpoint: Checkpoint): Promise<void>;
  /** @throws StoreFailedError */
  delete(): Promise<void>;
}

/** How a keeper is set up. @internal */
export interface CheckpointKeeperOptions {
  readonly store: CheckpointStore;
  readonly checkpointId: string;
  readonly codec: CheckpointCodec;
  /** Saves may be patches: the store has `append` and `load`, the codec is the default. */
  readonly incremental: boolean;
  /** Patch records on one base before the next save is whole. */
  readonly compactAfterPatches: number;
}

/** The stored chain this keeper wrote: its image, and how many patch bytes are on its base. */
interface Chain {
  readonly image: CheckpointImage;
  /** The image's unhandled items, flat (the list the last save was given; never changed). */
  readonly items: readonly unknown[];
  readonly records: number;
  readonly patchBytes: number;
  readonly baseBytes: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });
/** Store calls whose effect must complete get a signal that never aborts. */
const uncancellable = new AbortController().signal;

/** Decodes and checks one patch record. */
function decodePatches(data: Uint8Array, checkpointId: string, index: number): Patch[] {
  let decoded: unknown;
  try {
    decoded = JSON.parse(decoder.decode(data));
  } catch (error) {
    throw new CheckpointCorruptError(checkpointId, `patch ${index} does not decode`, {
      cause: error,
    });
  }
  const result = patchRecordSchema.safeParse(decoded);
  if (!result.success) {
    throw new CheckpointCorruptError(checkpointId, `patch ${index} is not a patch record`, {
      cause: result.error,
    });
  }
  return result.data.patches;
}

/**
 * Creates the keeper of one loop's checkpoint.
 *
 * @internal
 */
export function createCheckpointKeeper(options: CheckpointKeeperOptions): CheckpointKeeper {
  const { store, checkpointId, codec, incremental, compactAfterPatches } = options;
  const ctx = { signal: uncancellable };
  let chain: Chain | undefined;
  let tail: Promise<unknown> = Promise.resolve();

  /** Runs `operation` after every store call asked for before it. */
  const queued = <T>(operation: () => Promise<T>): Promise<T> => {
    const result = tail.then(operation, operation);
    tail = result.catch(() => undefined);
    return result;
  };

  const call = async <T>(
    operation: StoreFailedError['operation'],
    run: () => Promise<T>,
  ): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      throw new StoreFailedError(operation, checkpointId, error);
    }
  };

  const encodeWith = (encode: () => Uint8Array): Uint8Array => {
    try {
      return encode();
    } catch (error) {
      throw new StoreFailedError('encode', checkpointId, error);
    }
  };

  /** Appends the patches to the stored chain; false when a whole save is due instead. */
  const tryAppend = async (current: Chain, checkpoint: Checkpoint): Promise<boolean> => {
    if (current.records >= compactAfterPatches) return false;
    const next = nextImage(current.image, checkpoint, current.items);
    if (next === undefined) return false;
    const record = { format: patchFormat, version: 1, patches: next.patches };
    const data = encodeWith(() => encoder.encode(JSON.stringify(record, strictJsonValue)));
    if (current.patchBytes + data.length > current.baseBytes) return false;
    chain = undefined; // unknown until the append answers
    await call('append', () => store.append?.(ctx, checkpointId, data) ?? Promise.resolve());
    chain = {
      ...current,
      image: next.image,
      items: checkpoint.unhandled,
      records: current.records + 1,
      patchBytes: current.patchBytes + data.length,
    };
    return true;
  };

  const saveWhole = async (checkpoint: Checkpoint): Promise<void> => {
    chain = undefined;
    const data = encodeWith(() => codec.encode(checkpoint));
    await call('set', () => store.set(ctx, checkpointId, data));
    if (incremental) {
      chain = {
        image: toImage(checkpoint),
        items: checkpoint.unhandled,
        records: 0,
        patchBytes: 0,
        baseBytes: data.length,
      };
    }
  };

  const loadChain = async (): Promise<Checkpoint | undefined> => {
    const stored = await call(
      'load',
      () => store.load?.(ctx, checkpointId) ?? Promise.resolve(undefined),
    );
    if (stored === undefined) return undefined;
    const base = decodeCheckpoint(codec, stored.base, checkpointId);
    if (stored.patches.length === 0) return base;
    let image = toImage(base);
    for (const [i, data] of stored.patches.entries()) {
      const patches = decodePatches(data, checkpointId, i + 1);
      try {
        image = applyImagePatches(image, patches);
      } catch (error) {
        throw new CheckpointCorruptError(checkpointId, `patch ${i + 1} does not apply`, {
          cause: error,
        });
      }
    }
    return checkCheckpoint(fromImage(image), checkpointId);
  };

  return {
    load: () =>
      queued(async () => {
        // A loaded chain is not continued: the first save of this loop is whole (a compaction).
        chain = undefined;
        if (incremental) return loadChain();
        const data = await call('get', () => store.get(ctx, checkpointId));
        return data === undefined ? undefined : decodeCheckpoint(codec, data, checkpointId);
      }),
    save: (checkpoint) =>
      queued(async () => {
        if (chain !== undefined && (await tryAppend(chain, checkpoint))) return;
        await saveWhole(checkpoint);
      }),
    delete: () =>
      queued(async () => {
        chain = undefined;
        await call('delete', () => store.delete(ctx, checkpointId));
      }),
  };
}
