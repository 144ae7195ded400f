/**
 * The error of a failed model call.
 *
 * @module
 */
import { RunplaneError } from '../errors.js';

/**
 * A model provider failed: an HTTP error answer, a broken connection, a stream cut short or
 * malformed, a reply that cannot be answered (two tool calls under one id). Code `MODEL_ERROR`.
 *
 * @remarks `status` is the HTTP status when the provider answered with one (429, 500, ...),
 * `undefined` for a connection that broke or a malformed stream. `cause` keeps the original
 * error.
 */
export class ModelError extends RunplaneError {
  /**
   * @param message - a human sentence, without the code
   * @param status - the HTTP status of the provider's answer, if any
   * @param options - `{ cause }`
   */
  constructor(
    message: string,
    readonly status: number | undefined,
    options?: { cause?: unknown },
  ) {
    super('MODEL_ERROR', message, options);
  }
}
