/**
 * A faulty tracer pipeline or metrics sink never breaks a run (README "Observability"): a span
 * processor whose `onStart` and `onEnd` throw (what a broken exporter set-up does inside
 * `startSpan` and `end`) and a metrics sink whose every method throws are reported through
 * `reportError`; runs complete, cancel and shut down as without them.
 */
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import {
  CancelMode,
  createReActAgent,
  createRuntime,
  createScriptedModel,
  type Agent,
} from '../../src/index.js';
import type { RunMetrics } from '../../src/observability/run-metrics.js';
import { createTestClock } from '../../src/testing/index.js';

const fail = (what: string) => () => {
  throw new Error(`faulty ${what}`);
};

/** A span processor whose `onStart` or `onEnd` throws (the SDK calls them in startSpan, end). */
const faultyProcessor = (faulty: 'onStart' | 'onEnd'): SpanProcessor => ({
  onStart: () => {},
  onEnd: () => {},
  [faulty]: fail(faulty),
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
});

const faultyMetrics: RunMetrics = {
  runStatusChanged: fail('runStatusChanged'),
  runEnded: fail('runEnded'),
  cancelSettled: fail('cancelSettled'),
  modelTokens: fail('modelTokens'),
  preemptToNextTurn: fail('preemptToNextTurn'),
};

/** Ends when its signal fires. */
const waiting: Agent<null, string> = {
  execute: (_input, ctx) =>
    new Promise((_resolve, reject) =>
      ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error), {
        once: true,
      }),
    ),
};

describe('faulty telemetry', () => {
  it.each(['onStart', 'onEnd'] as const)(
    'a span processor whose %s throws and a throwing metrics sink are reported; runs complete, cancel and shut down',
    async (faulty) => {
      const clock = createTestClock(Date.UTC(2026, 11, 1));
      const errors: string[] = [];
      const provider = new BasicTracerProvider({ spanProcessors: [faultyProcessor(faulty)] });
      const runtime = createRuntime({
        clock,
        tracer: provider.getTracer('faulty'),
        metrics: faultyMetrics,
        reportError: (error) => errors.push(String(error)),
      });
      const agent = createReActAgent({
        model: createScriptedModel([
          { text: 'Hello.', usage: { promptTokens: 5, completionTokens: 1, totalTokens: 6 } },
        ]),
      });
      const answered = runtime.prepare({ ownerId: 'u1', sessionId: 's1', agent, input: 'hi' });
      answered.start();
      await clock.flush();
      expect((await answered.termination).status).toBe('COMPLETED');

      const stopped = runtime.prepare({
        ownerId: 'u1',
        sessionId: 's2',
        agent: waiting,
        input: null,
      });
      stopped.start();
      await clock.flush();
      const cancel = stopped.cancel({ mode: CancelMode.Immediate });
      await clock.flush();
      expect(await cancel.outcome).toBe('cancelled');

      await runtime.shutdown({ graceMs: 0 });
      expect(errors).toEqual(
        expect.arrayContaining([
          `Error: faulty ${faulty}`,
          'Error: faulty runEnded',
          'Error: faulty cancelSettled',
        ]),
      );
    },
  );
});
