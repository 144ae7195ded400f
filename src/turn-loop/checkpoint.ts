/**
 * The checkpoint envelope (docs/architecture.md, "Checkpoints and stores"), its codec and its validation on load.
 *
 * @module
 */
import { z } from 'zod';
import type { TurnSuspension } from '../../machines/turn-loop.types.js';
import { CheckpointCorruptError } from '../errors.js';

/** The `format` field of every runplane checkpoint. */
export const checkpointFormat = 'runplane.checkpoint';
/** The envelope version this code writes and reads. */
export const checkpointVersion = 1;

/**
 * A saved TurnLoop: the loop machine's persisted XState snapshot plus item bookkeeping.
 *
 * @remarks
 * - `between-turns`: the loop stopped between turns; `unhandled` are the buffered items,
 *   `interrupted` is empty. A later `run()` puts them in front of newly pushed items.
 * - `mid-turn`: a turn was cancelled by a stop (or a resume was still pending);
 *   `interrupted` are that turn's consumed items and `agentState` what its agent passed to
 *   `ctx.safePoint(kind, state)` (or to `ctx.suspend(request, state)`). A later `run()` calls
 *   `genResume`. `suspension` is set when the turn's agent suspended it for outside input.
 *
 * `loop` is the loop actor's persisted snapshot, with the item arrays moved out into
 * `unhandled` / `interrupted` (they would otherwise be stored twice).
 */
export interface Checkpoint<TItem = unknown> {
  readonly format: typeof checkpointFormat;
  readonly version: typeof checkpointVersion;
  readonly kind: 'between-turns' | 'mid-turn';
  readonly loop: PersistedLoopSnapshot;
  readonly unhandled: readonly TItem[];
  readonly interrupted: readonly TItem[];
  readonly agentState?: unknown;
  /** A mid-turn checkpoint of a suspended turn: its turn, run and request (JSON data). */
  readonly suspension?: TurnSuspension;
  /** Clock time of the save, in ms. */
  readonly savedAt: number;
}

/** The part of the loop's persisted snapshot a load relies on; the rest is kept as is. */
export interface PersistedLoopSnapshot {
  readonly status: string;
  readonly value: unknown;
  readonly context: { readonly turnSeq: number } & Readonly<Record<string, unknown>>;
  readonly [key: string]: unknown;
}

/**
 * Turns a checkpoint into bytes and back.
 *
 * @remarks `decode` may return anything: the result is validated before use. The default
 * codec is JSON in UTF-8, so items and agent state must be JSON values to survive it; give
 * your own codec for anything else.
 */
