/**
 * RunTelemetry: what a runtime tells OpenTelemetry and its {@link RunMetrics} about its runs
 * (docs/architecture.md, "Observability"). It reads what the runtime already has: the events a
 * run logs (status changes, tool calls, approvals, usage, its end), the cancel, interrupt and
 * safe-point calls of its executor, and its settlement. Nothing is threaded through the
 * machines.
 *
 * A run's span (`runplane.run`) starts when the run is prepared and ends when it has settled;
 * its parent is its parent run's span (a nested run), the explicit parent of `withTraceParent`
 * (a TurnLoop turn), or the active context (an HTTP request's `traceparent`). Tool calls
 * (`execute_tool <name>`) and approvals (`runplane.approval <name>`) are child spans drawn from
 * the log; model calls are started by the agent (`startRunChildSpan`).
 *
 * With no tracer provider registered a run's span does not record: only its start is paid,
 * and no per-run state is kept unless the run is cancelled or reports usage.
 *
 * @module
 */
import { context, SpanStatusCode, trace, type Span, type Tracer } from '@opentelemetry/api';
import type { RunStatus } from '../../machines/run.types.js';
import type { Clock } from '../clock.js';
import { guardRunMetrics, guardTracer } from './guarded-telemetry.js';
import type { EndedRun, RunMetrics } from './run-metrics.js';
import { callerLinksOf, currentTraceParent, setLiveRunSpan } from './run-spans.js';

/** @internal What telemetry reads of a run. */
export interface ObservedRun {
  readonly id: string;
  readonly ownerId: string;
  readonly sessionId: string;
  readonly parentRunId: string | undefined;
}

/** Model usage summed over a run's model calls, as `run.completed` logs it. */
export interface ModelUsage {
  readonly input_tokens: number;
  readonly output_tokens: number;
}

/** @internal What the executor tells telemetry besides the log. */
export type RunNote = 'cancel_requested' | 'interrupt_requested' | 'safe_point';

interface RunTrace {
  span: Span | undefined;
  /** Open tool call and approval spans, by `tool_use_id` (`approval:` prefixed). */
  children: Map<string, Span> | undefined;
  queuedAt: number | undefined;
  cancelAt: number | undefined;
  cancelled: boolean;
  inputTokens: number;
  outputTokens: number;
  hasUsage: boolean;
}

const newTrace = (span: Span | undefined): RunTrace => ({
  span,
  children: undefined,
  queuedAt: undefined,
  cancelAt: undefined,
  cancelled: false,
  inputTokens: 0,
  outputTokens: 0,
  hasUsage: false,
});

/** A tool name fit for a span name: what tool definitions use, short. */
const plainToolName = /^[\w.-]{1,64}$/;

/** A tool name as the model gave it, cut to 256 characters. */
const toolNameOf = (value: unknown): string => String(value).slice(0, 256);

const tokenCount = (value: unknown): number =>
  typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : 0;

/** @internal One per runtime (see the module note). */
export class RunTelemetry {
  readonly tracer: Tracer;
  readonly metrics: RunMetrics;
  readonly clock: Clock;
  readonly #reportError: (error: unknown) => void;
  /** Only runs with a recording span, a cancel or usage have an entry. */
  readonly #runs = new Map<string, RunTrace>();

  constructor(
    tracer: Tracer,
    metrics: RunMetrics,
    clock: Clock,
    reportError: (error: unknown) => void,
  ) {
    // The application's code: a throw in either is reported, never passed on to a run.
    this.tracer = guardTracer(tracer, reportError);
    this.metrics = guardRunMetrics(metrics, reportError);
    this.clock = clock;
    this.#reportError = reportError;
  }

