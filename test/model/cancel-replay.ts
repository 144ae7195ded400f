/**
 * Replays cancel steps on a real run (a scripted agent, the simulated clock) next to the
 * {@link CancelReference} and reports the first step where they disagree.
 */
import fc from 'fast-check';
import { InvalidArgumentError } from '../../src/errors.js';
import { createRuntime, type CancelResult } from '../../src/index.js';
import { createScriptedAgent, createTestClock } from '../../src/testing/index.js';
import { CancelReference, type CancelStep, type CancelView } from './cancel-reference.js';

/** The steps besides cancels: a safe point of either kind, or time passing on the clock. */
export const otherSteps: ReadonlyArray<fc.Arbitrary<CancelStep>> = [
  fc.record({
    kind: fc.constant('safePoint' as const),
    point: fc.constantFrom('afterChatModel' as const, 'afterToolCalls' as const),
  }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 25 }) }),
];

/** `cancel()`'s `contributed`, or `'invalid'` when it refused the options (INVALID_ARGUMENT). */
function cancelAnswer(cancel: () => CancelResult): CancelView['answer'] {
  try {
    return cancel().contributed;
  } catch (error) {
    if (error instanceof InvalidArgumentError && error.code === 'INVALID_ARGUMENT')
      return 'invalid';
    throw error;
  }
}

const describeStep = (s: CancelStep) =>
  s.kind === 'cancel'
    ? `cancel(mode ${typeof s.mode === 'string' ? JSON.stringify(s.mode) : String(s.mode)}` +
      `${s.timeoutMs === undefined ? '' : `, ${s.timeoutMs}ms`}` +
      `${s.recursive === undefined ? '' : `, recursive ${s.recursive}`}` +
      `${s.reason === undefined ? '' : `, reason ${JSON.stringify(s.reason)}`})`
    : s.kind === 'safePoint'
      ? `safePoint(${s.point})`
      : `advance(${s.ms}ms)`;

/**
 * Plays `steps` on a real run and returns the first divergence from the model, if any, as a
 * message naming the invariant (`[cancel-merge-reference]`) and the steps so far.
 */
export async function divergence(steps: readonly CancelStep[]): Promise<string | undefined> {
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
        answer = cancelAnswer(() =>
          run.cancel({
            mode: s.mode as number,
            ...(s.timeoutMs === undefined ? {} : { timeoutMs: s.timeoutMs }),
            ...(s.recursive === undefined ? {} : { recursive: s.recursive }),
            ...(s.reason === undefined ? {} : { reason: s.reason }),
          }),
        );
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
        ...(outcome?.status === 'CANCELLED' ? { reason: outcome.reason } : {}),
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
