/**
 * Which errors mean "Redis cannot be reached now" (`redis-health.ts`, README "Cluster"): the
 * errors a real ioredis client gives against a port nobody listens on and against a real private
 * Redis, and the wrapping the cluster adds (`cause`). A script's runtime error is not one: it
 * stays a 500.
 */
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { isRedisUnavailable } from '../../src/cluster/redis-health.js';
import { RunplaneError } from '../../src/errors.js';
import { skipRedis, usePrivateRedis } from '../redis/redis-server.js';

/** A loopback port nobody listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** What `promise` rejected with (fails the test when it resolves). */
const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected a refusal');
    },
    (error: unknown) => error,
  );

describe('isRedisUnavailable', () => {
  it('knows a command given up after its retries, and a closed connection, wrapped or not', async () => {
    const redis = new Redis({ port: await closedPort(), maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    try {
      const error = await refusal(redis.get('k'));
      expect((error as Error).name).toBe('MaxRetriesPerRequestError');
      expect(isRedisUnavailable(error)).toBe(true);
      const wrapped = new RunplaneError('STORE_FAILED', 'a batch failed', { cause: error });
      expect(isRedisUnavailable(wrapped)).toBe(true);
    } finally {
      redis.disconnect();
    }
    const offline = new Redis({
      port: await closedPort(),
      enableOfflineQueue: false,
      lazyConnect: true,
    });
    expect(isRedisUnavailable(await refusal(offline.get('k')))).toBe(true);
    offline.disconnect();
  });

  it('says no to what is not about reaching Redis', () => {
    expect(isRedisUnavailable(new Error('boom'))).toBe(false);
    expect(isRedisUnavailable(new RunplaneError('STORE_FAILED', 'x'))).toBe(false);
    expect(isRedisUnavailable('ECONNREFUSED')).toBe(false);
    expect(isRedisUnavailable(undefined)).toBe(false);
  });
});

describe.skipIf(skipRedis)('isRedisUnavailable against a real Redis', () => {
  const server = usePrivateRedis();

  it("says no to a script's runtime error and a wrong type, yes to a Redis still loading", async () => {
    const redis = new Redis(server().url);
    try {
      const scriptError = await refusal(redis.eval("return redis.call('INCR', 'k', 'x')", 0));
      expect((scriptError as Error).name).toBe('ReplyError');
      expect(isRedisUnavailable(scriptError)).toBe(false);
      await redis.set('s', 'text');
      expect(isRedisUnavailable(await refusal(redis.lpush('s', 'x')))).toBe(false);
      // LOADING is what a Redis answers while it reads its dataset after a restart.
      const loading = await refusal(
        redis.eval("return redis.error_reply('LOADING Redis is loading the dataset in memory')", 0),
      );
      expect(isRedisUnavailable(loading)).toBe(true);
    } finally {
      await redis.quit();
    }
  });
});
