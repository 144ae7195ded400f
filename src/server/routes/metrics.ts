/**
 * `GET /metrics`: the server's Prometheus metrics in the text exposition format (README
 * "Observability"). Off unless `runplane serve` is given `--metrics-token` (on the main port,
 * behind that bearer token) or `--metrics-port` (a listener of its own).
 *
 * @module
 */
import type { Registry } from 'prom-client';
import { createHash, timingSafeEqual } from 'node:crypto';
import { bearerToken } from '../auth.js';

const json = (
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
) =>
  new Response(JSON.stringify({ error: { code, message } }), {
    status,
    headers: { 'content-type': 'application/json', ...headers },
  });

const digestOf = (token: string) => createHash('sha256').update(token).digest();

/**
 * Compares SHA-256 digests in constant time: both are 32 bytes whatever was sent, so neither
 * the comparison nor a length check tells a caller the token's length.
 */
const sameToken = (given: string, expected: Buffer): boolean =>
  timingSafeEqual(digestOf(given), expected);

/**
 * Creates the handler of `GET /metrics`.
 *
 * @param registry - what it renders
 * @param token - the bearer token a scrape must send; `undefined`: none (its own port)
 * @returns `fetch(request) → response`: 200 text (`Cache-Control: no-store`), 401 `unauthorized` (with
 *   `WWW-Authenticate`), 405 `method_not_allowed` (with `Allow`), 404 `not_found` for another
 *   path
 */
export function createMetricsHandler(
  registry: Registry,
  token: string | undefined,
): (request: Request) => Promise<Response> {
  const expected = token === undefined ? undefined : digestOf(token);
  return async (request) => {
    const { pathname } = new URL(request.url);
    if (pathname !== '/metrics') return json(404, 'not_found', 'no such route');
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      return json(405, 'method_not_allowed', `${request.method} is not allowed here`, {
        allow: 'GET, HEAD',
      });
    }
    if (expected !== undefined) {
      // The scheme is case-insensitive (RFC 9110), as for user tokens.
      const given = bearerToken(request.headers.get('authorization')) ?? '';
      if (!sameToken(given, expected)) {
        return json(401, 'unauthorized', 'a valid metrics bearer token is required', {
          'www-authenticate': 'Bearer realm="runplane-metrics"',
        });
      }
    }
    const body = await registry.metrics();
    return new Response(request.method === 'HEAD' ? null : body, {
      status: 200,
      // Numbers of this instant: no cache or proxy may serve them again.
      headers: { 'content-type': registry.contentType, 'cache-control': 'no-store' },
    });
  };
}
