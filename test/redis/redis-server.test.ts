import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { skipRedis, usePrivateRedis } from './redis-server.js';

describe.skipIf(skipRedis)('the private redis-server of a test file', () => {
  const redis = usePrivateRedis();
  const clients: Redis[] = [];
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.quit()));
  });

  it('is Redis 7 on its own port, empty, with persistence off, and runs Lua atomically', async () => {
    const client = new Redis(redis().url, { lazyConnect: true });
    clients.push(client);
    await client.connect();
    expect(redis().port).not.toBe(6379);
    const info = await client.info('server');
    expect(info).toMatch(/redis_version:7\./);
    expect(await client.dbsize()).toBe(0);
    expect(await client.config('GET', 'save')).toEqual(['save', '']);
    // INCR and SET in one script: the shape every fenced lease grant takes.
    const granted = await client.eval(
      "local f = redis.call('INCR', KEYS[2]); redis.call('SET', KEYS[1], ARGV[1] .. ':' .. f, 'PX', ARGV[2]); return f",
      2,
      'lease',
      'fence',
      'i1',
      '60000',
    );
    expect(granted).toBe(1);
    expect(await client.get('lease')).toBe('i1:1');
    expect(await client.pttl('lease')).toBeGreaterThan(0);
  });
});
