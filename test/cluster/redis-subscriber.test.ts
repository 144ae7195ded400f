/**
 * A tail watcher subscribes its shared pub/sub connection on a real private Redis without ever
 * sending SUBSCRIBE mid-handshake: a second session followed while the connection is still in
 * ioredis's `connect` status (TCP up, handshake not done) used to fail every pending subscribe
 * (ioredis issue #2037), which surfaced as an SSE `store_failed` on a fresh instance.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { resolveClusterOptions } from '../../src/cluster/cluster-options.js';
import { toSessionKeys } from '../../src/cluster/keys.js';
import { subscribeAfterHandshake } from '../../src/cluster/redis-subscriber.js';
import { createTailWatcher } from '../../src/cluster/tail-watcher.js';
import { skipRedis, usePrivateRedis } from '../redis/redis-server.js';

describe.skipIf(skipRedis)('subscribing a pub/sub connection', () => {
  const server = usePrivateRedis();
  const connections: Redis[] = [];
  afterEach(() => {
    for (const connection of connections.splice(0)) connection.disconnect();
  });
  const connect = () => {
    const connection = new Redis(server().url, { maxRetriesPerRequest: 1 });
    connection.on('error', () => undefined);
    connections.push(connection);
    return connection;
  };
  /** Resolves at the `connect` event: TCP is up, ioredis's handshake is not done yet. */
  const midHandshake = (connection: Redis) =>
    new Promise<void>((resolve) => connection.once('connect', () => resolve()));
  const subscribersOf = async (admin: Redis, ...channels: string[]) =>
    ((await admin.pubsub('NUMSUB', ...channels)) as Array<string | number>).filter(
      (_, i) => i % 2 === 1,
    );

  it('subscribes a connection caught mid-handshake once its handshake is done', async () => {
    const connection = connect();
    const first = subscribeAfterHandshake(connection, 'one');
    await midHandshake(connection);
    expect(connection.status).toBe('connect');
    const second = subscribeAfterHandshake(connection, 'two');
    await expect(Promise.all([first, second])).resolves.toEqual([undefined, undefined]);
    expect(await subscribersOf(connect(), 'one', 'two')).toEqual([1, 1]);
  });

  it('waits on one listener pair however many channels wait for the same handshake', async () => {
    const connection = connect();
    const listeners = () => connection.listenerCount('ready') + connection.listenerCount('close');
    await midHandshake(connection);
    expect(connection.status).toBe('connect');
    const before = listeners();
    const channels = Array.from({ length: 12 }, (_, i) => `c${i}`);
    const subscribed = channels.map((channel) => subscribeAfterHandshake(connection, channel));
    // A pair per waiting channel went past Node's 10-listener warning (MaxListenersExceeded).
    expect(listeners() - before).toBe(2);
    await expect(Promise.all(subscribed)).resolves.toHaveLength(12);
    expect(listeners()).toBeLessThanOrEqual(before);
    expect(await subscribersOf(connect(), ...channels)).toEqual(channels.map(() => 1));
  });

  it('lets a tail watcher follow a second session while its connection is still connecting', async () => {
    const redis = connect();
    await new Promise<void>((resolve) => redis.once('ready', () => resolve()));
    // The watcher's subscriber connection is the one `duplicate` makes: caught here.
    let subscriber: Redis | undefined;
    const duplicate = redis.duplicate.bind(redis);
    redis.duplicate = (...args: Parameters<Redis['duplicate']>) => {
      subscriber = duplicate(...args);
      connections.push(subscriber);
      return subscriber;
    };
    const options = resolveClusterOptions({ redis, clock: new SimulatedClock() });
    const watcher = createTailWatcher(options);
    const keys = (sessionId: string) =>
      toSessionKeys({ ownerId: 'alice', sessionId }, options.keyPrefix);
    const first = watcher.watch(keys('s1'));
    await midHandshake(subscriber!);
    const second = watcher.watch(keys('s2'));
    // Before the fix the second SUBSCRIBE went out mid-handshake and both were rejected.
    await expect(Promise.all([first.ready, second.ready])).resolves.toEqual([undefined, undefined]);
    expect(await subscribersOf(connect(), keys('s1').tailChannel, keys('s2').tailChannel)).toEqual([
      1, 1,
    ]);
    first.release();
    second.release();
    await watcher.close();
  });
  it('lets the next follower of a session subscribe again after a failed SUBSCRIBE, while the first still holds it', async () => {
    const redis = connect();
    // The watcher's subscriber: no offline queue, so the SUBSCRIBE sent before it is up is
    // really refused (in production: ioredis giving up while Redis is out of reach).
    const subscriber = new Redis(server().url, { lazyConnect: true, enableOfflineQueue: false });
    subscriber.on('error', () => undefined);
    connections.push(subscriber);
    const up = new Promise<void>((resolve) => subscriber.once('ready', () => resolve()));
    redis.duplicate = () => subscriber;
    const options = resolveClusterOptions({ redis, clock: new SimulatedClock() });
    const watcher = createTailWatcher(options);
    const keys = toSessionKeys({ ownerId: 'alice', sessionId: 's1' }, options.keyPrefix);
    const first = watcher.watch(keys);
    await expect(first.ready).rejects.toThrow(/enableOfflineQueue/);
    void subscriber.connect().catch(() => undefined);
    await up;
    // Before the fix the session kept the failed SUBSCRIBE while any follower held it.
    const second = watcher.watch(keys);
    await expect(second.ready).resolves.toBeUndefined();
    expect(await subscribersOf(connect(), keys.tailChannel)).toEqual([1]);
    first.release();
    second.release();
    await watcher.close();
  });
});
