/**
 * The cluster's dev token on a real private Redis: instances starting together on one prefix
 * get one token; another prefix is another cluster; a stored value that is no token is refused.
 */
import { describe, expect, it } from 'vitest';
import { getRedisDevToken, toDevTokenKey } from '../../src/cluster/redis-dev-token.js';
import { skipRedis } from '../redis/redis-server.js';
import { useCluster } from './cluster-helpers.js';

describe.skipIf(skipRedis)('the cluster dev token', () => {
  const cluster = useCluster();

  it('is one token for every instance on a prefix, written once', async () => {
    const keyPrefix = cluster.freshPrefix();
    // Three instances, each on its own connection, starting at once.
    const tokens = await Promise.all(
      [1, 2, 3].map(() => getRedisDevToken({ redis: cluster.connect(), keyPrefix })),
    );
    expect(tokens[0]).toMatch(/^rp_dev_\S{32}$/);
    expect(new Set(tokens).size).toBe(1);
    expect(await cluster.admin().get(toDevTokenKey(keyPrefix))).toBe(tokens[0]);
    // A later start (a restart) gets the same one.
    expect(await getRedisDevToken({ redis: cluster.connect(), keyPrefix })).toBe(tokens[0]);
    const other = await getRedisDevToken({
      redis: cluster.admin(),
      keyPrefix: cluster.freshPrefix(),
    });
    expect(other).not.toBe(tokens[0]);
  });

  it('refuses a stored value that is no token, and a bad prefix', async () => {
    const keyPrefix = cluster.freshPrefix();
    await cluster.admin().set(toDevTokenKey(keyPrefix), 'two words');
    await expect(getRedisDevToken({ redis: cluster.admin(), keyPrefix })).rejects.toThrow(
      /STORE_FAILED: dev token: .*dev-token does not hold a token/,
    );
    await expect(getRedisDevToken({ redis: cluster.admin(), keyPrefix: '{x}' })).rejects.toThrow(
      /INVALID_ARGUMENT/,
    );
  });
});
