/**
 * The checkpoint store contract: where a TurnLoop keeps its checkpoint between two lives
 * (docs/architecture.md, "Checkpoints and stores").
 *
 * @remarks A narrow driver interface, context object first: implement three methods and any
 * key-value backend will do; implement `append` and `load` too and saves become incremental
 * (a base checkpoint plus patches). Implementations here: {@link createMemoryCheckpointStore} and,
 * from `runplane/stores/sqlite`, `createSqliteCheckpointStore`. One contract suite
 * (`test/stores/checkpoint-store.contract.test.ts`) runs against every implementation.
 *
 * @module
 */
import type { StoreContext } from '../events/event-log.js';

/**
 * A key-value store of encoded checkpoints (bytes), keyed by checkpoint id.
 *
 * @remarks Every method takes a {@link StoreContext} first; an aborted `signal` makes it
 * reject with the signal's reason. The TurnLoop wraps any rejection in a
 * `StoreFailedError` (code `STORE_FAILED`). Semantics follow Eino's CheckPointStore and
 * CheckPointDeleter, with `delete` required.
 */
export interface CheckpointStore {
  /**
   * Reads a checkpoint.
   *
   * @param ctx - `{ signal }`
   * @param checkpointId - the key
   * @returns the stored bytes (a copy the caller may keep), or `undefined` when there is none
   */
  get(ctx: StoreContext, checkpointId: string): Promise<Uint8Array | undefined>;
  /**
   * Writes a checkpoint, replacing any previous one atomically.
   *
   * @param ctx - `{ signal }`
   * @param checkpointId - the key
   * @param data - the encoded checkpoint; the store keeps its own copy
   */
  set(ctx: StoreContext, checkpointId: string, data: Uint8Array): Promise<void>;
  /**
   * Deletes a checkpoint.
   *
   * @param ctx - `{ signal }`
   * @param checkpointId - the key
   * @returns whether a checkpoint was there
   */
  delete(ctx: StoreContext, checkpointId: string): Promise<boolean>;
  /**
   * Optional, with `load`: appends a patch record to the checkpoint `set` last wrote. A TurnLoop
   * then saves incrementally (immer patches on a base, compacted into a new `set` after a
   * bound); a store without `append` and `load` gets whole saves.
   *
   * @param ctx - `{ signal }`
   * @param checkpointId - the key; a checkpoint must be there (`set` before), else it rejects
   * @param patch - the encoded patch record; the store keeps its own copy
   */
  append?(ctx: StoreContext, checkpointId: string, patch: Uint8Array): Promise<void>;
  /**
   * Optional, with `append`: reads a checkpoint with its patches, in append order. (`get` reads
   * the base alone.)
   *
   * @param ctx - `{ signal }`
   * @param checkpointId - the key
   * @returns the base and its patches (copies), or `undefined` when there is none
   */
  load?(ctx: StoreContext, checkpointId: string): Promise<StoredCheckpoint | undefined>;
}

/** A checkpoint as an incremental store holds it: the base `set` wrote, then each `append`. */
export interface StoredCheckpoint {
  readonly base: Uint8Array;
  readonly patches: readonly Uint8Array[];
}

/** @internal Rejects with the signal's reason when `ctx.signal` is already aborted. */
export function throwIfAborted(ctx: StoreContext): void {
  ctx.signal?.throwIfAborted();
}
