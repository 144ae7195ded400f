/**
 * Open SSE streams, counted per owner and capped (429 `too_many_streams`), as Hono
 * middleware; and the registry that ends them all at shutdown.
 *
 * @module
 */
import type { MiddlewareHandler } from 'hono';
import { HttpError } from '../http-error.js';

/** One open stream: its stop signal and its release. */
export interface StreamLease {
  /** Aborted when the client goes away or the service ends every stream. */
  readonly signal: AbortSignal;
  /** Stops counting the stream (idempotent); the stream route calls it once its body closed. */
  release(): void;
}

/** Every open stream of the service, counted per owner. */
export interface StreamRegistry {
  /** How many streams are open. */
  readonly size: number;
  /**
   * Opens a stream of `ownerId`; the lease's signal follows `clientSignal` (the request's).
   *
   * @throws {@link HttpError} (`too_many_streams`) when the owner already holds the maximum
   */
  open(ownerId: string, clientSignal?: AbortSignal): StreamLease;
  /** Ends every open stream: aborts each lease's signal. */
  closeAll(): void;
}

/**
 * Creates the stream registry.
 *
 * @param maxStreamsPerOwner - open streams one owner may hold at once (session and inspect
 *   streams together)
 * @returns the {@link StreamRegistry}
 */
export function createStreamRegistry(maxStreamsPerOwner: number): StreamRegistry {
  const open = new Set<AbortController>();
  const countOf = new Map<string, number>();
  return {
    get size() {
      return open.size;
    },
    open(ownerId, clientSignal) {
      const count = countOf.get(ownerId) ?? 0;
      if (count >= maxStreamsPerOwner) {
        throw new HttpError(
          'too_many_streams',
          `expected at most ${maxStreamsPerOwner} open streams per owner; close one first`,
        );
      }
      countOf.set(ownerId, count + 1);
      const stop = new AbortController();
      open.add(stop);
      const onClientAbort = () => stop.abort();
      clientSignal?.addEventListener('abort', onClientAbort, { once: true });
      let released = false;
      return {
        signal: stop.signal,
        release() {
          if (released) return;
          released = true;
          open.delete(stop);
          clientSignal?.removeEventListener('abort', onClientAbort);
          const left = (countOf.get(ownerId) ?? 1) - 1;
          if (left === 0) countOf.delete(ownerId);
          else countOf.set(ownerId, left);
        },
      };
    },
    closeAll() {
      for (const stop of [...open]) stop.abort();
    },
  };
}

/**
 * Middleware that opens a stream lease for the caller (`c.var.stream`) before an SSE route.
 *
 * @remarks The lease's signal is aborted when the client disconnects. The route hands the
 * signal to its stream and releases the lease when the stream's body closes; when the route
 * fails instead, the lease is released here.
 *
 * @param registry - the service's {@link StreamRegistry}
 * @returns the middleware
 * @throws {@link HttpError} (`too_many_streams`) past the owner's cap
 */
export function streamQuota(
  registry: StreamRegistry,
): MiddlewareHandler<{ Variables: { ownerId: string; stream: StreamLease } }> {
  return async (c, next) => {
    const lease = registry.open(c.get('ownerId'), c.req.raw.signal);
    c.set('stream', lease);
    await next();
    if (c.error !== undefined) lease.release();
  };
}
