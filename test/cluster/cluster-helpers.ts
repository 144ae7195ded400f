/**
 * Cluster tests on a real private Redis: connections that are closed after the file, instances
 * on a fresh key prefix each (so tests never see each other's keys), and a wait that polls Redis
 * for a condition instead of sleeping.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach } from 'vitest';
import { createClusterInstance, type ClusterInstance } from '../../src/cluster/cluster-instance.js';
import type { ClusterInstanceOptions } from '../../src/cluster/cluster-options.js';
import { usePrivateRedis, type PrivateRedis } from '../redis/redis-server.js';

export interface ClusterHarness {
  readonly server: () => PrivateRedis;
  /** A new connection to the private Redis, closed after the file. */
  connect(options?: { commandTimeout?: number }): Redis;
  /** A fresh key prefix: a test's instances share it, other tests never do. */
  freshPrefix(): string;
  /** An instance on its own connection (closed after the test). */
  instance(options: Omit<ClusterInstanceOptions, 'redis'> & { redis?: Redis }): ClusterInstance;
  /** A plain connection for the test's own checks. */
  admin(): Redis;
}

/** Call at the top of a `describe.skipIf(skipRedis)` block. */
export function useCluster(): ClusterHarness {
  const server = usePrivateRedis();
  const connections: Redis[] = [];
  let instances: ClusterInstance[] = [];
  let prefixes = 0;
  let admin: Redis | undefined;
  afterEach(async () => {
    await Promise.all(instances.map((instance) => instance.close()));
    instances = [];
  });
  afterAll(async () => {
    await Promise.all(connections.map((connection) => connection.quit().catch(() => undefined)));
  });
  const connect = (options: { commandTimeout?: number } = {}) => {
    const connection = new Redis(server().url, { ...options });
    connections.push(connection);
    return connection;
  };
  return {
    server,
    connect,
    freshPrefix: () => `t${++prefixes}:`,
    instance(options) {
      const instance = createClusterInstance({ ...options, redis: options.redis ?? connect() });
      instances.push(instance);
      return instance;
    },
    admin: () => (admin ??= connect()),
  };
}

/**
 * Polls `probe` (a Redis query) until it returns true; each poll is one round trip, so this waits
 * on Redis's own state (a key's expiry), never on a guessed duration.
 */
export async function pollUntil(
  probe: () => Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  const started = performance.now();
  while (!(await probe())) {
    if (performance.now() - started > timeoutMs) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5)); // paces the polls; decides nothing
  }
}
