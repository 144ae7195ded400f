/**
 * Id generation: run ids and event ids are nanoids, never reused.
 *
 * @module
 */
import { nanoid } from 'nanoid';

/** A fresh run id (21-character nanoid). */
export function createRunId(): string {
  return nanoid();
}

/** A fresh event id (21-character nanoid). */
export function createEventId(): string {
  return nanoid();
}
