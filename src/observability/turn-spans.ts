/**
 * A TurnLoop's turns as spans (`runplane.turn`, docs/architecture.md, "Observability"): a turn's
 * span starts when it starts planning and ends when the loop forgets it; the run it starts is
 * its child (the turn is the run's explicit trace parent, see `withTraceParent`). Also the
 * preempt → next turn latency of {@link RunMetrics.preemptToNextTurn}.
 *
 * A turn's parent is the trace context that was active when its first item was pushed (an
 * HTTP request's `traceparent`), with span links to the contexts of its other items; a turn
 * whose first item carried none is a root span (`runplane serve --traceparent link`: a root
 * span linked to every item's caller). The loop itself was created in some earlier
 * context (the first request's), which a turn never inherits. Only object items carry a
 * context (kept in a WeakMap, as long as the item lives); a primitive item carries none.
 *
 * @module
 */
import {
  context,
  ROOT_CONTEXT,
  trace,
  type Context,
  type Link,
  type Span,
} from '@opentelemetry/api';
import type { RunTelemetry } from './run-telemetry.js';
import { tracedCallerOf, withTraceParent } from './run-spans.js';

/** @internal The turn spans of one TurnLoop. */
export class TurnSpans {
  readonly #telemetry: RunTelemetry | undefined;
  readonly #sessionId: string;
  readonly #spans = new Map<string, Span>();
  /** The trace context active at each object item's push (only one with a valid span context). */
  readonly #pushedIn = new WeakMap<object, Context>();
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

  /** `item` was pushed: the active trace context is kept for the turn that takes it. */
  pushed(item: unknown): void {
    if (this.#telemetry === undefined || typeof item !== 'object' || item === null) return;
    const active = context.active();
    if (tracedCallerOf(active) !== undefined) this.#pushedIn.set(item, active);
  }

  /**
   * The turn began planning with `items` offered (in push order): its span starts, a child of
   * the first item's push context (a root span when that item carried none, or carried its
   * caller as a link only), linked to the other items' contexts.
   */
  begin(turnId: string, items: readonly unknown[]): void {
    const telemetry = this.#telemetry;
    if (telemetry === undefined || this.#spans.has(turnId)) return;
    const contexts = items.map((item) =>
      typeof item === 'object' && item !== null ? this.#pushedIn.get(item) : undefined,
    );
    const first = contexts[0];
    const parent = first !== undefined && trace.getSpan(first) !== undefined ? first : undefined;
    const links: Link[] = [];
    const seen = new Set<string>();
    for (const pushedIn of contexts) {
      const caller = pushedIn === undefined ? undefined : tracedCallerOf(pushedIn);
      if (caller === undefined || seen.has(caller.spanId)) continue;
      seen.add(caller.spanId);
      if (pushedIn !== parent) links.push({ context: caller });
    }
    const span = telemetry.tracer.startSpan(
      'runplane.turn',
      { startTime: telemetry.clock.now(), ...(links.length > 0 ? { links } : {}) },
      parent ?? ROOT_CONTEXT,
    );
    // Kept even when not recording: its context is the parent of the turn's run, which must
    // not fall back to the loop's own context.
    this.#spans.set(turnId, span);
    if (!span.isRecording()) return;
    span.setAttribute('runplane.turn.id', turnId);
    span.setAttribute('runplane.session.id', this.#sessionId);
  }

  /** Prepares the turn's run (`fn`) inside the turn's span. */
  prepare<T>(turnId: string, fn: () => T): T {
    const span = this.#spans.get(turnId);
    return span === undefined ? fn() : withTraceParent(trace.setSpan(ROOT_CONTEXT, span), fn);
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
