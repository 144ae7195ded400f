/**
 * The cost of run telemetry (spans and metrics, src/observability) with no tracer provider
 * registered, the case of every application that does not trace: the issue's budget is 3 % of
 * a lifecycle. Two measures, both medians over passes:
 *
 * - direct: the telemetry calls one no-op lifecycle makes (prepared, the six events it logs,
 *   settled), on the default tracer and metrics (the OpenTelemetry API, nothing registered),
 *   timed in a tight loop, as a share of the lifecycle's p50;
 * - A/B: a whole lifecycle on a runtime with the default tracer and metrics against one with an
 *   inert tracer and empty metrics (what is left is the hooks' own calls), alternating passes.
 *
 * Both again with the AsyncLocalStorage context manager and W3C propagator registered, as
 * `runplane serve` always registers them (`registerTraceContext`): then `context.active()`,
 * which every run's preparation reads, is an AsyncLocalStorage lookup instead of a no-op.
 */
import { performance } from 'node:perf_hooks';
import { context, INVALID_SPAN_CONTEXT, propagation, trace, type Tracer } from '@opentelemetry/api';
import { createMemoryEventLog } from '../src/events/memory-event-log.js';
import { createRuntime, type Agent, type Runtime } from '../src/index.js';
import { createOtelRunMetrics, type RunMetrics } from '../src/observability/run-metrics.js';
import { registerTraceContext } from '../src/observability/async-context.js';
import { RunTelemetry } from '../src/observability/run-telemetry.js';
import { systemClock } from '../src/clock.js';
import { median, round, type Figure } from './core.bench.js';

const noop: Agent<number, number> = { execute: (i) => Promise.resolve(i) };

const inertSpan = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);
const inertTracer = {
  startSpan: () => inertSpan,
  startActiveSpan: () => {
    throw new Error('not used');
  },
} as unknown as Tracer;
const inertMetrics: RunMetrics = {
  runStatusChanged: () => undefined,
  runEnded: () => undefined,
  cancelSettled: () => undefined,
  modelTokens: () => undefined,
  preemptToNextTurn: () => undefined,
};

const runtimeOf = (inert: boolean): Runtime =>
  createRuntime({
    stores: { eventLog: createMemoryEventLog({ maxEventsPerSession: 1_000 }) },
    ...(inert ? { tracer: inertTracer, metrics: inertMetrics } : {}),
  });

/** µs per lifecycle (median of `batch`-run passes' per-run times) for each runtime, passes alternating. */
async function lifecycles(
  runtimes: Record<string, Runtime>,
  passes: number,
  batch: number,
): Promise<Record<string, number>> {
  const names = Object.keys(runtimes);
  const perRun = new Map<string, number[]>(names.map((name) => [name, []]));
  let i = 0;
  for (let pass = -2; pass < passes; pass++) {
    for (const name of pass % 2 === 0 ? names : [...names].reverse()) {
      const runtime = runtimes[name]!;
      const samples: number[] = [];
      for (let b = 0; b < batch; b++) {
        const t0 = performance.now();
        const run = runtime.prepare({
          ownerId: 'bench',
          sessionId: `s-${i % 100}`,
          agent: noop,
          input: i++,
        });
        run.start();
        await run.termination;
        samples.push((performance.now() - t0) * 1_000);
      }
      if (pass >= 0) perRun.get(name)!.push(median(samples));
    }
  }
  return Object.fromEntries(names.map((name) => [name, median(perRun.get(name)!)]));
}

/** ns of the telemetry calls of one no-op lifecycle, with nothing registered (median of passes). */
function telemetryCallsNs(passes: number, batch: number): number {
  const telemetry = new RunTelemetry(
    trace.getTracer('runplane'),
    createOtelRunMetrics(),
    systemClock,
    () => undefined,
  );
  const events: Array<[string, Record<string, unknown>]> = [
    ['session.run_queued', { run_id: 'x' }],
    ['run.status', { from: 'CREATED', to: 'QUEUED' }],
    ['session.run_started', { run_id: 'x' }],
    ['run.status', { from: 'QUEUED', to: 'RUNNING' }],
    ['run.status', { from: 'RUNNING', to: 'COMPLETED' }],
    ['run.completed', { reason: 'completed' }],
  ];
  const perPass: number[] = [];
  for (let pass = -2; pass < passes; pass++) {
    const t0 = performance.now();
    for (let b = 0; b < batch; b++) {
      const run = { id: `r${b}`, ownerId: 'bench', sessionId: 's', parentRunId: undefined };
      telemetry.prepared(run);
      for (const [type, payload] of events) telemetry.logged(run, type, payload, b);
      telemetry.usageOf(run.id);
      telemetry.inRunContext(run.id, () => undefined);
      telemetry.settled(run);
    }
    if (pass >= 0) perPass.push(((performance.now() - t0) * 1e6) / batch);
  }
  return median(perPass);
}

/** One figure: the calls' share of a lifecycle, and the A/B, `label` naming the setting. */
async function overheadFigure(runtimes: Record<string, Runtime>, label: string): Promise<Figure> {
  const us = await lifecycles(runtimes, 10, 2_000);
  const callsNs = telemetryCallsNs(10, 100_000);
  const lifecycleUs = us.default!;
  const share = (callsNs / 1_000 / lifecycleUs) * 100;
  const ab = (us.default! / us.inert! - 1) * 100;
  return {
    name: `telemetry with no tracer provider${label}: its calls per lifecycle, % of a lifecycle (p50)`,
    value: round(share),
    unit: '%',
    target: '≤ 3 %',
    meets: share <= 3,
    detail: {
      callsNsPerLifecycle: round(callsNs),
      lifecycleP50Us: round(lifecycleUs),
      abPercent: round(ab),
      inertLifecycleP50Us: round(us.inert!),
    },
  };
}

/** The `telemetry` suite of `npm run bench`. */
export async function telemetryOverhead(): Promise<Figure[]> {
  const runtimes = { default: runtimeOf(false), inert: runtimeOf(true) };
  try {
    const bare = await overheadFigure(runtimes, '');
    // As `runplane serve` runs: a context manager on AsyncLocalStorage and the W3C propagator.
    registerTraceContext();
    try {
      return [bare, await overheadFigure(runtimes, ', AsyncLocalStorage context manager (serve)')];
    } finally {
      context.disable();
      propagation.disable();
    }
  } finally {
    await Promise.all(Object.values(runtimes).map((runtime) => runtime.shutdown({ graceMs: 0 })));
  }
}
