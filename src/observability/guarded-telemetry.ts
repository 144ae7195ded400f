/**
 * Telemetry that cannot break a run (docs/architecture.md, "Observability"): the tracer and the
 * {@link RunMetrics} sink a runtime is given are the application's code (a span processor, an
 * exporter, a metrics SDK), and any of them may throw. Wrapped here, a throw is reported
 * through `reportError` and the run goes on: a span that could not start is a non-recording
 * one, a call that threw did nothing.
 *
 * @module
 */
import {
  INVALID_SPAN_CONTEXT,
  trace,
  type Attributes,
  type AttributeValue,
  type Context,
  type Exception,
  type Link,
  type Span,
  type SpanContext,
  type SpanOptions,
  type SpanStatus,
  type TimeInput,
  type Tracer,
} from '@opentelemetry/api';
import type { RunMetrics } from './run-metrics.js';

type ReportError = (error: unknown) => void;

/** A recording span whose every call reports a throw instead of passing it on. */
class GuardedSpan implements Span {
  readonly #span: Span;
  readonly #reportError: ReportError;

  constructor(span: Span, reportError: ReportError) {
    this.#span = span;
    this.#reportError = reportError;
  }

  /** `fn(span)`, or `fallback` when it throws (reported). */
  #read<T>(fn: (span: Span) => T, fallback: T): T {
    try {
      return fn(this.#span);
    } catch (error) {
      this.#reportError(error);
      return fallback;
    }
  }

  #call(fn: (span: Span) => unknown): this {
    this.#read(fn, undefined);
    return this;
  }

  spanContext(): SpanContext {
    return this.#read((span) => span.spanContext(), INVALID_SPAN_CONTEXT);
  }

  isRecording(): boolean {
    return this.#read((span) => span.isRecording(), false);
  }

  setAttribute(key: string, value: AttributeValue): this {
    return this.#call((span) => span.setAttribute(key, value));
  }

  setAttributes(attributes: Attributes): this {
    return this.#call((span) => span.setAttributes(attributes));
  }

  addEvent(name: string, attributes?: Attributes | TimeInput, startTime?: TimeInput): this {
    return this.#call((span) => span.addEvent(name, attributes, startTime));
  }

  addLink(link: Link): this {
    return this.#call((span) => span.addLink(link));
  }

  addLinks(links: Link[]): this {
    return this.#call((span) => span.addLinks(links));
  }

  setStatus(status: SpanStatus): this {
    return this.#call((span) => span.setStatus(status));
  }

  updateName(name: string): this {
    return this.#call((span) => span.updateName(name));
  }

  end(endTime?: TimeInput): void {
    this.#call((span) => span.end(endTime));
  }

  recordException(exception: Exception, time?: TimeInput): void {
    this.#call((span) => span.recordException(exception, time));
  }
}

/**
 * Wraps `tracer` so that neither `startSpan` nor a call on a span it started throws.
 *
 * @remarks A non-recording span (no tracer provider, or sampled out) is returned as it is: its
 * calls are no-ops, and the common case pays nothing more.
 * @param tracer - the runtime's tracer
 * @param reportError - receives what a call threw
 * @returns a tracer for the runtime's own spans (run, tool call, approval, model call, turn)
 * @internal
 */
export function guardTracer(tracer: Tracer, reportError: ReportError): Tracer {
  const guard = (span: Span): Span => {
    try {
      return span.isRecording() ? new GuardedSpan(span, reportError) : span;
    } catch (error) {
      reportError(error);
      return trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
    }
  };
  const startSpan = (name: string, options?: SpanOptions, parent?: Context): Span => {
    try {
      return guard(tracer.startSpan(name, options, parent));
    } catch (error) {
      reportError(error);
      return trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
    }
  };
  return {
    startSpan,
    // runplane starts its spans with startSpan only.
    startActiveSpan: tracer.startActiveSpan.bind(tracer),
  };
}

/**
 * Wraps `metrics` so that none of its methods throws.
 *
 * @param metrics - the runtime's sink
 * @param reportError - receives what a method threw
 * @returns the guarded sink
 * @internal
 */
export function guardRunMetrics(metrics: RunMetrics, reportError: ReportError): RunMetrics {
  const guarded = (call: () => void): void => {
    try {
      call();
    } catch (error) {
      reportError(error);
    }
  };
  return {
    runStatusChanged: (from, to) => guarded(() => metrics.runStatusChanged(from, to)),
    runEnded: (status, cause, run) => guarded(() => metrics.runEnded(status, cause, run)),
    cancelSettled: (durationMs) => guarded(() => metrics.cancelSettled(durationMs)),
    modelTokens: (input, output) => guarded(() => metrics.modelTokens(input, output)),
    preemptToNextTurn: (durationMs) => guarded(() => metrics.preemptToNextTurn(durationMs)),
  };
}