export interface CheckpointCodec {
  /** Encodes a checkpoint; may throw (the save then fails with `STORE_FAILED`). */
  readonly encode: (checkpoint: Checkpoint) => Uint8Array;
  /** Decodes bytes; may throw (the load then fails with `CHECKPOINT_CORRUPT`). */
  readonly decode: (data: Uint8Array) => unknown;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * Refuses what JSON would silently turn into `null` or drop from an array (a function, a
 * symbol, `undefined` as an array element, `NaN` or ±`Infinity`) or into `{}` (a `Map`, a
 * `Set`): an item saved that way would come back changed. (An object property whose value is
 * `undefined` is left out, as JSON does, and reads back as `undefined`; a `Date` becomes its ISO
 * string through its `toJSON`.)
 */
/** @internal */
export function strictJsonValue(this: unknown, key: string, value: unknown): unknown {
  const kind = typeof value;
  if (kind === 'function' || kind === 'symbol' || (value === undefined && Array.isArray(this))) {
    throw new TypeError(
      `expected JSON values only, got ${value === undefined ? 'undefined' : `a ${kind}`} at ${JSON.stringify(key)}`,
    );
  }
  if (value instanceof Map || value instanceof Set) {
    throw new TypeError(
      `expected JSON values only, got a ${value instanceof Map ? 'Map' : 'Set'} at ${JSON.stringify(key)} (JSON writes it as {})`,
    );
  }
  if (kind === 'number' && !Number.isFinite(value)) {
    throw new TypeError(
      `expected JSON values only, got ${String(value)} at ${JSON.stringify(key)} (JSON writes it as null)`,
    );
  }
  return value;
}

/**
 * The default {@link CheckpointCodec}: JSON, UTF-8. Encoding throws (the save fails with
 * `STORE_FAILED`) for a value JSON cannot hold: a function, a symbol, a bigint, `NaN`,
 * ±`Infinity`, a `Map` or `Set`, a cycle.
 */
export const jsonCheckpointCodec: CheckpointCodec = {
  encode: (checkpoint) => encoder.encode(JSON.stringify(checkpoint, strictJsonValue)),
  decode: (data) => JSON.parse(decoder.decode(data)) as unknown,
};

const loopSnapshotSchema = z.looseObject({
  status: z.string(),
  value: z.unknown(),
  context: z.looseObject({ turnSeq: z.number().int().nonnegative() }),
});

const envelopeSchema = z
  .object({
    format: z.literal(checkpointFormat),
    version: z.literal(checkpointVersion),
    kind: z.enum(['between-turns', 'mid-turn']),
    loop: loopSnapshotSchema,
    unhandled: z.array(z.unknown()),
    interrupted: z.array(z.unknown()),
    agentState: z.unknown().optional(),
    suspension: z
      .object({ turnId: z.string(), runId: z.string(), request: z.unknown() })
      .optional(),
    savedAt: z.number(),
  })
  .refine((envelope) => envelope.kind === 'mid-turn' || envelope.interrupted.length === 0, {
    error: 'a between-turns checkpoint has no interrupted items',
    path: ['interrupted'],
  })
  .refine((envelope) => envelope.kind === 'mid-turn' || envelope.suspension === undefined, {
    error: 'a between-turns checkpoint has no suspension',
    path: ['suspension'],
  });

/**
 * Decodes and validates a stored checkpoint.
 *
 * @param codec - the loop's codec
 * @param data - the stored bytes
 * @param checkpointId - for the error message
 * @returns the checkpoint
 * @throws {@link CheckpointCorruptError} (`CHECKPOINT_CORRUPT`) when the bytes do not decode,
 *   the format is not runplane's, the version is unknown, or the shape is wrong
 */
export function decodeCheckpoint(
  codec: CheckpointCodec,
  data: Uint8Array,
  checkpointId: string,
): Checkpoint {
  let decoded: unknown;
  try {
    decoded = codec.decode(data);
  } catch (error) {
    throw new CheckpointCorruptError(checkpointId, 'it does not decode', { cause: error });
  }
  if (typeof decoded !== 'object' || decoded === null) {
    throw new CheckpointCorruptError(checkpointId, 'it is not an object');
  }
  const { format, version } = decoded as { format?: unknown; version?: unknown };
  if (format !== checkpointFormat) {
    throw new CheckpointCorruptError(
      checkpointId,
      `expected format ${JSON.stringify(checkpointFormat)}, got ${JSON.stringify(format)}`,
    );
  }
  if (version !== checkpointVersion) {
    throw new CheckpointCorruptError(
      checkpointId,
      `unknown version ${JSON.stringify(version)} (this runplane reads version ${checkpointVersion})`,
    );
  }
  return checkCheckpoint(decoded, checkpointId);
}

/**
 * Validates a decoded checkpoint of the right format and version.
 *
 * @throws {@link CheckpointCorruptError} (`CHECKPOINT_CORRUPT`) when the shape is wrong
 * @internal
 */
export function checkCheckpoint(decoded: unknown, checkpointId: string): Checkpoint {
  const result = envelopeSchema.safeParse(decoded);
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new CheckpointCorruptError(
      checkpointId,
      `${issue?.path.map(String).join('.') || 'envelope'}: ${issue?.message ?? 'invalid'}`,
      { cause: result.error },
    );
  }
  return result.data;
}
