/**
 * JSON-only request bodies as Hono middleware: a route that takes a body reads it here, once,
 * and finds it parsed in `c.var.body`.
 *
 * @module
 */
import type { MiddlewareHandler } from 'hono';
import { HttpError } from '../http-error.js';

/** `application/json` or a `+json` type such as `application/merge-patch+json`, any parameters. */
const isJsonMediaType = (contentType: string): boolean => {
  const essence = contentType.split(';', 1)[0]?.trim().toLowerCase() ?? '';
  return essence === 'application/json' || /^application\/[\w.+-]+\+json$/.test(essence);
};

/** Options of {@link jsonBody}. */
export interface JsonBodyOptions {
  /** What an empty (or blank) body stands for; without it an empty body is 400 `invalid_json`. */
  readonly emptyAs?: unknown;
}

/**
 * Middleware that reads the request body as JSON into `c.var.body`.
 *
 * @remarks A body sent as a form or as text is a client mistake, not JSON to guess at: a
 * non-blank body whose `Content-Type` is present and not JSON (`application/json` or a `+json`
 * type) is refused. A body without `Content-Type` is read as JSON.
 *
 * @param options - {@link JsonBodyOptions}
 * @returns the middleware
 * @throws {@link HttpError} (`unsupported_media_type`) for a body sent as another type;
 *   (`invalid_json`) for a body that is not JSON
 */
export function jsonBody(
  options: JsonBodyOptions = {},
): MiddlewareHandler<{ Variables: { body: unknown } }> {
  const { emptyAs } = options;
  return async (c, next) => {
    const text = await c.req.text();
    c.set('body', parseJsonText(text, c.req.header('content-type'), emptyAs));
    await next();
  };
}

function parseJsonText(text: string, type: string | undefined, emptyAs: unknown): unknown {
  const blank = text.trim() === '';
  if (blank && emptyAs !== undefined) return emptyAs;
  if (!blank && type !== undefined && !isJsonMediaType(type)) {
    throw new HttpError(
      'unsupported_media_type',
      `expected Content-Type application/json (or a +json type), got ${JSON.stringify(type)}`,
    );
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new HttpError(
      'invalid_json',
      blank ? 'expected a JSON body, got nothing' : 'expected the body to be JSON',
    );
  }
}
