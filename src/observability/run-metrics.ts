/**
 * RunMetrics: the numbers a runtime reports about its runs (docs/architecture.md,
 * "Observability"), and their default sink on the OpenTelemetry metrics API, which is a no-op
 * until an application registers an SDK. `runplane serve` passes its own sink, on prom-client
 * (src/observability/prometheus-metrics.ts).
 *
 * @module
 */
import { metrics, type Meter } from '@opentelemetry/api';
import type { RunStatus } from '../../machines/run.types.js';

/** Which run ended, for a sink that also logs (`runplane serve` writes one line per run end). */
export interface EndedRun {
  readonly runId: string;
  readonly ownerId: string;
  readonly sessionId: string;
  /** The trace id of the run's span when it records, else `undefined`. */
  readonly traceId: string | undefined;
  /** Input and output tokens its model calls reported, if any. */
  readonly usage: { readonly input_tokens: number; readonly output_tokens: number } | undefined;
  /**
   * A failed run's error: its message (at most 500 characters) and its stable `code` when it
   * has one (a `RunplaneError`'s, say). Never the run's input.
   */
  readonly error?: { readonly message: string; readonly code?: string };
}

/**
 * Receives a runtime's run measurements. Every method is called synchronously inside the
 * runtime's bookkeeping and must not throw (a throw is reported through `reportError`).
 *
 * @remarks The numbers Temporal's SDK metrics and Trigger.dev's OpenTelemetry give an operator:
 * runs by status, what is running and waiting, and how long a stop takes.
 */
export interface RunMetrics {
  /** A run (session or nested) changed status: `from` → `to` (`CREATED → QUEUED`, …). */
  runStatusChanged(from: RunStatus, to: RunStatus): void;
  /**
   * A run reached a terminal status.
   *
   * @param status - `COMPLETED | FAILED | CANCELLED`
   * @param cause - `completed` or `interrupted` (COMPLETED), `error` (FAILED), or the cancel
   *   cause (`cancel`, `timeout`, `signal`, `shutdown`, …)
   * @param run - {@link EndedRun}
   */
  runEnded(status: RunStatus, cause: string, run: EndedRun): void;
  /** A cancelled run settled, `durationMs` after its first cancel request (ms). */
  cancelSettled(durationMs: number): void;
  /** A model call reported its usage (tokens). */
  modelTokens(inputTokens: number, outputTokens: number): void;
  /** A TurnLoop's preempt led to its next turn's run starting `durationMs` later (ms). */
  preemptToNextTurn(durationMs: number): void;
}

/**
 * The default {@link RunMetrics}: instruments of the OpenTelemetry metrics API (meter
 * `runplane`): `runplane.runs.started`, `runplane.runs.ended` (`status`, `cause`),
 * `runplane.runs.active`, `runplane.runs.queued` (up-down counters),
 * `runplane.run.cancel_settle.duration` and `runplane.turn.preempt_next_turn.duration`
 * (histograms, ms), `runplane.model.tokens` (`type`: `input` or `output`).
 *
 * @param meter - @default metrics.getMeter('runplane')
 * @returns the sink; every call is a no-op until an application registers a meter provider
 */
export function createOtelRunMetrics(meter: Meter = metrics.getMeter('runplane')): RunMetrics {
  const started = meter.createCounter('runplane.runs.started', {
    description: 'runs that began running',
  });
  const ended = meter.createCounter('runplane.runs.ended', {
    description: 'runs that ended, by status and cause',
  });
  const active = meter.createUpDownCounter('runplane.runs.active', {
    description: 'runs running now',
  });
  const queued = meter.createUpDownCounter('runplane.runs.queued', {
    description: 'runs waiting to run',
  });
  const cancelSettle = meter.createHistogram('runplane.run.cancel_settle.duration', {
    description: 'first cancel request to the run settled',
    unit: 'ms',
  });
  const preemptNext = meter.createHistogram('runplane.turn.preempt_next_turn.duration', {
    description: "a TurnLoop preempt to the next turn's run starting",
    unit: 'ms',
  });
  const tokens = meter.createCounter('runplane.model.tokens', { description: 'model tokens used' });
  const input = { type: 'input' };
  const output = { type: 'output' };
  return {
    runStatusChanged(from, to) {
      if (to === 'RUNNING') {
        started.add(1);
        active.add(1);
      } else if (from === 'RUNNING') active.add(-1);
      if (to === 'QUEUED') queued.add(1);
      else if (from === 'QUEUED') queued.add(-1);
    },
    runEnded: (status, cause) => ended.add(1, { status, cause }),
    cancelSettled: (durationMs) => cancelSettle.record(durationMs),
    modelTokens(inputTokens, outputTokens) {
      tokens.add(inputTokens, input);
      tokens.add(outputTokens, output);
    },
    preemptToNextTurn: (durationMs) => preemptNext.record(durationMs),
  };
}
