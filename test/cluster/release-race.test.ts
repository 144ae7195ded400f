/**
 * A release of a session that overlaps an acquire of it on the same instance (the watch's idle
 * release while a request for the session arrives): the acquire answers `acquired`, so the
 * request's writes must be durable, not refused because the release finished after it.
 *
 * Found under the cluster bench: `release` awaited the outbox flush, an `acquire` meanwhile
 * found the lease and mirror still held and answered `acquired`, then the release stopped the
 * outbox (now an acquire waits for a release in progress, and takes the lease anew). Under `npm run bench cluster` (BENCH_CLUSTER_SESSIONS=300)
 * this answered `user.message` 503 `session_moved` 27 times with a single instance, and left
 * sessions whose next holder's batches hit `seq_conflict`.
 *
 * And a release overlapping a write the holder still owes (`owe`: the answer of a delete applied
 * from the command Stream): the release waits for it, so the answer is durable.
 */
import { describe, expect, it } from 'vitest';
import type { SessionKey } from '../../src/events/event-log.js';
import { skipRedis } from '../redis/redis-server.js';
import { useCluster } from './cluster-helpers.js';

const key: SessionKey = { ownerId: 'alice', sessionId: 's1' };

describe.skipIf(skipRedis)('release racing an acquire on one instance', () => {
  const cluster = useCluster();

  it('a write after an acquire that answered acquired during a release is durable', async () => {
    const { instance, admin, keys } = cluster.scene(key);
    const a = instance('A');
    await a.acquire(key);
    a.eventLog.append({}, key, { type: 'first', at: 1 });
    // The idle release starts (it waits for the outbox to flush) and a request arrives.
    const released = a.release(key);
    const grant = await a.acquire(key);
    expect(grant.acquired).toBe(true);
    a.eventLog.append({}, key, { type: 'second', at: 2 });
    const flushed = a.flushed(key).then(
      () => 'durable',
      (error: unknown) => String(error),
    );
    await released;
    expect(await flushed).toBe('durable');
    expect(await admin.get(keys.seq)).toBe('2');
  });

  it('a release waits for a write the holder still owes (a delete answered after its effect)', async () => {
    const { instance, admin, keys } = cluster.scene(key);
    const a = instance('A');
    await a.acquire(key);
    let settleDelete: () => void = () => undefined;
    const deleteSettled = new Promise<void>((resolve) => (settleDelete = resolve));
    // As the holder does for a `session.delete` from the command Stream: its answer is written
    // once the delete settles, later than the release that follows the delete.
    a.owe(
      key,
      deleteSettled.then(() => a.write(key, { op: 'meta.set', fields: { answered: 'yes' } })),
    );
    let releasedYet = false;
    const released = a.release(key).then((wasHeld) => ((releasedYet = true), wasHeld));
    // The release is held back: the lease stays, the session stays held here.
    await a.renew();
    expect(releasedYet).toBe(false);
    expect(a.fenceOf(key)).toBe(1);
    settleDelete();
    // Before the fix: the release stopped the outbox at once, and this write threw STALE_FENCE.
    expect(await released).toBe(true);
    expect(await admin.hget(keys.meta, 'answered')).toBe('yes');
    expect(await admin.exists(keys.lease)).toBe(0);
  });
});
