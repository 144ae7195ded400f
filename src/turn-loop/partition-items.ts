/**
 * Checks a genInput / genResume answer against the items it was offered, and splits the
 * offered items into consumed, remaining and dropped.
 *
 * @module
 */
import type { TurnPlan } from '../../machines/turn-loop.types.js';
import { InvalidArgumentError } from '../errors.js';

const preview = (value: unknown): string => {
  try {
    return JSON.stringify(value)?.slice(0, 80) ?? String(value);
  } catch {
    return typeof value;
  }
};

/**
 * Splits `offered` by a genInput-style answer.
 *
 * @remarks Items are matched by identity (SameValueZero), each offered occurrence at most
 * once, so a value pushed twice can be consumed twice. `dropped` keeps the offered order.
 * Linear in the number of items.
 *
 * @param answer - what genInput / genResume returned: `{ input, consumed, remaining? }`
 * @param offered - the items it was given
 * @param source - `'genInput'` or `'genResume'`, for error messages
 * @returns the plan
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) naming `genInput().consumed` (or
 *   `remaining`) when an item was not offered or is listed twice, or the answer's shape is wrong
 */
export function partitionItems(
  answer: unknown,
  offered: readonly unknown[],
  source: 'genInput' | 'genResume',
): TurnPlan {
  if (typeof answer !== 'object' || answer === null) {
    throw new InvalidArgumentError(
      `${source}()`,
      `expected \`${source}()\` to return { input, consumed, remaining? }, got ${preview(answer)}`,
    );
  }
  const {
    input,
    consumed,
    remaining = [],
  } = answer as {
    input?: unknown;
    consumed?: unknown;
    remaining?: unknown;
  };
  for (const [field, value] of [
    ['consumed', consumed],
    ['remaining', remaining],
  ] as const) {
    if (!Array.isArray(value)) {
      throw new InvalidArgumentError(
        `${source}().${field}`,
        `expected \`${source}().${field}\` to be an array, got ${preview(value)}`,
      );
    }
  }
  const positions = new Map<unknown, { indexes: number[]; next: number }>();
  offered.forEach((item, index) => {
    const entry = positions.get(item);
    if (entry === undefined) positions.set(item, { indexes: [index], next: 0 });
    else entry.indexes.push(index);
  });
  const used = new Uint8Array(offered.length);
  const claim = (item: unknown, field: 'consumed' | 'remaining') => {
    const entry = positions.get(item);
    const index = entry?.indexes[entry.next];
    if (entry === undefined || index === undefined) {
      throw new InvalidArgumentError(
        `${source}().${field}`,
        `expected every item of \`${source}().${field}\` to be an item offered to ${source}, ` +
          `each listed once, got ${preview(item)}`,
      );
    }
    entry.next++;
    used[index] = 1;
  };
  for (const item of consumed as unknown[]) claim(item, 'consumed');
  for (const item of remaining as unknown[]) claim(item, 'remaining');
  return {
    input,
    consumed: [...(consumed as unknown[])],
    remaining: [...(remaining as unknown[])],
    dropped: offered.filter((_, index) => used[index] === 0),
  };
}
