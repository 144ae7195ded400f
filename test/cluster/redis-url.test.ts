/**
 * The `--redis` URL of a cluster instance: a URL without a host is refused (ioredis would take
 * it to mean 127.0.0.1:6379), and its password never reaches a log line or an error message.
 */
import { describe, expect, it } from 'vitest';
import { checkRedisUrl, redactRedisUrl } from '../../src/cluster/redis-url.js';
import { InvalidArgumentError } from '../../src/errors.js';

describe('the --redis URL', () => {
  it('redacts a password, and leaves a URL without one as it is', () => {
    expect(redactRedisUrl('redis://user:S3cretPW@127.0.0.1:6380/0')).toBe(
      'redis://user:***@127.0.0.1:6380/0',
    );
    expect(redactRedisUrl('redis://:S3cretPW@10.0.0.1/2')).toBe('redis://:***@10.0.0.1/2');
    expect(redactRedisUrl('redis://127.0.0.1:6380/0')).toBe('redis://127.0.0.1:6380/0');
    // Not a URL at all: the part between ':' and '@' is still hidden.
    expect(redactRedisUrl('redis://u:S3cretPW@[bad')).not.toContain('S3cretPW');
  });

  it('refuses a URL without a host, or with a path that is no db number, naming it redacted', () => {
    for (const url of ['redis://', 'redis:///0', 'redis://:S3cretPW@/0', 'http://h:1/0']) {
      expect(() => checkRedisUrl(url), url).toThrow(InvalidArgumentError);
    }
    expect(() => checkRedisUrl('redis://u:S3cretPW@h:1/x')).toThrow(/redis:\/\/u:\*\*\*@h:1\/x/);
    expect(checkRedisUrl('rediss://h:6380/3').hostname).toBe('h');
  });
});
