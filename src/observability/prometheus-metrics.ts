/**
 * The Prometheus metrics of `runplane serve` (prom-client), exported at `GET /metrics`
 * (README "Observability"): a {@link RunMetrics} sink for the runtime plus what the server
 * counts itself (open SSE streams, event-log appends).
 *
 * @module
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { EndedRun, RunMetrics } from './run-metrics.js';

/** The metrics of one server. */
export interface PrometheusMetrics {
  /** The registry `/metrics` renders. */
  readonly registry: Registry;
  /** The runtime's sink (`createRuntime({ metrics })`). */
  readonly runMetrics: RunMetrics;
  /** Counts one event appended to the event log. */
  eventAppended(): void;
  /** Counts one log line dropped because stdout was not read fast enough. */
  logLineDropped(): void;
}

/** Options of {@link createPrometheusMetrics}. */
export interface PrometheusMetricsOptions {
  /** How many SSE streams are open now (read at each scrape). */
  readonly openStreams?: () => number;
  /** Also called at each run end (`runplane serve` logs it). */
  readonly onRunEnded?: (status: string, cause: string, run: EndedRun) => void;
}

/** Latency buckets in seconds: 1 ms to 60 s. */
const latencyBuckets = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * Creates the metrics of one server, in a registry of their own.
 *
 * @remarks Names: `runplane_runs_started_total`, `runplane_runs_ended_total{status,cause}`,
 * `runplane_runs_active`, `runplane_runs_queued`, `runplane_run_cancel_settle_seconds`,
 * `runplane_turn_preempt_next_turn_seconds`, `runplane_model_tokens_total{type}`,
 * `runplane_sse_streams_open`, `runplane_event_log_appends_total`,
 * `runplane_log_lines_dropped_total`, and prom-client's default `process_*` and `nodejs_*`
 * metrics.
 * @param options - {@link PrometheusMetricsOptions}
 * @returns the registry, the runtime's sink and the server's counters
 */
export function createPrometheusMetrics(options: PrometheusMetricsOptions = {}): PrometheusMetrics {
  const registry = new Registry();
  // prom-client's process_* and nodejs_* metrics (CPU, memory, event loop lag, GC, handles).
  collectDefaultMetrics({ register: registry });
  const registers = [registry];
  const started = new Counter({
    name: 'runplane_runs_started_total',
    help: 'Runs that began running (session and nested runs).',
    registers,
  });
  const ended = new Counter({
    name: 'runplane_runs_ended_total',
    help: 'Runs that reached a terminal status, by status and cause.',
    labelNames: ['status', 'cause'] as const,
    registers,
  });
  const active = new Gauge({
    name: 'runplane_runs_active',
    help: 'Runs running now.',
    registers,
  });
  const queued = new Gauge({
    name: 'runplane_runs_queued',
    help: 'Runs waiting in a session queue or for a free slot.',
    registers,
  });
  const cancelSettle = new Histogram({
    name: 'runplane_run_cancel_settle_seconds',
    help: 'From the first cancel request of a run to the run settled (its agent returned or was abandoned).',
    buckets: latencyBuckets,
    registers,
  });
  const preemptNext = new Histogram({
    name: 'runplane_turn_preempt_next_turn_seconds',
    help: "From a TurnLoop preempt to the next turn's run starting.",
    buckets: latencyBuckets,
    registers,
  });
  const tokens = new Counter({
    name: 'runplane_model_tokens_total',
    help: 'Model tokens the agents used, as the providers reported them.',
    labelNames: ['type'] as const,
    registers,
  });
  const { openStreams } = options;
  new Gauge({
    name: 'runplane_sse_streams_open',
    help: 'Open SSE streams (session and inspect streams).',
    registers,
    collect() {
      this.set(openStreams?.() ?? 0);
    },
  });
  const appends = new Counter({
    name: 'runplane_event_log_appends_total',
    help: 'Events appended to the event log.',
    registers,
  });
  const dropped = new Counter({
    name: 'runplane_log_lines_dropped_total',
    help: 'Log lines dropped because stdout was not read fast enough (its buffer was full).',
    registers,
  });
  const input = tokens.labels({ type: 'input' });
  const output = tokens.labels({ type: 'output' });
  const runMetrics: RunMetrics = {
    runStatusChanged(from, to) {
      if (to === 'RUNNING') {
        started.inc();
        active.inc();
      } else if (from === 'RUNNING') active.dec();
      if (to === 'QUEUED') queued.inc();
      else if (from === 'QUEUED') queued.dec();
    },
    runEnded(status, cause, run) {
      ended.inc({ status, cause });
      options.onRunEnded?.(status, cause, run);
    },
    cancelSettled: (durationMs) => cancelSettle.observe(durationMs / 1_000),
    modelTokens(inputTokens, outputTokens) {
      input.inc(inputTokens);
      output.inc(outputTokens);
    },
    preemptToNextTurn: (durationMs) => preemptNext.observe(durationMs / 1_000),
  };
  return {
    registry,
    runMetrics,
    eventAppended: () => appends.inc(),
    logLineDropped: () => dropped.inc(),
  };
}
