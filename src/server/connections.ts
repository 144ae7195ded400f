/**
 * The connections of `runplane serve`: Node's own error answers rewritten in the service's
 * JSON shape, listening, and closing connections without resetting a client at shutdown.
 *
 * @module
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Server as NetServer, type AddressInfo, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { HttpError } from './http-error.js';

const statusText: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  417: 'Expectation Failed',
  431: 'Request Header Fields Too Large',
};

/** A whole HTTP/1.1 error answer in the service's JSON shape, closing the connection. */
const rawErrorAnswer = (httpError: HttpError): string => {
  const body = JSON.stringify(httpError.toBody());
  return (
    `HTTP/1.1 ${httpError.status} ${statusText[httpError.status] ?? 'Error'}\r\n` +
    'content-type: application/json\r\n' +
    `content-length: ${Buffer.byteLength(body)}\r\n` +
    'connection: close\r\n\r\n' +
    body
  );
};

/**
 * Node answers a request it cannot parse (oversized headers, a malformed request line, a
 * header timeout) itself, with a bare status line. Answer those in the service's JSON error
 * shape instead, then close the connection.
 */
export function answerClientErrorsAsJson(server: Server): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const httpError =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? new HttpError('headers_too_large', 'expected request headers of at most 16 KiB')
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? new HttpError('request_timeout', 'the request did not arrive in time')
          : new HttpError('bad_request', 'expected a well-formed HTTP/1.1 request');
    socket.end(rawErrorAnswer(httpError));
  });
  // Node answers an `Expect` other than `100-continue` with a bare 417 unless someone listens.
  server.on('checkExpectation', (request: IncomingMessage, response: ServerResponse) => {
    const httpError = new HttpError(
      'expectation_failed',
      `expected no Expect header or \`Expect: 100-continue\`, got ${JSON.stringify(String(request.headers.expect).slice(0, 40))}`,
    );
    request.socket.end(rawErrorAnswer(httpError));
    response.destroy();
  });
}

/** What {@link missingHostAnswer} reads of a request (HTTP/1 and HTTP/2 requests have it). */
export interface RequestHead {
  readonly httpVersion: string;
  readonly headers: { readonly host?: string | undefined };
}

/**
 * The JSON answer to an HTTP/1.1 request without `Host` (RFC 9112 §3.2), which Node would
 * answer itself with a bare 400: the server is created with `requireHostHeader: false` and asks
 * this first.
 */
export function missingHostAnswer(incoming: RequestHead): Response | undefined {
  if (incoming.httpVersion !== '1.1' || incoming.headers.host !== undefined) return undefined;
  const httpError = new HttpError('bad_request', 'expected a Host header in an HTTP/1.1 request');
  return new Response(JSON.stringify(httpError.toBody()), {
    status: httpError.status,
    headers: { 'content-type': 'application/json', connection: 'close' },
  });
}

export function listen(server: Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve(server.address() as AddressInfo);
    });
  });
}

/** How long shutdown waits for answers still in progress once the drain ended, in ms. */
const answerDeadlineMs = 10_000;

/**
 * Stops accepting connections at once, and resolves once every connection has ended.
 *
 * @remarks `http.Server#close` would also close idle keep-alive connections at once (Node 19
 * and later), resetting a client that is about to reuse one; `net.Server#close` only stops the
 * listener, so those connections stay open to be answered (503 `shutting_down` with
 * `Connection: close` for new work) until the drain ends.
 */
export function stopListening(server: Server): Promise<void> {
  return new Promise((resolve) => {
    NetServer.prototype.close.call(server, () => resolve());
  });
}

/**
 * Counts the answers in progress (from a request's arrival until its response has closed) and
 * the open connections; once `closing()` was called, every answer says `Connection: close`.
 */
export function trackConnections(server: Server) {
  let answers = 0;
  let connections = 0;
  let closing = false;
  let onChange: (() => void) | undefined;
  server.on('connection', (socket: Socket) => {
    connections++;
    socket.once('close', () => {
      connections--;
      onChange?.();
    });
  });
  server.on('request', (_request, response: ServerResponse) => {
    answers++;
    if (closing) response.setHeader('Connection', 'close');
    response.once('close', () => {
      answers--;
      onChange?.();
    });
  });
  /** Resolves once `done()` holds (`true`), or after `ms` (`false`). */
  const until = (done: () => boolean, ms: number): Promise<boolean> => {
    if (done()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        onChange = undefined;
        resolve(false);
      }, ms);
      onChange = () => {
        if (!done()) return;
        clearTimeout(timer);
        onChange = undefined;
        resolve(true);
      };
    });
  };
  return {
    /** From now on every answer closes its connection. */
    closing() {
      closing = true;
    },
    /** Resolves once no answer is in progress, or after `ms`. */
    answered: (ms: number) => until(() => answers === 0, ms),
    /** Resolves once every connection has closed, or after `ms`. */
    disconnected: (ms: number) => until(() => connections === 0, ms),
  };
}

/**
 * Ends the connections once the drain is over: waits for every answer in progress (SSE
 * streams were ended, with their tails, before; at most {@link answerDeadlineMs}); then keeps
 * the idle connections for `lingerMs`, answering any request on them with `Connection: close`,
 * so that a client about to reuse one is answered, not reset; then closes what is left.
 */
export async function closeConnections(
  server: Server,
  tracker: ReturnType<typeof trackConnections>,
  lingerMs: number,
  ended: Promise<void>,
): Promise<void> {
  tracker.closing();
  await tracker.answered(answerDeadlineMs);
  if (lingerMs > 0) await tracker.disconnected(lingerMs);
  // http.Server#close: the listener is already closed; this stops Node's connection timer.
  server.close();
  server.closeAllConnections();
  await ended;
}
