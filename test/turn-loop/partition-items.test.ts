import { describe, expect, it } from 'vitest';
import { partitionItems } from '../../src/turn-loop/partition-items.js';

describe('partitionItems', () => {
  it('splits offered items into consumed, remaining (in the answer’s order) and dropped (offered order)', () => {
    const plan = partitionItems(
      { input: 'x', consumed: ['c'], remaining: ['e', 'a'] },
      ['a', 'b', 'c', 'd', 'e'],
      'genInput',
    );
    expect(plan).toEqual({
      input: 'x',
      consumed: ['c'],
      remaining: ['e', 'a'],
      dropped: ['b', 'd'],
    });
  });

  it('matches by identity, each offered occurrence once', () => {
    const obj = { id: 1 };
    const plan = partitionItems(
      { input: 0, consumed: ['a', obj], remaining: ['a'] },
      ['a', obj, 'a', 'a'],
      'genInput',
    );
    expect(plan.dropped).toEqual(['a']);
    expect(() => partitionItems({ input: 0, consumed: [{ id: 1 }] }, [obj], 'genInput')).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'genInput().consumed' }),
    );
    expect(() =>
      partitionItems({ input: 0, consumed: ['a'], remaining: ['a'] }, ['a'], 'genResume'),
    ).toThrow(expect.objectContaining({ field: 'genResume().remaining' }));
  });

  it('refuses a malformed answer', () => {
    expect(() => partitionItems(undefined, [], 'genInput')).toThrow(
      expect.objectContaining({ field: 'genInput()' }),
    );
    expect(() => partitionItems({ input: 0, consumed: 'a' }, ['a'], 'genInput')).toThrow(
      expect.objectContaining({ field: 'genInput().consumed' }),
    );
    expect(partitionItems({ input: 0, consumed: [] }, ['a'], 'genInput').dropped).toEqual(['a']);
  });

  it('is linear: 100,000 offered items split (a quadratic match would time out)', () => {
    const offered = Array.from({ length: 100_000 }, (_, i) => i);
    const plan = partitionItems(
      { input: 0, consumed: offered.slice(0, 50_000), remaining: offered.slice(50_000) },
      offered,
      'genInput',
    );
    expect(plan.dropped).toEqual([]);
    expect(plan.remaining).toHaveLength(50_000);
  });
});
