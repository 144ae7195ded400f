/**
 * `run.cancel(options)` beyond the modes: values that are not a cancel mode, `recursive` given
 * explicitly and `reason`, compared step by step with the same independent reference model as the
 * merge (test/model/cancel-reference.ts). A mode that is not `Immediate` (0) or an OR of the two
 * safe-point bits (1–3) is refused with INVALID_ARGUMENT whatever the run's state; an explicit
 * `recursive: true` on a pending safe-point cancel contributes; the first reason is the one the
 * outcome keeps, and a first reason contributes.
 */
import fc from 'fast-check';
import { resolveRaceRuns } from '../../src/testing/index.js';
import { describe, expect, it } from 'vitest';
import { CancelMode } from '../../machines/cancel-request.js';
import type { CancelStep } from './cancel-reference.js';
import { divergence, otherSteps } from './cancel-replay.js';

const cancelStep: fc.Arbitrary<CancelStep> = fc.record(
  {
    kind: fc.constant('cancel' as const),
    mode: fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom<unknown>(0, 1, 2, 3) },
      { weight: 1, arbitrary: fc.constantFrom<unknown>(-1, 4, 7, 1.5, Number.NaN, '1', null) },
    ),
    timeoutMs: fc.constantFrom(undefined, 5, 20),
    recursive: fc.boolean(),
    reason: fc.constantFrom('user asked', 'stale'),
  },
  { requiredKeys: ['kind', 'mode', 'timeoutMs'] },
);

describe('cancel options against the independent reference model', () => {
  it('invalid modes, explicit recursive and reasons: every step matches the model', async () => {
    const numRuns = resolveRaceRuns(200);
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof({ weight: 3, arbitrary: cancelStep }, ...otherSteps), {
          minLength: 1,
          maxLength: 10,
        }),
        async (steps) => {
          const found = await divergence(steps);
          if (found !== undefined) throw new Error(found);
        },
      ),
      { numRuns },
    );
  }, 60_000);

  it('each boundary of the cancel modes: 0 and 3 are taken, -1 and 4 refused', async () => {
    for (const mode of [CancelMode.Immediate, CancelMode.AnySafePoint, -1, 4]) {
      expect(await divergence([{ kind: 'cancel', mode, timeoutMs: undefined }])).toBeUndefined();
    }
  });
});
