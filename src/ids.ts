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

/**
 * A generator of ids unique across processes and cheap to call: a nanoid prefix fixed at
 * creation, then a base-36 counter (`V1StGXR8_Z5jdHi6B-myT.1`, `….2`, …).
 */
export function createIdSequence(): () => string {
  const prefix = nanoid();
  let next = 0;
  return () => `${prefix}.${(++next).toString(36)}`;
}
