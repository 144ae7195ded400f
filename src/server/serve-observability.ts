/**
 * The observability of `runplane serve` (README "Observability"): trace context from each
 * request's `traceparent` (the W3C propagator) into the runs it starts, one pino line per
 * request and per run end, and the Prometheus metrics at `GET /metrics`, which is off unless
 * a metrics token (on the main port) or a metrics port (a listener of its own) is given.
 *
 * @module
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import {
  context,
  propagation,
  ROOT_CONTEXT,
  trace,
  type Context,
  type TextMapGetter,
} from '@opentelemetry/api';
import type { DestinationStream, Logger } from 'pino';
import { InvalidArgumentError } from '../errors.js';
import type { EventLog } from '../events/event-log.js';
import { registerTraceContext } from '../observability/async-context.js';
import { withCallerLink } from '../observability/run-spans.js';
import { createServeLogger, type LogFormat, type LogLevel } from '../observability/logger.js';
import { createPrometheusMetrics } from '../observability/prometheus-metrics.js';
import {
  createOtelRunMetrics,
  type EndedRun,
  type RunMetrics,
} from '../observability/run-metrics.js';
import { listen, stopListening } from './connections.js';
import { createMetricsHandler } from './routes/metrics.js';

/** @internal What {@link createServeObservability} needs. */
export interface ServeObservabilityOptions {
  /** Serve `/metrics` on the main port, behind this bearer token. */
  readonly metricsToken?: string | undefined;
  /** Serve `/metrics` on a listener of its own on this port (0: any free one). */
  readonly metricsPort?: number | undefined;
  /** The interface of the metrics listener. @default '127.0.0.1' */
  readonly metricsHost?: string | undefined;
  readonly logFormat?: LogFormat | undefined;
  readonly logLevel?: LogLevel | undefined;
  readonly logDestination?: DestinationStream | undefined;
  /** What a request's `traceparent` is to the runs it starts. @default 'parent' */
  readonly traceparent?: TraceparentMode | undefined;
}

/**
 * What a request's `traceparent` is to the runs (and loop turns) it starts: `parent` (their
 * parent: the caller's sampled flag decides whether they record, under the usual ParentBased
 * sampler), `link` (a root span, sampled by this process, with a span link to the caller), or
 * `ignore` (a root span, no link).
 */
export type TraceparentMode = 'parent' | 'link' | 'ignore';

/** The {@link TraceparentMode}s, for validation. */
export const traceparentModes: readonly TraceparentMode[] = ['parent', 'link', 'ignore'];

/** What a metrics token may be: 8-256 visible ASCII characters, as a user token. */
const metricsTokenPattern = /^[\x21-\x7e]{8,256}$/;

const headerGetter: TextMapGetter<Headers> = {
  get: (headers, key) => headers.get(key) ?? undefined,
  keys: (headers) => {
    const keys: string[] = [];
    headers.forEach((_value, key) => keys.push(key));
    return keys;
  },
};

/** @internal The serve side of observability: one per server. */
export interface ServeObservability {
  /** The runtime's metrics sink (`createRuntime({ metrics })`). */
  readonly runMetrics: RunMetrics;
  readonly logger: Logger | undefined;
  /** Wraps the service's fetch: trace context, request lines, `/metrics` on the main port. */
  observe(
    fetch: (request: Request) => Response | Promise<Response>,
  ): (request: Request) => Promise<Response>;
  /** Counts the appends of `eventLog` (for `runplane_event_log_appends_total`). */
  countAppends<T extends EventLog>(eventLog: T): T;
  /** Where SSE stream counts come from (read at each scrape). */
  readOpenStreams(read: () => number): void;
  /**
   * Starts the metrics listener, if a metrics port was given.
   *
   * @param main - the main listener's address
   * @returns the URL of `/metrics` and a warning when it answers beyond loopback with no
   *   token, or `undefined` when it is off
   */
  listen(main: AddressInfo): Promise<{ url: string; warning: string | undefined } | undefined>;
  /** Stops the metrics listener and flushes the log lines still buffered (at most 2 s). */
  close(): Promise<void>;
}

