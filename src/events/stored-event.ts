/**
 * A stored event, as every {@link EventLog} implementation builds, encodes and filters it.
 *
 * @module
 * @internal
 */
import type { NewEvent, ReadOptions, RunplaneEvent, SessionKey } from './event-log.js';

/** @internal The event `append` stores: the writer's fields, and the log's `seq`, `id` and session. */
export const toStoredEvent = (
  key: SessionKey,
  seq: number,
  id: string,
  event: NewEvent,
): RunplaneEvent => ({
  seq,
  id,
  sessionId: key.sessionId,
  runId: event.runId,
  type: event.type,
  payload: event.payload ?? {},
  at: event.at,
});

/** @internal Whether `event` passes the `runId` and `types` filters of `options`. */
export const matchesReadOptions = (event: RunplaneEvent, options: ReadOptions): boolean =>
  (options.runId === undefined || event.runId === options.runId) &&
  (options.types === undefined || options.types.includes(event.type));

/**
 * @internal The JSON of a payload; one that cannot be serialized is logged as a note saying so
 * (`{ unserializable: <reason> }`), never lost.
 */
export const toPayloadJson = (payload: Readonly<Record<string, unknown>>): string => {
  try {
    return JSON.stringify(payload);
  } catch (error) {
    return JSON.stringify({
      unserializable: error instanceof Error ? error.message : String(error),
    });
  }
};
