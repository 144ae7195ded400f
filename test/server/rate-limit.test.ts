/**
 * The rate limit's bucket table: bounded by the owners active within one refill time, however
 * many owners an application's `authenticate` admits, and a sweep never forgives a bucket
 * that is still short.
 */
import { describe, expect, it } from 'vitest';
import { createBucketTable, minSweepSize } from '../../src/server/middleware/rate-limit.js';

describe('the bucket table', () => {
  it('stays bounded while a stream of new owners passes, one request each', () => {
    const table = createBucketTable({ perSecond: 10, burst: 20 }); // refills in 1.9 s
    let now = 0;
    let largest = 0;
    let refused = 0;
    for (let i = 0; i < 50_000; i++) {
      now += 1; // 1,000 new owners a second: about 1,900 are still refilling at any time
      if (table.take(`owner-${i}`, now) !== 0) refused++;
      largest = Math.max(largest, table.size);
    }
    expect(refused).toBe(0);
    expect(largest).toBeLessThanOrEqual(2 * 1_900 + 2);
    expect(largest).toBeGreaterThanOrEqual(minSweepSize);
  });

  it('keeps an owner that spent its burst limited across a sweep, and forgets a full one', () => {
    const table = createBucketTable({ perSecond: 1, burst: 2 });
    expect(table.take('alice', 0)).toBe(0);
    expect(table.take('alice', 0)).toBe(0);
    expect(table.take('alice', 0)).toBe(1_000);
    expect(table.take('carol', 0)).toBe(0); // carol will be full again at 1,000 ms
    for (let i = 0; i < minSweepSize; i++) table.take(`other-${i}`, 0);
    // The sweep at 500 ms drops nothing that is short: alice (0.5 tokens), carol (1.5),
    // and every other owner (1.5) are all below the burst.
    expect(table.take('sweeper-1', 500)).toBe(0);
    expect(table.size).toBe(minSweepSize + 3);
    expect(table.take('alice', 500)).toBe(500);
    // By 2,000 ms every bucket but alice's is full; the next sweep keeps only what is short.
    for (let i = table.size; i < 2 * (minSweepSize + 3); i++) table.take(`late-${i}`, 1_000);
    expect(table.take('sweeper-2', 1_999)).toBe(0);
    expect(table.size).toBeLessThan(minSweepSize + 10);
    expect(table.take('alice', 1_999)).toBe(0);
  });
});
