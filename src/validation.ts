/**
 * Option validation on zod, with one error shape: `INVALID_ARGUMENT: expected \`name\` to be
 * <constraint>, got <value>`.
 *
 * @module
 */
import { z } from 'zod';
import { InvalidArgumentError } from './errors.js';

const show = (value: unknown): string => {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'function') return 'a function';
  if (value === undefined || value === null || typeof value !== 'object') return String(value);
  try {
    return JSON.stringify(value).slice(0, 80);
  } catch {
    return 'an object';
  }
};

/** A non-empty string field. */
export const nonEmptyString = z
  .string({ error: 'a non-empty string' })
  .min(1, { error: 'a non-empty string' });
/** A non-negative, finite number of milliseconds (longer than 2³¹−1 ms is fine: see systemClock). */
export const durationMs = z
  .number({ error: 'a non-negative number of milliseconds' })
  .finite({ error: 'a non-negative number of milliseconds' })
  .nonnegative({ error: 'a non-negative number of milliseconds' });

/**
 * Parses `value` with `schema`, throwing {@link InvalidArgumentError} for the first issue.
 *
 * @param isValid - optional fast path for the hot calls (`prepare`, `cancel`): a hand-written
 *   check that accepts only what `schema` accepts (a test holds it to that), so valid input skips
 *   zod and returns `value` itself; anything it refuses goes through zod for the message
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) naming the field
 */
export function parseOptions<T>(
  schema: z.ZodType<T>,
  value: unknown,
  name: string,
  isValid?: (value: unknown) => value is T,
): T {
  if (isValid?.(value) === true) return value;
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (issue?.code === 'unrecognized_keys') {
    const field = [...issue.path.map(String), issue.keys[0] ?? '?'].join('.');
    throw new InvalidArgumentError(field, `unknown option \`${field}\` (a typo?)`);
  }
  const path = issue?.path.map(String).join('.') || name;
  let got: unknown = value;
  for (const part of issue?.path ?? []) {
    got =
      got !== null && typeof got === 'object'
        ? (got as Record<PropertyKey, unknown>)[part]
        : undefined;
  }
  // zod's own wording for a non-object where an object belongs reads badly: say it plainly.
  const expected =
    issue?.code === 'invalid_type' && issue.expected === 'object'
      ? 'an object'
      : (issue?.message ?? 'valid');
  throw new InvalidArgumentError(path, `expected \`${path}\` to be ${expected}, got ${show(got)}`);
}

/** A value that has every one of `methods` as a function (a store, a clock…). */
/** @internal Whether `value` is a string of at least one character (as {@link nonEmptyString}). */
export const isNonEmptyString = (value: unknown): value is string =>
  typeof value === 'string' && value.length > 0;

/** @internal Whether `value` is absent or a valid {@link durationMs}. */
export const isOptionalDurationMs = (value: unknown): value is number | undefined =>
  value === undefined || (typeof value === 'number' && Number.isFinite(value) && value >= 0);

/**
 * @internal Whether `value` is an object (not an array) whose enumerable keys, inherited ones
 * included, are all in `allowed`: the checks of a `z.strictObject` before its fields.
 */
export function isStrictObjectOf(value: unknown, allowed: ReadonlySet<string>): value is object {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  // for…in, as zod walks the keys: inherited enumerable keys are unknown keys too.
  for (const key in value) if (!allowed.has(key)) return false;
  return true;
}

export function withMethods<T>(methods: readonly string[], description: string) {
  return z.custom<T>(
    (value) =>
      typeof value === 'object' &&
      value !== null &&
      methods.every((m) => typeof (value as Record<string, unknown>)[m] === 'function'),
    { error: description },
  );
}
