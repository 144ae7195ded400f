/**
 * The cancel merge of a real run, compared step by step with an independent reference model
 * written from the README's rules (test/model/cancel-reference.ts): random sequences of cancels
 * (every mode, with and without an escalation deadline), safe points and time on the simulated
 * clock. After every step the run's status, `cancel()`'s `contributed`, a safe point's answer and,
 * once CANCELLED, `escalated` must be what the model says; an escalation lands at its deadline,
 * not a millisecond earlier or later.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CancelMode } from '../../machines/cancel-request.js';
import { createRuntime } from '../../src/index.js';
import { createScriptedAgent, createTestClock } from '../../src/testing/index.js';
import { CancelReference, type CancelStep, type CancelView } from './cancel-reference.js';

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
  fc.record({
    kind: fc.constant('safePoint' as const),
    point: fc.constantFrom('afterChatModel' as const, 'afterToolCalls' as const),
  }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 25 }) }),
);

const describeStep = (s: CancelStep) =>
  s.kind === 'cancel'
    ? `cancel(mode ${s.mode}${s.timeoutMs === undefined ? '' : `, ${s.timeoutMs}ms`})`
    : s.kind === 'safePoint'
      ? `safePoint(${s.point})`
      : `advance(${s.ms}ms)`;

/** Plays `steps` on a real run and returns the first divergence from the model, if any. */
async function divergence(steps: readonly CancelStep[]): Promise<string | undefined> {
  const clock = createTestClock();
  const runtime = createRuntime({ clock, unwindTimeoutMs: 1_000 });
  const agent = createScriptedAgent<string>();
  const run = runtime.prepare({ ownerId: 'o', sessionId: 's', agent, input: 'x' });
  run.start();
  await agent.started(run.id);
  const model = new CancelReference();
  const done: string[] = [];
  try {
    for (const s of steps) {
      let answer: CancelView['answer'];
      if (s.kind === 'cancel') {
        answer = run.cancel({
          mode: s.mode,
          ...(s.timeoutMs === undefined ? {} : { timeoutMs: s.timeoutMs }),
        }).contributed;
      } else if (s.kind === 'safePoint') {
        answer = agent.safePoint(run.id, s.point);
      } else {
        await clock.advance(s.ms);
      }
      await clock.flush();
      done.push(describeStep(s));
      const expected = model.step(s);
      const status = run.status === 'RUNNING' ? 'RUNNING' : run.status;
      const outcome = run.status === 'CANCELLED' ? await run.termination : undefined;
      const seen: CancelView = {
        status: status as CancelView['status'],
        escalated: outcome?.status === 'CANCELLED' ? outcome.escalated : undefined,
        answer,
      };
      if (JSON.stringify(seen) !== JSON.stringify(expected)) {
        return `[cancel-merge-reference] after ${done.join(', ')}: the run shows ${JSON.stringify(seen)}, the README's rules say ${JSON.stringify(expected)}`;
      }
    }
    return undefined;
  } finally {
    run.cancel();
    const shutdown = runtime.shutdown({ graceMs: 0 });
    await clock.advance(1);
    await shutdown;
  }
}

describe('cancel merge against an independent reference model', () => {
  it('every step of random cancels, safe points and time matches the model', async () => {
    const numRuns = Number(process.env.RACE_RUNS ?? 200);
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
