/**
 * Limits on request bodies as Hono middleware: the largest body (413 `payload_too_large`).
 *
 * @module
 */
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { HttpError } from '../http-error.js';

/** Options of {@link bodyLimits}. */
export interface BodyLimitsOptions {
  /** The largest request body, in bytes; bigger is 413. */
  readonly maxBodyBytes: number;
}

/**
 * Middleware that bounds request bodies (Hono's `bodyLimit`, answering in the service's JSON
 * error shape).
 *
 * @param options - {@link BodyLimitsOptions}
 * @returns the middleware
 * @throws {@link HttpError} (`payload_too_large`) for a body over `maxBodyBytes`
 */
export function bodyLimits(options: BodyLimitsOptions): MiddlewareHandler {
  const { maxBodyBytes } = options;
  return bodyLimit({
    maxSize: maxBodyBytes,
    onError: () => {
      throw new HttpError('payload_too_large', `expected a body of at most ${maxBodyBytes} bytes`);
    },
  });
}
