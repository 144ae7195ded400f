/**
 * Session leases with fencing on a real private Redis: grant, renew, release, a live lease
 * refused to a second instance, a larger fence after expiry, a refused renew and the local
 * deadline (on a simulated monotonic clock) both giving the session up at once.
 */
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import type { RunplaneError } from '../../src/errors.js';
import type { SessionKey } from '../../src/events/event-log.js';
import { skipRedis } from '../redis/redis-server.js';
import { pollUntil, useCluster } from './cluster-helpers.js';

const key: SessionKey = { ownerId: 'alice', sessionId: 's1' };
const reasons = (errors: RunplaneError[]) =>
  errors.map((error) => [error.code, (error as { reason?: string }).reason]);

describe.skipIf(skipRedis)('session leases', () => {
  const cluster = useCluster();

  it('grants with a fence, renews only its own lease, and releases by compare-and-delete', async () => {
    const { keys, admin, instance } = cluster.scene(key);
    const a = instance('A', { leaseTtlMs: 1_000 });
    expect(await a.acquire(key)).toEqual({ acquired: true, fence: 1 });
    expect(await admin.get(keys.lease)).toBe('A:1');
    expect(await admin.pttl(keys.lease)).toBeGreaterThan(0);
    expect(await a.acquire(key)).toEqual({ acquired: true, fence: 1 }); // held: same fence
    await admin.pexpire(keys.lease, 50);
    await a.renew();
    expect(await admin.pttl(keys.lease)).toBeGreaterThan(500);
    expect(await a.release(key)).toBe(true);
    expect(await admin.exists(keys.lease)).toBe(0);
    expect(await a.release(key)).toBe(false);
    expect(await a.acquire(key)).toEqual({ acquired: true, fence: 2 });
    expect(await admin.get(keys.fence)).toBe('2');
  });

  it('refuses a live lease to a second instance, and grants a larger fence once it expired', async () => {
    const { keys, admin, instance } = cluster.scene(key);
    // A's clock never moves: it neither renews nor reaches its deadline (a paused holder).
    const a = instance('A');
    const b = instance('B', { leaseTtlMs: 1_000 });
    expect(await a.acquire(key)).toEqual({ acquired: true, fence: 1 });
    expect(await b.acquire(key)).toEqual({ acquired: false, holder: 'A:1' });
    // The lease expires now (Redis's own expiry), not after a TTL the refusal above would race.
    await admin.pexpire(keys.lease, 1);
    await pollUntil(async () => (await admin.exists(keys.lease)) === 0, 'the lease to expire');
    expect(await b.acquire(key)).toEqual({ acquired: true, fence: 2 });
    expect(b.fenceOf(key)).toBe(2);
    expect(a.fenceOf(key)).toBe(1); // A still believes: only Redis can tell it otherwise
    expect(await a.release(key)).toBe(false); // compare-and-delete leaves B's lease alone
    expect(await admin.get(keys.lease)).toBe('B:2');
  });

  it('gives the session up at once when a renew is refused', async () => {
    const { keys, admin, lost, instance } = cluster.scene(key);
    const a = instance('A', { leaseTtlMs: 1_000 });
    await a.acquire(key);
    await admin.set(keys.lease, 'B:7'); // someone else's now
    await a.renew();
    expect(reasons(lost)).toEqual([['STALE_FENCE', 'renew_refused']]);
    expect(a.fenceOf(key)).toBeUndefined();
    expect(() => a.eventLog.append({}, key, { type: 'x', at: 1 })).toThrow(/STALE_FENCE.*not_held/);
    await expect(a.flushed(key)).rejects.toThrow(/STALE_FENCE/);
  });

  it('fences itself at its local deadline when no renew succeeded, without waiting for Redis', async () => {
    const { keys, admin, lost, instance } = cluster.scene(key);
    const clock = new SimulatedClock();
    const a = instance('A', { leaseTtlMs: 900, leaseMarginMs: 200, clock });
    await a.acquire(key); // at 0: deadline 0 + 900 − 200 = 700
    clock.increment(300); // the renew timer (every 300 ms) sends a renew
    await a.renew(); // joins that round: it succeeded, sent at 300 → deadline 1000
    clock.increment(600); // 900: past the first deadline, not the renewed one
    expect(lost).toEqual([]);
    await a.renew(); // sent at 900 → deadline 1600
    // Redis stops answering writes (a stalled server); renews now hang.
    await admin.call('CLIENT', 'PAUSE', '10000', 'WRITE');
    try {
      const stuck = a.renew(); // sent at 900, never answered while paused
      clock.increment(900); // 1800: no renew sent after 900 can have succeeded; the deadline fired
      expect(reasons(lost)).toEqual([['STALE_FENCE', 'deadline_passed']]);
      expect(a.fenceOf(key)).toBeUndefined();
      expect(() => a.eventLog.lastSeq({}, key)).toThrow(/STALE_FENCE/);
      await admin.call('CLIENT', 'UNPAUSE');
      await stuck; // the late reply (1) does not bring the lease back
      expect(a.fenceOf(key)).toBeUndefined();
      expect(lost).toHaveLength(1);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE');
    }
    expect(await admin.get(keys.lease)).toBe('A:1'); // Redis still names A until the TTL ends
  });

  it('gives the session up when asked for it past its deadline, before the overdue timer runs', async () => {
    const { keys, admin, lost, instance } = cluster.scene(key);
    // A clock whose time moves while its timers wait (a process woken from SIGSTOP: a request
    // may be read before the timers phase runs the overdue deadline).
    let now = 0;
    const timers: Array<() => void> = [];
    const clock = {
      now: () => now,
      setTimeout: (fn: () => void) => timers.push(fn),
      clearTimeout: () => undefined,
    };
    const a = instance('A', { leaseTtlMs: 900, leaseMarginMs: 200, clock });
    const b = instance('B', { leaseTtlMs: 900 });
    expect(await a.acquire(key)).toEqual({ acquired: true, fence: 1 }); // deadline 700
    await admin.pexpire(keys.lease, 1); // Redis expired it meanwhile
    await pollUntil(async () => (await admin.exists(keys.lease)) === 0, 'the lease to expire');
    expect(await b.acquire(key)).toMatchObject({ acquired: true, fence: 2 });
    now = 5_000; // woken: far past the deadline, no timer has run
    expect(await a.acquire(key)).toEqual({ acquired: false, holder: 'B:2' });
    expect(reasons(lost)).toEqual([['STALE_FENCE', 'deadline_passed']]);
    expect(a.fenceOf(key)).toBeUndefined();
  });
});