/** Milliseconds since `startedAt` (a `performance.now()`), to the microsecond. */
const msSince = (startedAt: number) => Math.round((performance.now() - startedAt) * 1_000) / 1_000;

/**
 * `body` passed through as it is read (no buffering of its own), counting the SSE events in it
 * (`data:` lines; heartbeat comments are not events); `onClose(events)` is called once, when it
 * ends, fails or its reader goes away.
 */
function followStream(
  body: ReadableStream<Uint8Array>,
  onClose: (events: number) => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let events = 0;
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    onClose(events);
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            close();
            controller.close();
            return;
          }
          events += decoder.decode(value, { stream: true }).match(/^data:/gm)?.length ?? 0;
          controller.enqueue(value);
        } catch (error) {
          close();
          controller.error(error);
        }
      },
      async cancel(reason) {
        close();
        await reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}

/** Whether `address` (a bound listener's) is reachable from this host only. */
const isLoopback = (address: string) =>
  address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');

const urlOf = (address: AddressInfo) =>
  `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}/metrics`;

/**
 * Creates the observability of one server (see the module note).
 *
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a bad `metricsPort`, a
 *   `metricsToken` that is not 8-256 visible ASCII characters, or an unknown `traceparent`
 * @internal
 */
export function createServeObservability(options: ServeObservabilityOptions): ServeObservability {
  const { metricsPort, metricsToken } = options;
  const traceparent = options.traceparent ?? 'parent';
  if (!traceparentModes.includes(traceparent)) {
    throw new InvalidArgumentError(
      'traceparent',
      `expected \`traceparent\` to be one of ${traceparentModes.join(', ')}, got ${JSON.stringify(traceparent)}`,
    );
  }
  if (
    metricsPort !== undefined &&
    !(Number.isInteger(metricsPort) && metricsPort >= 0 && metricsPort <= 65_535)
  ) {
    throw new InvalidArgumentError(
      'metricsPort',
      `expected \`metricsPort\` to be 0-65535, got ${String(metricsPort)}`,
    );
  }
  // A token no scraper can send (blank, short, with whitespace, a trailing newline from a
  // secret file, non-ASCII) would refuse every scrape in silence: refused here instead.
  if (metricsToken !== undefined && !metricsTokenPattern.test(metricsToken)) {
    throw new InvalidArgumentError(
      'metricsToken',
      `expected \`metricsToken\` to be 8-256 visible ASCII characters, got ${metricsToken.length} characters that are not (the value is a secret, not shown)`,
    );
  }
  registerTraceContext();
  const serveLogger = createServeLogger(options.logFormat ?? 'none', {
    level: options.logLevel,
    destination: options.logDestination,
    onDrop: () => prometheus?.logLineDropped(),
  });
  const logger = serveLogger?.logger;
  const enabled = options.metricsToken !== undefined || options.metricsPort !== undefined;
  let openStreams = () => 0;
  const logRunEnd = (status: string, cause: string, run: EndedRun) =>
    logger?.[status === 'FAILED' ? 'warn' : 'info'](
      {
        run_id: run.runId,
        owner_id: run.ownerId,
        session_id: run.sessionId,
        status,
        cause,
        ...(run.usage === undefined ? {} : { usage: run.usage }),
        ...(run.error === undefined
          ? {}
          : {
              error: run.error.message,
              ...(run.error.code === undefined ? {} : { code: run.error.code }),
            }),
        ...(run.traceId === undefined ? {} : { trace_id: run.traceId }),
      },
      'run ended',
    );
  const prometheus = enabled
    ? createPrometheusMetrics({ openStreams: () => openStreams(), onRunEnded: logRunEnd })
    : undefined;
  const otel = createOtelRunMetrics();
  const runMetrics: RunMetrics = prometheus?.runMetrics ?? {
    ...otel,
    runEnded(status, cause, run) {
      otel.runEnded(status, cause, run);
      logRunEnd(status, cause, run);
    },
  };
  const metricsHandler =
    prometheus === undefined
      ? undefined
      : createMetricsHandler(prometheus.registry, options.metricsToken);
  const onMainPort = options.metricsPort === undefined ? metricsHandler : undefined;
  let server: Server | undefined;

  const logRequest = (
    request: Request,
    status: number,
    startedAt: number,
    traceId: string | undefined,
  ) => {
    if (logger === undefined) return;
    const { pathname } = new URL(request.url);
    logger[status >= 500 ? 'error' : 'info'](
      {
        method: request.method,
        path: pathname,
        status,
        duration_ms: msSince(startedAt),
        ...(traceId === undefined ? {} : { trace_id: traceId }),
      },
      'request',
    );
  };

  /**
   * The context a request runs in: the active one when it holds a recording span (an HTTP
   * instrumentation of the application made a server span, having read `traceparent` itself),
   * else the request's `traceparent` as `--traceparent` says.
   */
  const requestContext = (headers: Headers): Context => {
    const active = context.active();
    if (trace.getSpan(active)?.isRecording() === true) return active;
    if (traceparent === 'ignore') return ROOT_CONTEXT;
    const extracted = propagation.extract(ROOT_CONTEXT, headers, headerGetter);
    const caller = trace.getSpanContext(extracted);
    return traceparent === 'link' && caller !== undefined
      ? withCallerLink(ROOT_CONTEXT, caller)
      : extracted;
  };

  return {
    runMetrics,
    logger,
    observe(fetch) {
      return async (request) => {
        const startedAt = performance.now();
        const parent = requestContext(request.headers);
        // Only a span this process records may put its trace id in our logs: a caller's
        // `traceparent` alone would let any client write any id there.
        const active = trace.getSpan(parent);
        const traceId = active?.isRecording() === true ? active.spanContext().traceId : undefined;
        let status = 500;
        try {
          const response =
            onMainPort !== undefined && new URL(request.url).pathname === '/metrics'
              ? await onMainPort(request)
              : await context.with(parent, () => fetch(request));
          status = response.status;
          const isStream = response.headers.get('content-type')?.startsWith('text/event-stream');
          if (logger === undefined || response.body === null || isStream !== true) return response;
          // The request line went out with the headers; a second line when the stream closes.
          const body = followStream(response.body, (events) =>
            logger.info(
              {
                method: request.method,
                path: new URL(request.url).pathname,
                status,
                duration_ms: msSince(startedAt),
                events,
                ...(traceId === undefined ? {} : { trace_id: traceId }),
              },
              'stream closed',
            ),
          );
          return new Response(body, {
            status,
            statusText: response.statusText,
            headers: response.headers,
          });
        } finally {
          logRequest(request, status, startedAt, traceId);
        }
      };
    },
    countAppends(eventLog) {
      if (prometheus === undefined) return eventLog;
      const append = eventLog.append.bind(eventLog);
      eventLog.append = (ctx, key, event) => {
        const stored = append(ctx, key, event);
        prometheus.eventAppended();
        return stored;
      };
      return eventLog;
    },
    readOpenStreams(read) {
      openStreams = read;
    },
    async listen(main) {
      if (metricsHandler === undefined) return undefined;
      if (metricsPort === undefined) return { url: urlOf(main), warning: undefined };
      const handler = metricsHandler;
      const host = options.metricsHost ?? '127.0.0.1';
      server = createAdaptorServer({
        fetch: (request: Request) => handler(request),
        hostname: host,
      }) as Server;
      const address = await listen(server, metricsPort, host);
      const url = urlOf(address);
      return {
        url,
        warning:
          metricsToken === undefined && !isLoopback(address.address)
            ? `/metrics at ${url} answers anyone who can reach ${address.address} with no token (set --metrics-token, or --metrics-host 127.0.0.1)`
            : undefined,
      };
    },
    async close() {
      // The last lines (run ends of the shutdown) leave the buffer; a stalled reader gets 2 s.
      await serveLogger?.flush(2_000);
      if (server === undefined) return;
      const stopped = stopListening(server);
      server.closeAllConnections();
      await stopped;
    },
  };
}
