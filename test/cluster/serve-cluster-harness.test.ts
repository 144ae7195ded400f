/**
 * The process harness of the cluster tests (`serve-cluster.ts`), checked on the parts that need
 * no cluster wiring: instances started as real processes (on SQLite), followed over SSE,
 * paused, resumed and killed; and a session's lease, fence and Stream read from a real private
 * Redis, as an in-process cluster instance wrote them.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createClusterInstance } from '../../src/cluster/cluster-instance.js';
import { skipRedis } from '../redis/redis-server.js';
import {
  checkStream,
  createSession,
  interruptRun,
  sendMessages,
  useServeCluster,
  waitFor,
  waitForRunEnd,
} from './serve-cluster.js';

describe.skipIf(skipRedis)('the serve cluster harness', () => {
  const { cluster } = useServeCluster();

  it('starts instances as processes, follows SSE, and pauses, resumes and kills one', async () => {
    const [a] = await cluster().startMany(['a'], { cluster: false, chunkDelayMs: 20 });
    if (a === undefined) throw new Error('not started');
    const sessionId = await createSession(a);
    const follower = await a.follow(sessionId, { after: 0 });
    const [sent] = await sendMessages(a, sessionId, ['tell me a story']);
    const runId = sent?.run_id ?? '';
    await follower.until((e) => e.type === 'agent.message_delta', 'a first delta');

    // Frozen, the process answers nothing until it runs again; the kernel says it is stopped.
    a.pause();
    await waitFor(async () => (a.state() === 'T' ? true : undefined), 'the stopped state');
    const pending = a.api('GET', '/healthz');
    a.resume();
    await waitFor(async () => (a.state() !== 'T' ? true : undefined), 'the process to run');
    expect((await pending).status).toBe(200);

    expect(await interruptRun(a, sessionId, runId)).toMatchObject({ result: 'accepted' });
    expect((await waitForRunEnd(a, runId)).status).toBe('CANCELLED');
    await follower.until((e) => e.type === 'run.cancelled' && e.run_id === runId, 'the cancel');
    expect(follower.events.map((e) => e.seq)).toEqual(follower.events.map((_, i) => i + 1));
    expect(follower.lastEventId()).toBe(String(follower.events.at(-1)?.seq));
    follower.close();

    await a.kill();
    expect(await a.process.exited).toEqual({ code: null, signal: 'SIGKILL' });
  });

  it('reads a session lease, its fence and its Stream from Redis as an instance wrote them', async () => {
    const world = cluster();
    const key = { ownerId: world.ownerId, sessionId: 's1' };
    const redis = new Redis(world.redis.url);
    const instance = createClusterInstance({
      redis,
      instanceId: 'probe-1',
      keyPrefix: world.keyPrefix,
      leaseTtlMs: world.leaseTtlMs,
    });
    try {
      expect(await world.lease('s1')).toBeUndefined();
      expect(await world.fence('s1')).toBe(0);
      await instance.acquire(key);
      const lease = await world.lease('s1');
      expect(lease).toMatchObject({ instanceId: 'probe-1', fence: 1 });
      expect(lease?.ttlMs).toBeGreaterThan(0);
      expect(lease?.ttlMs).toBeLessThanOrEqual(world.leaseTtlMs);
      for (let i = 1; i <= 3; i++) {
        instance.eventLog.append({}, key, { type: `t${i}`, at: i, runId: 'r1' });
      }
      await instance.flushed(key);
      expect((await world.storedEvents('s1')).map((e) => [e.streamId, e.type, e.runId])).toEqual([
        ['1-0', 't1', 'r1'],
        ['2-0', 't2', 'r1'],
        ['3-0', 't3', 'r1'],
      ]);
      expect(await checkStream(world, 's1')).toEqual([]);
      // A gap is reported (written by hand, past every script).
      await world.admin.xadd(world.keys('s1').events, '5-0', 'e', '{"seq":5,"type":"x"}');
      expect(await checkStream(world, 's1')).toEqual([
        'entry 3 has seq 5, expected 4',
        'the seq key says 3, the Stream holds 4',
      ]);

      // Released, the lease is gone and the fence stays; the next grant has a newer fence.
      await instance.release(key);
      expect(await world.lease('s1')).toBeUndefined();
      expect(await world.fence('s1')).toBe(1);
      await instance.acquire(key);
      expect(await world.lease('s1')).toMatchObject({ instanceId: 'probe-1', fence: 2 });
    } finally {
      await instance.close();
      await redis.quit();
    }
  });
});
