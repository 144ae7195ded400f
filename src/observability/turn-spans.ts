/**
 * A TurnLoop's turns as spans (`runplane.turn`, docs/architecture.md, "Observability"): a turn's
 * span starts when it starts planning and ends when the loop forgets it; the run it starts is
 * its child (the turn is the run's explicit trace parent, see `withTraceParent`). Also the
 * preempt → next turn latency of {@link RunMetrics.preemptToNextTurn}.
 *
 * @module
 */
import { context, trace, type Span } from '@opentelemetry/api';
import type { RunTelemetry } from './run-telemetry.js';
import { withTraceParent } from './run-spans.js';

/** @internal The turn spans of one TurnLoop. */
export class TurnSpans {
  readonly #telemetry: RunTelemetry | undefined;
  readonly #sessionId: string;
  readonly #spans = new Map<string, Span>();
  /** When the latest preempt that cancelled a turn landed (ms), until the next turn's run starts. */
  #preemptAt: number | undefined;

  /**
   * @param telemetry - the runtime's (`telemetryOf(runtime)`); without it nothing is recorded
   * @param sessionId - the loop's session
   */
  constructor(telemetry: RunTelemetry | undefined, sessionId: string) {
    this.#telemetry = telemetry;
    this.#sessionId = sessionId;
  }

  /** The turn began planning. */
  begin(turnId: string): void {
    const telemetry = this.#telemetry;
    if (telemetry === undefined || this.#spans.has(turnId)) return;
    const span = telemetry.tracer.startSpan('runplane.turn', { startTime: telemetry.clock.now() });
    if (!span.isRecording()) return;
    span.setAttribute('runplane.turn.id', turnId);
    span.setAttribute('runplane.session.id', this.#sessionId);
    this.#spans.set(turnId, span);
  }

  /** Prepares the turn's run (`fn`) inside the turn's span. */
  prepare<T>(turnId: string, fn: () => T): T {
    const span = this.#spans.get(turnId);
    return span === undefined ? fn() : withTraceParent(trace.setSpan(context.active(), span), fn);
  }

  /** The turn's run started: its id on the span; a pending preempt's latency is recorded. */
  started(turnId: string, runId: string, items: number): void {
    const telemetry = this.#telemetry;
    if (telemetry === undefined) return;
    const span = this.#spans.get(turnId);
    span?.setAttribute('runplane.run.id', runId);
    span?.setAttribute('runplane.turn.items', items);
    if (this.#preemptAt !== undefined) {
      telemetry.metrics.preemptToNextTurn(telemetry.clock.now() - this.#preemptAt);
      this.#preemptAt = undefined;
    }
  }

  /** A preempt cancelled the turn's run. */
  preempted(turnId: string): void {
    const telemetry = this.#telemetry;
    if (telemetry === undefined) return;
    const now = telemetry.clock.now();
    this.#preemptAt ??= now;
    this.#spans.get(turnId)?.addEvent('runplane.preempted', undefined, now);
  }

  /** The loop forgot the turn: its span ends. */
  end(turnId: string): void {
    const span = this.#spans.get(turnId);
    if (span === undefined) return;
    this.#spans.delete(turnId);
    span.end(this.#telemetry?.clock.now());
  }

  /** The loop exited: every open turn span ends. */
  clear(): void {
    for (const turnId of [...this.#spans.keys()]) this.end(turnId);
  }
}
