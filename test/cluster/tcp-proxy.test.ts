/**
 * The in-test TCP proxy that cuts an instance off Redis, checked against a real private
 * `redis-server` through ioredis, as the cluster tests use it.
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { skipRedis, usePrivateRedis } from '../redis/redis-server.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

describe.skipIf(skipRedis)('the TCP proxy between an instance and Redis', () => {
  const redis = usePrivateRedis();
  const open: Array<{ close(): unknown }> = [];
  afterEach(async () => {
    for (const item of open.splice(0).reverse()) await item.close();
  });

  async function proxied(): Promise<{ proxy: TcpProxy; client: Redis }> {
    const proxy = await startTcpProxy(redis().port);
    open.push(proxy);
    const client = new Redis({ port: proxy.port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    // A cut connection is reported as an 'error' event; the tests look at commands instead.
    client.on('error', () => undefined);
    open.push({ close: () => client.disconnect() });
    return { proxy, client };
  }

  it('forwards both ways while open', async () => {
    const { proxy, client } = await proxied();
    await client.set('tcp-proxy:open', 'yes');
    expect(await client.get('tcp-proxy:open')).toBe('yes');
    expect(proxy.accepted()).toBe(1);
  });

  it('holds commands while black-holed and delivers them, in order, at heal', async () => {
    const { proxy, client } = await proxied();
    await client.ping();
    proxy.blackhole();
    let answered = false;
    const pending = client.incr('tcp-proxy:held').then((value) => {
      answered = true;
      return value;
    });
    // Redis itself, reached directly, has not seen the held command.
    const direct = new Redis(redis().port, '127.0.0.1');
    open.push({ close: () => direct.disconnect() });
    expect(await direct.get('tcp-proxy:held')).toBeNull();
    expect(answered).toBe(false);
    proxy.heal();
    expect(await pending).toBe(1);
    expect(await direct.get('tcp-proxy:held')).toBe('1');
  });

  it('drops open connections and refuses new ones when reset, until healed', async () => {
    const { proxy, client } = await proxied();
    await client.ping();
    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()));
    proxy.reset();
    await closed;
    const refused = new Redis({
      port: proxy.port,
      host: '127.0.0.1',
      lazyConnect: true,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
    });
    const errors: Error[] = [];
    refused.on('error', (error: Error) => errors.push(error));
    open.push({ close: () => refused.disconnect() });
    await expect(refused.connect().then(() => refused.ping())).rejects.toThrow();
    proxy.heal();
    const healed = new Redis({ port: proxy.port, host: '127.0.0.1' });
    open.push({ close: () => healed.disconnect() });
    expect(await healed.ping()).toBe('PONG');
  });
});
