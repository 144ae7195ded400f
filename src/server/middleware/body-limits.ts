/**
 * Request bodies as Hono middleware: the largest body (413 `payload_too_large`), the time the
 * whole body may take to arrive (408 `request_timeout`), and the connection of a request whose
 * body was not read to its end (closed after the answer).
 *
 * @module
 */
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { HttpError } from '../http-error.js';

/**
 * Middleware that bounds the size of request bodies: Hono's `bodyLimit`, answering in the
 * service's JSON error shape.
 *
 * @param maxBodyBytes - the largest request body, in bytes
 * @returns the middleware
 * @throws {@link HttpError} (`payload_too_large`) for a body over `maxBodyBytes`
 */
export function bodySizeLimit(maxBodyBytes: number): MiddlewareHandler {
  return bodyLimit({
    maxSize: maxBodyBytes,
    onError: () => {
      throw new HttpError('payload_too_large', `expected a body of at most ${maxBodyBytes} bytes`);
    },
  });
}

/** Whether the request announces a body (a non-zero `Content-Length`, or chunks). */
const announcesBody = (headers: Headers): boolean =>
  headers.has('transfer-encoding') ||
  (headers.has('content-length') && headers.get('content-length')?.trim() !== '0');

/**
 * Middleware that holds request bodies to a read deadline and closes the connection of a
 * request whose body was not read to its end.
 *
 * @remarks
 * - The deadline starts when the request reaches the service and ends with the body's last
 *   byte; a body still arriving after `bodyTimeoutMs` fails its read with `request_timeout`.
 *   The clock is the wall clock: this is socket I/O, not run time.
 * - A body read that fails otherwise can only be the client's connection failing (a client
 *   that sent `Content-Length: 100`, 10 bytes, then closed): it is no error of the service, and
 *   becomes 499 `client_closed_request`, which nobody receives and nothing logs.
 * - An answer sent before the body was read to its end (a 413, a 401, a 408, a 404, ...) says
 *   `Connection: close`, and the connection closes after it: the unread rest of the body would
 *   otherwise be read as the next request, or the socket be dropped under a keep-alive client.
 *
 * @param bodyTimeoutMs - how long a body may take to arrive, in ms
 * @returns the middleware
 * @throws {@link HttpError} (`request_timeout`) from a body read past the deadline;
 *   (`client_closed_request`) from a body read whose connection closed mid-body
 */
export function bodyReadDeadline(bodyTimeoutMs: number): MiddlewareHandler {
  return async (c, next) => {
    const source = c.req.raw.body;
    if (source === null || !announcesBody(c.req.raw.headers)) return next();
    let readToEnd = false;
    const reader = source.getReader();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let timedOut = false;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        timer = setTimeout(() => {
          timedOut = true;
          const timeout = new HttpError(
            'request_timeout',
            `expected the request body within ${bodyTimeoutMs} ms`,
          );
          controller.error(timeout);
          reader.cancel(timeout).catch(() => undefined);
        }, bodyTimeoutMs);
        timer.unref?.();
      },
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (timedOut) return; // the stream already failed with request_timeout
          if (done) {
            readToEnd = true;
            clearTimeout(timer);
            controller.close();
          } else {
            controller.enqueue(value);
          }
        } catch {
          if (timedOut) return;
          clearTimeout(timer);
          controller.error(
            new HttpError(
              'client_closed_request',
              'the client closed its connection before its request body arrived',
            ),
          );
        }
      },
      cancel(reason) {
        clearTimeout(timer);
        return reader.cancel(reason);
      },
    });
    c.req.raw = new Request(c.req.raw, { body, duplex: 'half' } as RequestInit);
    try {
      await next();
    } finally {
      clearTimeout(timer);
    }
    if (!readToEnd) c.header('Connection', 'close');
  };
}
