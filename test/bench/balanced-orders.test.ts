import { describe, expect, it } from 'vitest';
import { balancedOrders } from '../../bench/interleave.js';

/** How often each ordered pair (a right before b) occurs within the rows. */
function adjacentPairs(rows: number[][]): Map<string, number> {
  const pairs = new Map<string, number>();
  for (const row of rows) {
    for (let k = 1; k < row.length; k++) {
      const key = `${row[k - 1]}→${row[k]}`;
      pairs.set(key, (pairs.get(key) ?? 0) + 1);
    }
  }
  return pairs;
}

describe('the bench interleaves its peers in a Williams design', () => {
  it.each([2, 3, 4, 5, 6, 7, 8])(
    'for %i peers every peer comes right after every other equally often, in every position equally often',
    (n) => {
      const rows = balancedOrders(n);
      expect(rows).toHaveLength(n % 2 === 0 ? n : 2 * n);
      for (const row of rows) expect([...row].sort((a, b) => a - b)).toEqual([...Array(n).keys()]);
      const times = n % 2 === 0 ? 1 : 2;
      const pairs = adjacentPairs(rows);
      expect(pairs.size).toBe(n * (n - 1));
      for (const count of pairs.values()) expect(count).toBe(times);
      for (let position = 0; position < n; position++) {
        const atPosition = rows.map((row) => row[position]!);
        for (let peer = 0; peer < n; peer++) {
          expect(atPosition.filter((p) => p === peer)).toHaveLength(times);
        }
      }
    },
  );

  it('a plain rotation, as before, put one peer after the same predecessor in every row', () => {
    // The defect the design removes: with rotation, peer 0 always follows peer n − 1.
    const n = 6;
    const rotation = Array.from({ length: n }, (_, r) =>
      Array.from({ length: n }, (_, k) => (r + k) % n),
    );
    const before0 = rotation.flatMap((row) =>
      row.flatMap((p, k) => (p === 0 && k > 0 ? [row[k - 1]] : [])),
    );
    expect(new Set(before0)).toEqual(new Set([n - 1]));
    const balanced = balancedOrders(n).flatMap((row) =>
      row.flatMap((p, k) => (p === 0 && k > 0 ? [row[k - 1]] : [])),
    );
    expect(new Set(balanced).size).toBe(n - 1);
  });
});
