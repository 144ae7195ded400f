/**
 * The checkpoint keeper: a TurnLoop's reads and writes of its checkpoint, one at a time, whole
 * or incremental (docs/architecture.md, "Checkpoints and stores").
 *
 * @remarks With a store that has `append` and `load` and the default codec, a save after the
 * first is the immer patches from the stored image to the new checkpoint (`checkpoint-image.ts`),
 * appended as one record. A save is given its unhandled items as a view (`item-view.ts`): when
 * only pushes happened since the last save, its patch is found in O(pushes), without reading the
 * items held; otherwise the two lists are aligned by identity, O(items); the chain is compacted into a whole save after
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
  alignItems,
  applyImagePatches,
  editImage,
  fromImage,
  toImage,
  type CheckpointImage,
} from './checkpoint-image.js';
import { appendedSince, flattenView, type ItemView } from './item-view.js';

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

/** A checkpoint to save, its unhandled items as a view of the loop's arrays. @internal */
export type CheckpointDraft = Omit<Checkpoint, 'unhandled'> & { readonly unhandled: ItemView };

/** The checkpoint a draft stands for (its unhandled items copied out, O(items)). @internal */
const toWholeCheckpoint = (draft: CheckpointDraft): Checkpoint => ({
  ...draft,
  unhandled: flattenView(draft.unhandled),
});

/** Reads and writes one loop's checkpoint. @internal */
export interface CheckpointKeeper {
  /** @throws StoreFailedError, CheckpointCorruptError */
  load(): Promise<Checkpoint | undefined>;
  /** @throws StoreFailedError (`encode` when the checkpoint is not JSON data for the codec) */
  save(draft: CheckpointDraft): Promise<void>;
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
  /** The image's unhandled items: the view the last save was given. */
  readonly items: ItemView;
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
  const tryAppend = async (current: Chain, draft: CheckpointDraft): Promise<boolean> => {
    if (current.records >= compactAfterPatches) return false;
    // Only pushes since the last save: the new items, without reading the ones held.
    const appended = appendedSince(current.items, draft.unhandled);
    const edit =
      appended === undefined
        ? alignItems(flattenView(current.items), flattenView(draft.unhandled))
        : { drop: 0, front: [], appended };
    if (edit === undefined) return false;
    const next = editImage(current.image, draft, edit);
    const record = { format: patchFormat, version: 1, patches: next.patches };
    const data = encodeWith(() => encoder.encode(JSON.stringify(record, strictJsonValue)));
    if (current.patchBytes + data.length > current.baseBytes) return false;
    chain = undefined; // unknown until the append answers
    await call('append', () => store.append?.(ctx, checkpointId, data) ?? Promise.resolve());
    chain = {
      ...current,
      image: next.image,
      items: draft.unhandled,
      records: current.records + 1,
      patchBytes: current.patchBytes + data.length,
    };
    return true;
  };

  const saveWhole = async (draft: CheckpointDraft): Promise<void> => {
    chain = undefined;
    const checkpoint = toWholeCheckpoint(draft);
    const data = encodeWith(() => codec.encode(checkpoint));
    await call('set', () => store.set(ctx, checkpointId, data));
    if (incremental) {
      chain = {
        image: toImage(checkpoint),
        items: draft.unhandled,
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
    save: (draft) =>
      queued(async () => {
        if (chain !== undefined && (await tryAppend(chain, draft))) return;
        await saveWhole(draft);
      }),
    delete: () =>
      queued(async () => {
        chain = undefined;
        await call('delete', () => store.delete(ctx, checkpointId));
      }),
  };
}
