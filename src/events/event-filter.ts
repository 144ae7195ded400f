/**
 * What every {@link EventLog} implementation shares: the read filter and the JSON of a payload.
 *
 * @module
 * @internal
 */
import type { ReadOptions, RunplaneEvent } from './event-log.js';

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
