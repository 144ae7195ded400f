/**
 * Who holds a session (README "Cluster"): `GET /api/sessions/:id` on any instance of
 * `runplane serve --redis` names the lease holder (instance id, fence, lease expiry as Unix ms
 * on Redis's clock), as Redis has it; `null` while nobody holds it. Real serve processes over a
 * real private Redis; every wait polls a condition.
 */
import { describe, expect, it } from 'vitest';
import { skipRedis } from '../redis/redis-server.js';
import { createSession, sendMessages, useServeCluster, waitFor } from './serve-cluster.js';

describe.skipIf(skipRedis)('the holder of a session', () => {
  const { cluster } = useServeCluster();

  it('is shown by every instance as Redis has it, null once the lease expired, and moves with it', async () => {
    const world = cluster();
    const [a, b] = await world.startMany(['a', 'b']);
    const sessionId = await createSession(a!);
    const redisMs = async () => {
      const [seconds, micros] = (await world.admin.time()) as [string | number, string | number];
      return Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
    };

    for (const node of [a!, b!]) {
      const before = await redisMs();
      const view = await node.api('GET', `/api/sessions/${sessionId}`);
      const after = await redisMs();
      expect(view.status).toBe(200);
      expect(view.body.holder).toEqual({
        instance_id: 'a',
        fence: 1,
        lease_expires_at: expect.any(Number) as unknown,
      });
      // A live lease: expiring after the read began, at most one TTL after it ended.
      const expiresAt = (view.body.holder as { lease_expires_at: number }).lease_expires_at;
      expect(expiresAt).toBeGreaterThan(before);
      expect(expiresAt).toBeLessThanOrEqual(after + world.leaseTtlMs);
    }
    expect((await world.lease(sessionId))?.instanceId).toBe('a');

    await a!.kill(); // its lease expires in Redis; nobody takes an idle session
    await waitFor(
      async () => ((await world.lease(sessionId)) === undefined ? true : undefined),
      'the lease expired',
    );
    expect((await b!.api('GET', `/api/sessions/${sessionId}`)).body.holder).toBeNull();

    await sendMessages(b!, sessionId, ['what is 2 + 3?']); // b takes the session
    const moved = await b!.api('GET', `/api/sessions/${sessionId}`);
    expect(moved.body.holder).toMatchObject({ instance_id: 'b', fence: 2 });
  });
});
