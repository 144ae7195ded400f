/**
 * The `--redis` URL of a cluster instance (README "Cluster"): its check and its form for logs.
 *
 * @module
 * @internal
 */
import { InvalidArgumentError } from '../errors.js';

/**
 * @internal `url` with its password, if any, replaced by `***` (for logs and errors).
 */
export function redactRedisUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password === '') return url;
    parsed.password = '***';
    return parsed.toString();
  } catch {
    return url.replace(/:[^:@/]*@/, ':***@');
  }
}

/**
 * @internal Checks a `--redis` URL: `redis://` or `rediss://`, a host, an optional port and db
 * number.
 *
 * @throws `InvalidArgumentError` (`INVALID_ARGUMENT`) otherwise (its password redacted); a URL
 *   without a host is refused, not taken to mean 127.0.0.1:6379
 */
export function checkRedisUrl(url: string): URL {
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    // reported below
  }
  if (
    parsed === undefined ||
    !/^rediss?:$/.test(parsed.protocol) ||
    parsed.hostname === '' ||
    !/^\/?\d*$/.test(parsed.pathname)
  ) {
    throw new InvalidArgumentError(
      'redis.url',
      `expected \`redis.url\` to be redis://host:port/<db number> (or rediss://), got ${JSON.stringify(redactRedisUrl(url))}`,
    );
  }
  return parsed;
}
