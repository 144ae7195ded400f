/**
 * The in-memory {@link CheckpointStore}: a `Map` of byte copies. For tests and for loops whose
 * checkpoint only has to outlive one loop, not the process.
 *
 * @module
 */
import type { StoreContext } from '../events/event-log.js';
import { throwIfAborted, type CheckpointStore } from './checkpoint-store.js';

interface Entry {
  readonly base: Uint8Array;
  readonly patches: Uint8Array[];
}

/**
 * Creates an in-memory checkpoint store.
 *
 * @remarks Bytes are copied on the way in and on the way out, so neither side can change
 * what the other holds. Each method does its work at call time and answers with a settled
 * promise. Incremental: `append` and `load` are implemented.
 *
 * @returns a {@link CheckpointStore}
 * @example
 * ```ts
 * const store = createMemoryCheckpointStore();
 * const loop = createTurnLoop({ runtime, ownerId, sessionId, genInput, prepareAgent,
 *   store, checkpointId: 'session-123' });
 * ```
 */
export function createMemoryCheckpointStore(): CheckpointStore {
  const entries = new Map<string, Entry>();
  return {
    // eslint-disable-next-line @typescript-eslint/require-await -- async only to reject, not throw
    async get(ctx: StoreContext, checkpointId: string) {
      throwIfAborted(ctx);
      return entries.get(checkpointId)?.base.slice();
    },
    // eslint-disable-next-line @typescript-eslint/require-await -- async only to reject, not throw
    async set(ctx: StoreContext, checkpointId: string, data: Uint8Array) {
      throwIfAborted(ctx);
      entries.set(checkpointId, { base: data.slice(), patches: [] });
    },
    // eslint-disable-next-line @typescript-eslint/require-await -- async only to reject, not throw
    async append(ctx: StoreContext, checkpointId: string, patch: Uint8Array) {
      throwIfAborted(ctx);
      const entry = entries.get(checkpointId);
      if (entry === undefined) throw new Error(`no checkpoint ${checkpointId} to append to`);
      entry.patches.push(patch.slice());
    },
    // eslint-disable-next-line @typescript-eslint/require-await -- async only to reject, not throw
    async load(ctx: StoreContext, checkpointId: string) {
      throwIfAborted(ctx);
      const entry = entries.get(checkpointId);
      if (entry === undefined) return undefined;
      return { base: entry.base.slice(), patches: entry.patches.map((patch) => patch.slice()) };
    },
    // eslint-disable-next-line @typescript-eslint/require-await -- async only to reject, not throw
    async delete(ctx: StoreContext, checkpointId: string) {
      throwIfAborted(ctx);
      return entries.delete(checkpointId);
    },
  };
}
