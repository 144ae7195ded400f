/**
 * HTTP errors of the service: every error answer is JSON `{ error: { code, message, ... } }`
 * with a stable snake_case `code`.
 *
 * @module
 */
import { HistoryTooLargeError, RunplaneError } from '../errors.js';

/** The `code` of an error answer. */
export type HttpErrorCode =
  | 'unauthorized'
  | 'not_found'
  | 'method_not_allowed'
  | 'invalid_json'
  | 'invalid_body'
  | 'invalid_event'
  | 'invalid_run_id'
  | 'invalid_query'
  | 'invalid_last_event_id'
  | 'payload_too_large'
  | 'history_too_large'
  | 'unsupported_media_type'
  | 'too_many_streams'
  | 'too_many_hints'
  | 'session_busy'
  | 'session_queue_full'
  | 'invalid_idempotency_key'
  | 'idempotency_key_reused'
  | 'idempotency_key_in_progress'
  | 'too_many_idempotency_keys'
  | 'too_many_sessions'
  | 'too_many_runs'
  | 'rate_limited'
  | 'shutting_down'
  | 'store_failed'
  | 'store_unavailable'
  | 'session_moved'
  | 'command_timeout'
  | 'request_timeout'
  | 'client_closed_request'
  | 'headers_too_large'
  | 'bad_request'
  | 'expectation_failed'
  | 'internal';

/** The HTTP status each {@link HttpErrorCode} is answered with. */
export const statusOfCode: Readonly<
  Record<
    HttpErrorCode,
    400 | 401 | 404 | 405 | 408 | 409 | 413 | 415 | 417 | 422 | 429 | 431 | 499 | 500 | 503 | 504
  >
> = {
  unauthorized: 401,
  not_found: 404,
  method_not_allowed: 405,
  invalid_json: 400,
  invalid_body: 400,
  invalid_event: 400,
  invalid_run_id: 400,
  invalid_query: 400,
  invalid_last_event_id: 400,
  payload_too_large: 413,
  // A write would pass a bound of the stored conversation history (a cluster's, on Redis).
  history_too_large: 413,
  unsupported_media_type: 415,
  too_many_streams: 429,
  too_many_hints: 429,
  session_busy: 409,
  session_queue_full: 429,
  invalid_idempotency_key: 400,
  idempotency_key_reused: 422,
  idempotency_key_in_progress: 409,
  too_many_idempotency_keys: 429,
  too_many_sessions: 429,
  too_many_runs: 429,
  rate_limited: 429,
  shutting_down: 503,
  store_failed: 500,
  // The shared store (a cluster's Redis) cannot be reached now: retry after `Retry-After`.
  store_unavailable: 503,
  // A cluster's: the session's lease moved while the command was applied, or its holder did
  // not answer in time. Either way the outcome is unknown: read the session, then retry.
  session_moved: 503,
  command_timeout: 504,
  request_timeout: 408,
  // nginx's status for a client that went away before its request was read: nobody sees it.
  client_closed_request: 499,
  headers_too_large: 431,
  bad_request: 400,
  expectation_failed: 417,
  internal: 500,
};

/**
 * An error the service answers with; thrown inside handlers, turned into a JSON response by
 * the app's error handler.
 *
 * @remarks `details` are extra fields of the `error` object (e.g. `active_run_id`, `events`);
 * `extra` are extra top-level fields of the body (e.g. the `results` applied before a 409).
 */
export class HttpError extends Error {
  /**
   * @param code - the {@link HttpErrorCode}; it fixes the status
   * @param message - a human sentence
   * @param details - extra fields of the `error` object
   * @param extra - extra top-level fields of the body
   */
  constructor(
    readonly code: HttpErrorCode,
    message: string,
    readonly details: Readonly<Record<string, unknown>> = {},
    readonly extra: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
    this.name = 'HttpError';
  }

  /** The HTTP status. */
  get status(): number {
    return statusOfCode[this.code];
  }

  /** The JSON body. */
  toBody(): Record<string, unknown> {
    return { error: { code: this.code, message: this.message, ...this.details }, ...this.extra };
  }

  /**
   * The error as JSON-safe data, for a command's refusal that travels between instances
   * (docs/architecture.md, "Cluster on Redis"); {@link HttpError.fromData} reads it back.
   *
   * @returns `{ code, message, details, extra }`
   */
  toData(): HttpErrorData {
    return { code: this.code, message: this.message, details: this.details, extra: this.extra };
  }

  /**
   * Reads back {@link HttpError.toData}, e.g. after `JSON.parse`: the same status and body.
   *
   * @param data - what `toData` gave (any JSON is accepted)
   * @returns the error; data that is not an error's (an unknown `code`, a missing message) is
   *   `internal`, never a throw
   */
  static fromData(data: unknown): HttpError {
    const fields = isRecord(data) ? data : {};
    const { code, message, details, extra } = fields;
    if (
      typeof code !== 'string' ||
      !Object.hasOwn(statusOfCode, code) ||
      typeof message !== 'string'
    ) {
      return new HttpError('internal', 'an internal error occurred');
    }
    return new HttpError(
      code as HttpErrorCode,
      message,
      isRecord(details) ? details : {},
      isRecord(extra) ? extra : {},
    );
  }
}

/** An {@link HttpError} as JSON-safe data ({@link HttpError.toData}). */
export interface HttpErrorData {
  readonly code: HttpErrorCode;
  readonly message: string;
  readonly details: Readonly<Record<string, unknown>>;
  readonly extra: Readonly<Record<string, unknown>>;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Maps any thrown value to an {@link HttpError}: a `RunplaneError` by its code, anything else
 * to `internal` (a bug: reported, never shown in detail). `HISTORY_TOO_LARGE` is 413
 * `history_too_large` naming the bound passed: `limit` (`append` or `history`), `max_bytes`
 * and `bytes`.
 *
 * @param error - what was thrown
 * @returns the error to answer with
 */
export function toHttpError(error: unknown): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof RunplaneError) {
    switch (error.code) {
      case 'SHUTTING_DOWN':
        return new HttpError('shutting_down', 'the service is shutting down and takes no new work');
      case 'SESSION_BUSY':
        return new HttpError('session_busy', error.message, {
          active_run_id: (error as { activeRunId?: string }).activeRunId ?? null,
        });
      case 'SESSION_QUEUE_FULL':
        return new HttpError('session_queue_full', error.message);
      case 'STORE_FAILED':
        return new HttpError('store_failed', error.message);
      case 'INVALID_ARGUMENT':
        return new HttpError('invalid_body', error.message);
      case 'NOT_FOUND':
        return new HttpError('not_found', error.message);
      case 'STALE_FENCE':
        return new HttpError(
          'session_moved',
          'the session moved to another instance while the request was applied; its outcome is unknown: read the session before retrying',
        );
      case 'COMMAND_TIMEOUT':
        return new HttpError('command_timeout', error.message);
      case 'HISTORY_TOO_LARGE':
        return new HttpError(
          'history_too_large',
          error.message,
          error instanceof HistoryTooLargeError
            ? { limit: error.limit, max_bytes: error.maxBytes, bytes: error.bytes }
            : {},
        );
      default:
        break;
    }
  }
  return new HttpError('internal', 'an internal error occurred');
}