  /** The run was prepared: its span starts (recorded only under a tracer provider). */
  prepared(run: ObservedRun): void {
    const parentSpan =
      run.parentRunId === undefined ? undefined : this.#runs.get(run.parentRunId)?.span;
    const parent =
      parentSpan === undefined ? currentTraceParent() : trace.setSpan(context.active(), parentSpan);
    const links = callerLinksOf(parent);
    const span = this.tracer.startSpan(
      'runplane.run',
      { startTime: this.clock.now(), ...(links === undefined ? {} : { links }) },
      parent,
    );
    if (!span.isRecording()) return;
    span.setAttribute('runplane.run.id', run.id);
    span.setAttribute('runplane.session.id', run.sessionId);
    if (run.parentRunId !== undefined) span.setAttribute('runplane.run.parent_id', run.parentRunId);
    this.#runs.set(run.id, newTrace(span));
    setLiveRunSpan(run.id, { span, tracer: this.tracer, clock: this.clock });
  }

  /** The run logged `type` with `payload` at `at` (ms): metrics, span attributes and children. */
  logged(run: ObservedRun, type: string, payload: Record<string, unknown>, at: number): void {
    try {
      this.#logged(run, type, payload, at);
    } catch (error) {
      this.#reportError(error);
    }
  }

  #logged(run: ObservedRun, type: string, payload: Record<string, unknown>, at: number): void {
    if (type === 'run.status') {
      const from = payload.from as RunStatus;
      const to = payload.to as RunStatus;
      this.metrics.runStatusChanged(from, to);
      const state = this.#runs.get(run.id);
      if (state?.span === undefined) return;
      state.span.setAttribute('runplane.run.status', to);
      if (to === 'QUEUED') state.queuedAt = at;
      else if (from === 'QUEUED' && state.queuedAt !== undefined) {
        state.span.setAttribute('runplane.run.queue_wait_ms', at - state.queuedAt);
      }
      return;
    }
    if (type === 'agent.message') {
      const usage = payload.usage as Record<string, unknown> | null | undefined;
      if (usage === null || typeof usage !== 'object') return;
      const input = tokenCount(usage.promptTokens);
      const output = tokenCount(usage.completionTokens);
      let state = this.#runs.get(run.id);
      if (state === undefined) this.#runs.set(run.id, (state = newTrace(undefined)));
      state.inputTokens += input;
      state.outputTokens += output;
      state.hasUsage = true;
      this.metrics.modelTokens(input, output);
      return;
    }
    if (type === 'run.completed') this.#ended(run, 'COMPLETED', String(payload.reason), at);
    else if (type === 'run.failed') {
      this.#ended(run, 'FAILED', 'error', at, {
        // What the agent threw, cut: a message may quote whatever the agent was working on.
        message: String(payload.error).slice(0, 500),
        ...(typeof payload.code === 'string' ? { code: payload.code } : {}),
      });
    } else if (type === 'run.cancelled') {
      this.#ended(run, 'CANCELLED', String(payload.cause), at);
      const state = this.#runs.get(run.id);
      state?.span?.setAttribute('runplane.run.escalated', payload.escalated === true);
    } else if (type === 'run.unsettled') {
      this.#runs.get(run.id)?.span?.setAttribute('runplane.run.unsettled', true);
    } else if (type.startsWith('agent.')) {
      const state = this.#runs.get(run.id);
      if (state?.span !== undefined) this.#child(state, state.span, type, payload);
    }
  }

  #ended(
    run: ObservedRun,
    status: RunStatus,
    cause: string,
    at: number,
    error?: EndedRun['error'],
  ): void {
    let state = this.#runs.get(run.id);
    const span = state?.span;
    this.metrics.runEnded(status, cause, {
      runId: run.id,
      ownerId: run.ownerId,
      sessionId: run.sessionId,
      traceId: span?.spanContext().traceId,
      usage: this.usageOf(run.id),
      ...(error === undefined ? {} : { error }),
    });
    if (status === 'CANCELLED') {
      if (state === undefined) this.#runs.set(run.id, (state = newTrace(undefined)));
      state.cancelled = true;
      // A nested run cancelled by its parent's recursive cancel had no request of its own.
      state.cancelAt ??= at;
    }
    if (span === undefined) return;
    if (status === 'CANCELLED') span.setAttribute('runplane.run.cancel_cause', cause);
    else if (status === 'COMPLETED')
      span.setAttribute('runplane.run.interrupted', cause === 'interrupted');
    if (status === 'FAILED') {
      span.setStatus({ code: SpanStatusCode.ERROR, message: error?.message });
    }
  }

  /** Tool calls and approvals, from the events the agent logs. */
  #child(state: RunTrace, parent: Span, type: string, payload: Record<string, unknown>): void {
    const id = payload.tool_use_id;
    if (typeof id !== 'string') return;
    const key = type.startsWith('agent.approval_') ? `approval:${id}` : id;
    if (type === 'agent.tool_use' || type === 'agent.approval_requested') {
      const name = toolNameOf(payload.name);
      const isTool = type === 'agent.tool_use';
      const span = this.tracer.startSpan(
        // The model chooses the name: one that is not a plain tool name stays out of the span
        // name, which trace stores index (still on the attribute, cut to 256 characters).
        `${isTool ? 'execute_tool' : 'runplane.approval'}${plainToolName.test(name) ? ` ${name}` : ''}`,
        {
          startTime: this.clock.now(),
          attributes: isTool
            ? {
                'gen_ai.operation.name': 'execute_tool',
                'gen_ai.tool.name': name,
                'gen_ai.tool.call.id': id,
              }
            : { 'runplane.approval.tool_name': name, 'gen_ai.tool.call.id': id },
        },
        // An approval is a child of its tool call's span.
        trace.setSpan(context.active(), (isTool ? undefined : state.children?.get(id)) ?? parent),
      );
      (state.children ??= new Map()).set(key, span);
    } else if (type === 'agent.tool_result' || type === 'agent.approval_resolved') {
      const span = state.children?.get(key);
      if (span === undefined) return;
      state.children?.delete(key);
      if (type === 'agent.tool_result') {
        span.setAttribute('runplane.tool.status', String(payload.status));
        if (payload.is_error === true) span.setStatus({ code: SpanStatusCode.ERROR });
      } else span.setAttribute('runplane.approval.outcome', String(payload.outcome));
      span.end(this.clock.now());
    }
  }

  /** The executor was asked something: a span event, and the first cancel's time. */
  noted(
    run: ObservedRun,
    note: RunNote,
    attributes: Record<string, string | number | boolean>,
  ): void {
    let state = this.#runs.get(run.id);
    if (note === 'cancel_requested') {
      if (state === undefined) this.#runs.set(run.id, (state = newTrace(undefined)));
      state.cancelAt ??= this.clock.now();
    }
    state?.span?.addEvent(`runplane.${note}`, attributes, this.clock.now());
  }

  /** The usage `run.completed` logs: `undefined` when no model call reported any. */
  usageOf(runId: string): ModelUsage | undefined {
    const state = this.#runs.get(runId);
    return state?.hasUsage === true
      ? { input_tokens: state.inputTokens, output_tokens: state.outputTokens }
      : undefined;
  }

  /** Runs `fn` (the agent) with the run's span active, for instrumentation inside the agent. */
  inRunContext<T>(runId: string, fn: () => T): T {
    const span = this.#runs.get(runId)?.span;
    return span === undefined ? fn() : context.with(trace.setSpan(context.active(), span), fn);
  }

  /** The run settled (or was abandoned): its span ends, and a cancel's latency is recorded. */
  settled(run: ObservedRun): void {
    const state = this.#runs.get(run.id);
    if (state === undefined) return;
    this.#runs.delete(run.id);
    const now = this.clock.now();
    if (state.cancelled && state.cancelAt !== undefined)
      this.metrics.cancelSettled(now - state.cancelAt);
    const { span } = state;
    if (span === undefined) return;
    setLiveRunSpan(run.id, undefined);
    if (state.hasUsage) {
      span.setAttribute('gen_ai.usage.input_tokens', state.inputTokens);
      span.setAttribute('gen_ai.usage.output_tokens', state.outputTokens);
    }
    // A tool call or approval still open when its run settled was cancelled with it.
    for (const [key, child] of state.children ?? []) {
      if (key.startsWith('approval:')) child.setAttribute('runplane.approval.outcome', 'cancelled');
      else child.setAttribute('runplane.tool.status', 'cancelled');
      child.end(now);
    }
    span.end(now);
  }
}
