/**
 * A cluster access whose first SUBSCRIBE to its instance channel failed (in production: ioredis
 * flushing it after `maxRetriesPerRequest` reconnects while Redis was down at boot) subscribes
 * again on the next command once Redis takes it, instead of failing every command of the
 * instance until a restart. Real private Redis; the failure is a real refused command: the
 * subscriber connection has no offline queue, so its SUBSCRIBE sent before the connection is
 * up is refused.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import type { SessionKey } from '../../src/events/event-log.js';
import { skipRedis } from '../redis/redis-server.js';
import { useCluster } from './cluster-helpers.js';
import { createCommand, useClusterNodes } from './cluster-nodes.js';

const key: SessionKey = { ownerId: 'alice', sessionId: 's1' };

describe.skipIf(skipRedis)('cluster access: its channel subscription', () => {
  const cluster = useCluster();
  const makeNode = useClusterNodes();
  const subscribers: Redis[] = [];
  afterEach(() => {
    for (const subscriber of subscribers.splice(0)) subscriber.disconnect();
  });

  it('a failed first SUBSCRIBE is tried again by the next command', async () => {
    const redis = cluster.connect();
    const subscriber = new Redis(cluster.server().url, {
      lazyConnect: true,
      enableOfflineQueue: false,
    });
    subscriber.on('error', () => undefined);
    subscribers.push(subscriber);
    const up = new Promise<void>((resolve) => subscriber.once('ready', () => resolve()));
    redis.duplicate = () => subscriber;
    const node = makeNode(cluster.scene(key), 'A', { instance: { redis } });
    await expect(node.access.ready).rejects.toThrow(/enableOfflineQueue/);
    await up; // the connection the refused SUBSCRIBE started is up now
    await expect(node.access.execute(createCommand(key))).resolves.toMatchObject({
      session_id: 's1',
    });
    const channel = node.cluster.channelOf();
    expect(await cluster.admin().pubsub('NUMSUB', channel)).toEqual([channel, 1]);
  });
});
