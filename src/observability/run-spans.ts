/**
 * The spans of live runs, by run id, for the code that runs inside a run (the ReAct agent's
 * model calls), and the explicit parent a caller can give the runs it prepares (a TurnLoop's
 * turn). Both work without a context manager: with the OpenTelemetry API alone,
 * `context.with(...)` does not carry a context anywhere (docs/architecture.md, "Observability").
 *
 * @module
 */
import {
  context,
  createContextKey,
  isSpanContextValid,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import type { Clock } from '../clock.js';

/** @internal A recording run span and what its children need. */
export interface LiveRunSpan {
  readonly span: Span;
  readonly tracer: Tracer;
  readonly clock: Clock;
}

/** Recording run spans by run id (run ids are nanoids, never reused, so one table serves every runtime). */
const liveRunSpans = new Map<string, LiveRunSpan>();

/** @internal Registers (or with `undefined`, forgets) the recording span of run `runId`. */
export function setLiveRunSpan(runId: string, live: LiveRunSpan | undefined): void {
  if (live === undefined) liveRunSpans.delete(runId);
  else liveRunSpans.set(runId, live);
}

/**
 * Starts a span inside run `runId`'s span (a model call, say), on the run's tracer and clock.
 *
 * @param runId - the run (`ctx.runId`)
 * @param name - the span name, e.g. `chat gpt-4o` (OpenTelemetry GenAI conventions)
 * @param attributes - its attributes
 * @returns the span, or `undefined` when the run's span is not recording (no tracer provider,
 *   or sampled out): then there is nothing to record and nothing to end
 * @internal
 */
export function startRunChildSpan(
  runId: string,
  name: string,
  attributes: Attributes,
): { readonly span: Span; end(): void } | undefined {
  const live = liveRunSpans.get(runId);
  if (live === undefined) return undefined;
  const { span: parent, tracer, clock } = live;
  const span = tracer.startSpan(
    name,
    { attributes, startTime: clock.now() },
    trace.setSpan(context.active(), parent),
  );
  return { span, end: () => span.end(clock.now()) };
}

let explicitParent: Context | undefined;

/**
 * Calls `fn` with `parent` as the trace context of every run it prepares (synchronously): the
 * run's span becomes a child of `parent`'s span. Without it a run's parent is the active
 * context (`context.active()`, e.g. an HTTP request's `traceparent` under a context manager).
 *
 * @param parent - the context whose span becomes the parent
 * @param fn - prepares the runs
 * @returns what `fn` returns
 * @internal
 */
export function withTraceParent<T>(parent: Context, fn: () => T): T {
  const before = explicitParent;
  explicitParent = parent;
  try {
    return fn();
  } finally {
    explicitParent = before;
  }
}

/** @internal The parent context of a run prepared now. */
export const currentTraceParent = (): Context => explicitParent ?? context.active();

const callerLinkKey = createContextKey('runplane caller span context');

/**
 * `ctx` carrying `caller` as a span to link to rather than a parent (`runplane serve
 * --traceparent link`): a run or turn prepared in it is a root span with a link to `caller`.
 *
 * @internal
 */
export const withCallerLink = (ctx: Context, caller: SpanContext): Context =>
  ctx.setValue(callerLinkKey, caller);

/**
 * The links of a span started in `parent`: the caller's span context of {@link withCallerLink},
 * only when `parent` holds no span (the link stands in for a parent; a child of another span
 * gets none).
 *
 * @internal
 */
export function callerLinksOf(parent: Context): Link[] | undefined {
  if (trace.getSpan(parent) !== undefined) return undefined;
  const caller = parent.getValue(callerLinkKey) as SpanContext | undefined;
  return caller === undefined ? undefined : [{ context: caller }];
}

/**
 * The span context a span started in `ctx` would follow: its span's (when valid) or its caller
 * link's; `undefined` when it carries neither.
 *
 * @internal
 */
export function tracedCallerOf(ctx: Context): SpanContext | undefined {
  const spanContext = trace.getSpanContext(ctx);
  if (spanContext !== undefined && isSpanContextValid(spanContext)) return spanContext;
  return ctx.getValue(callerLinkKey) as SpanContext | undefined;
}
