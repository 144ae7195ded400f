/**
 * How a TurnLoop splits the items it offered by a genInput / genResume answer, compared with an
 * independent reference written from the README's rules ("TurnLoop": genInput answers
 * `{ input, consumed, remaining? }`) and `partitionItems`' contract: items match by identity
 * (SameValueZero), each offered occurrence at most once; a missing `remaining` means none; what is
 * neither consumed nor remaining is dropped, in the offered order; a malformed answer, an item not
 * offered or one listed once too often is an `InvalidArgumentError` (`INVALID_ARGUMENT`) naming
 * the field, with the message shape "expected `<field>` to …, got <value>". Random answers, well
 * and badly formed, over offered items with repeats.
 */
import fc from 'fast-check';
import { resolveRaceRuns } from '../../src/testing/index.js';
import { describe, expect, it } from 'vitest';
import { InvalidArgumentError } from '../../src/errors.js';
import { partitionItems } from '../../src/turn-loop/partition-items.js';

type Source = 'genInput' | 'genResume';

/** What the reference predicts: the plan, or the error's field and message. */
type Expected =
  | {
      readonly plan: {
        input: unknown;
        consumed: unknown[];
        remaining: unknown[];
        dropped: unknown[];
      };
    }
  | { readonly field: string; readonly message: string };

/** The value a message quotes: its JSON, at most 80 characters, else its `String`. */
function quoted(value: unknown): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch {
    return typeof value;
  }
  return json === undefined ? String(value) : json.slice(0, 80);
}

/** The reference: the rules above, written without `partitionItems`' index tables. */
function reference(answer: unknown, offered: readonly unknown[], source: Source): Expected {
  const expected = referencePlan(answer, offered, source);
  // A RunplaneError's message starts with its code.
  return 'message' in expected
    ? { ...expected, message: `INVALID_ARGUMENT: ${expected.message}` }
    : expected;
}

function referencePlan(answer: unknown, offered: readonly unknown[], source: Source): Expected {
  if (typeof answer !== 'object' || answer === null) {
    return {
      field: `${source}()`,
      message: `expected \`${source}()\` to return { input, consumed, remaining? }, got ${quoted(answer)}`,
    };
  }
  const record = answer as Record<string, unknown>;
  // Only a missing `remaining` means none (`null` is not an array).
  const lists = {
    consumed: record.consumed,
    remaining: record.remaining === undefined ? [] : record.remaining,
  };
  for (const field of ['consumed', 'remaining'] as const) {
    if (!Array.isArray(lists[field])) {
      return {
        field: `${source}().${field}`,
        message: `expected \`${source}().${field}\` to be an array, got ${quoted(lists[field])}`,
      };
    }
  }
  const left = offered.map((item) => ({ item, taken: false }));
  for (const field of ['consumed', 'remaining'] as const) {
    for (const item of lists[field] as unknown[]) {
      const slot = left.find((entry) => !entry.taken && Object.is(entry.item, item));
      if (slot === undefined) {
        return {
          field: `${source}().${field}`,
          message:
            `expected every item of \`${source}().${field}\` to be an item offered to ${source}, ` +
            `each listed once, got ${quoted(item)}`,
        };
      }
      slot.taken = true;
    }
  }
  return {
    plan: {
      input: record.input,
      consumed: [...(lists.consumed as unknown[])],
      remaining: [...(lists.remaining as unknown[])],
      dropped: left.filter((entry) => !entry.taken).map((entry) => entry.item),
    },
  };
}

/** What `partitionItems` did, in the reference's terms. */
function observed(answer: unknown, offered: readonly unknown[], source: Source): Expected {
  try {
    const plan = partitionItems(answer, offered, source);
    return {
      plan: {
        input: plan.input,
        consumed: [...plan.consumed],
        remaining: [...plan.remaining],
        dropped: [...plan.dropped],
      },
    };
  } catch (error) {
    if (!(error instanceof InvalidArgumentError) || error.code !== 'INVALID_ARGUMENT') throw error;
    return { field: error.field, message: error.message };
  }
}

const shared = { id: 'shared' };
/** A function has no JSON: a message quotes its source. */
const callback = () => 'item';
const item = fc.constantFrom<unknown>(
  'a',
  'b',
  'c',
  1,
  shared,
  { id: 'shared' },
  undefined,
  callback,
);

/** An answer built from the offered items (mostly valid), or a malformed one. */
const answerFor = (offered: readonly unknown[]): fc.Arbitrary<unknown> => {
  const pick = fc.subarray([...offered]);
  const list = fc.oneof(
    { weight: 4, arbitrary: pick },
    { weight: 1, arbitrary: fc.array(item, { maxLength: 3 }) }, // may name items not offered
    { weight: 1, arbitrary: pick.map((items) => [...items, ...items.slice(0, 1)]) }, // once too often
    { weight: 1, arbitrary: fc.constantFrom<unknown>('a', 7, null, { length: 1 }, 'x'.repeat(90)) },
  );
  return fc.oneof(
    { weight: 6, arbitrary: fc.record({ input: fc.anything(), consumed: list, remaining: list }) },
    { weight: 3, arbitrary: fc.record({ input: fc.anything(), consumed: list }) },
    { weight: 1, arbitrary: fc.constantFrom<unknown>(undefined, null, 3, 'consumed', [1]) },
  );
};

describe('TurnLoop item partition against an independent reference', () => {
  it('every genInput / genResume answer splits the offered items as the rules say, or names its fault', () => {
    const numRuns = resolveRaceRuns(200) * 5;
    fc.assert(
      fc.property(
        fc
          .array(item, { maxLength: 6 })
          .chain((offered) =>
            fc.tuple(
              fc.constant(offered),
              answerFor(offered),
              fc.constantFrom<Source>('genInput', 'genResume'),
            ),
          ),
        ([offered, answer, source]) => {
          const expected = reference(answer, offered, source);
          const seen = observed(answer, offered, source);
          if (!sameResult(seen, expected)) {
            throw new Error(
              `[partition-reference] ${source} offered ${quoted(offered)} answered ${quoted(answer)}: ` +
                `partitionItems gave ${describeResult(seen)}, the rules say ${describeResult(expected)}`,
            );
          }
        },
      ),
      { numRuns },
    );
  });

  it('a value that cannot be quoted as JSON is named by its type', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(observed({ input: 0, consumed: [cyclic] }, [], 'genInput')).toEqual(
      reference({ input: 0, consumed: [cyclic] }, [], 'genInput'),
    );
    expect(observed({ input: 0, consumed: cyclic }, [], 'genInput')).toMatchObject({
      message: 'INVALID_ARGUMENT: expected `genInput().consumed` to be an array, got object',
    });
  });
});

function sameResult(a: Expected, b: Expected): boolean {
  if ('plan' in a && 'plan' in b) {
    const same = (x: unknown[], y: unknown[]) =>
      x.length === y.length && x.every((value, index) => Object.is(value, y[index]));
    return (
      Object.is(a.plan.input, b.plan.input) &&
      same(a.plan.consumed, b.plan.consumed) &&
      same(a.plan.remaining, b.plan.remaining) &&
      same(a.plan.dropped, b.plan.dropped)
    );
  }
  return 'field' in a && 'field' in b && a.field === b.field && a.message === b.message;
}

function describeResult(result: Expected): string {
  return 'plan' in result
    ? `consumed ${quoted(result.plan.consumed)}, remaining ${quoted(result.plan.remaining)}, dropped ${quoted(result.plan.dropped)}`
    : `INVALID_ARGUMENT on ${result.field}: ${result.message}`;
}
