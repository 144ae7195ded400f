/**
 * The cancel merge of a real run, compared step by step with an independent reference model
 * written from the README's rules (test/model/cancel-reference.ts): random sequences of cancels
 * (every mode, with and without an escalation deadline), safe points and time on the simulated
 * clock. After every step the run's status, `cancel()`'s `contributed`, a safe point's answer and,
 * once CANCELLED, `escalated` must be what the model says; an escalation lands at its deadline,
 * not a millisecond earlier or later.
 */
import fc from 'fast-check';
import { resolveRaceRuns } from '../../src/testing/index.js';
import { describe, expect, it } from 'vitest';
import { CancelMode } from '../../machines/cancel-request.js';
import type { CancelStep } from './cancel-reference.js';
import { divergence, otherSteps } from './cancel-replay.js';

const step: fc.Arbitrary<CancelStep> = fc.oneof(
  fc.record({
    kind: fc.constant('cancel' as const),
    mode: fc.constantFrom(
      CancelMode.Immediate,
      CancelMode.AfterChatModel,
      CancelMode.AfterToolCalls,
      CancelMode.AnySafePoint,
    ),
    timeoutMs: fc.constantFrom(undefined, 5, 20, 40),
  }),
  ...otherSteps,
);

describe('cancel merge against an independent reference model', () => {
  it('every step of random cancels, safe points and time matches the model', async () => {
    const numRuns = resolveRaceRuns(200);
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
        const found = await divergence(steps);
        if (found !== undefined) throw new Error(found);
      }),
      { numRuns },
    );
  }, 60_000);

  it('an Immediate cancel on top of a pending safe-point cancel is an escalation', async () => {
    const found = await divergence([
      { kind: 'cancel', mode: CancelMode.AfterToolCalls, timeoutMs: undefined },
      { kind: 'cancel', mode: CancelMode.Immediate, timeoutMs: undefined },
    ]);
    expect(found).toBeUndefined();
  });
});
