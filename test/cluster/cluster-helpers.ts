/**
 * Cluster tests on a real private Redis: connections that are closed after the file, instances
 * on a fresh key prefix each (so tests never see each other's keys), and a wait that polls Redis
 * for a condition instead of sleeping.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach } from 'vitest';
import { SimulatedClock } from 'xstate';
import { createClusterInstance, type ClusterInstance } from '../../src/cluster/cluster-instance.js';
import type { ClusterInstanceOptions } from '../../src/cluster/cluster-options.js';
import { toSessionKeys, type SessionKeys } from '../../src/cluster/keys.js';
import type { RunplaneError } from '../../src/errors.js';
import type { SessionKey } from '../../src/events/event-log.js';
import { usePrivateRedis, type PrivateRedis } from '../redis/redis-server.js';

type InstanceOptions = Omit<ClusterInstanceOptions, 'redis'> & { redis?: Redis };

/** One test's world: a fresh key prefix, the session's keys, and instances that record losses. */
export interface ClusterScene {
  readonly keyPrefix: string;
  /** The keys of the scene's session. */
  readonly keys: SessionKeys;
  readonly admin: Redis;
  /** Every `onLost` error of the scene's instances, in order. */
  readonly lost: RunplaneError[];
  /** An instance named `instanceId` on the scene's prefix; its clock is simulated (still) unless given. */
  readonly instance: (
    instanceId: string,
    options?: Omit<InstanceOptions, 'instanceId'>,
  ) => ClusterInstance;
}

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
  /** A fresh scene around `key`'s session. */
  scene(key: SessionKey): ClusterScene;
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
  const harness: ClusterHarness = {
    server,
    connect,
    freshPrefix: () => `t${++prefixes}:`,
    instance(options) {
      const instance = createClusterInstance({ ...options, redis: options.redis ?? connect() });
      instances.push(instance);
      return instance;
    },
    admin: () => (admin ??= connect()),
    scene(key) {
      const keyPrefix = harness.freshPrefix();
      const lost: RunplaneError[] = [];
      return {
        keyPrefix,
        keys: toSessionKeys(key, keyPrefix),
        admin: harness.admin(),
        lost,
        instance: (instanceId, options = {}) =>
          harness.instance({
            instanceId,
            keyPrefix,
            clock: new SimulatedClock(),
            onLost: (_key, error) => lost.push(error),
            ...options,
          }),
      };
    },
  };
  return harness;
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
