/**
 * The hot option checks (`prepare`, `cancel`) skip zod for valid input through hand-written fast
 * paths. A fast path may refuse valid input (zod then parses it), but it must never accept what
 * the zod schema refuses: this holds them to that on random options, and checks that the usual
 * valid options do take the fast path.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cancelFastPath } from '../../src/run/agent-run.js';
import { isValidPrepare, prepareSchema } from '../../src/runtime/runtime-options.js';

const agent = { execute: (input: unknown) => Promise.resolve(input) };

/** Values of every kind the checks tell apart, valid and not. */
const anyValue = fc.oneof(
  fc.constantFrom(
    undefined,
    null,
    '',
    'x',
    0,
    -1,
    1.5,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    true,
    false,
    [],
    {},
    agent,
    { execute: 'not a function' },
    new AbortController().signal,
    'enqueue',
    'preempt',
    'bogus',
    3,
    4,
  ),
  fc.string(),
  fc.double(),
  fc.integer(),
);

/**
 * Options near `valid`: a few of `keys` set to any value (or removed), and sometimes an unknown
 * key, own or inherited. Mostly one field away from valid, where a wrong fast path shows.
 */
const optionsNear = (valid: Record<string, unknown>, keys: readonly string[]) =>
  fc
    .tuple(
      fc.dictionary(fc.constantFrom(...keys), fc.option(anyValue), { maxKeys: 2 }),
      fc.option(fc.constantFrom('typo', 'graceMS', '__proto__', 'constructor'), { freq: 4 }),
      fc.boolean(),
    )
    .map(([changes, extra, inherited]) => {
      const fields: Record<string, unknown> = { ...valid };
      for (const [key, value] of Object.entries(changes)) {
        if (value === null) delete fields[key];
        else fields[key] = value;
      }
      if (extra === null) return fields;
      if (!inherited) return { ...fields, [extra]: 1 };
      const withParent = Object.create({ [extra]: 1 }) as Record<string, unknown>;
      return Object.assign(withParent, fields);
    });

describe('option fast paths accept only what their zod schema accepts', () => {
  it('prepare', () => {
    const keys = Object.keys(prepareSchema.shape);
    const valid = { ownerId: 'u', sessionId: 's', agent, input: 1 };
    fc.assert(
      fc.property(fc.oneof(optionsNear(valid, keys), anyValue), (options) => {
        if (isValidPrepare(options)) expect(prepareSchema.safeParse(options).success).toBe(true);
      }),
      { numRuns: 5_000 },
    );
  });

  it('cancel', () => {
    const keys = Object.keys(cancelFastPath.schema.shape);
    fc.assert(
      fc.property(fc.oneof(optionsNear({}, keys), anyValue), (options) => {
        if (cancelFastPath.isValid(options)) {
          expect(cancelFastPath.schema.safeParse(options).success).toBe(true);
        }
      }),
      { numRuns: 5_000 },
    );
  });

  it('the usual valid options take the fast path', () => {
    const signal = new AbortController().signal;
    expect(isValidPrepare({ ownerId: 'u', sessionId: 's', agent, input: 1 })).toBe(true);
    expect(
      isValidPrepare({
        ownerId: 'u',
        sessionId: 's',
        agent,
        input: { text: 'hi' },
        timeoutMs: 1_000,
        graceMs: 0,
        strategy: 'interrupt',
        runId: 'r1',
        signal,
      }),
    ).toBe(true);
    expect(cancelFastPath.isValid({})).toBe(true);
    expect(
      cancelFastPath.isValid({ mode: 3, timeoutMs: 500, recursive: false, reason: 'stop' }),
    ).toBe(true);
    // What zod refuses, the fast path refuses too (zod then words the error).
    expect(isValidPrepare({ ownerId: 'u', sessionId: 's', agent, grace: 1 })).toBe(false);
    expect(cancelFastPath.isValid({ mode: 9 })).toBe(false);
  });
});
