/**
 * `runplane serve` observability on a real socket (README "Observability"): a `traceparent`
 * becomes the parent of the run its request starts, `/metrics` is scraped and parsed by a
 * Prometheus text parser (behind its token on the main port, or on a port of its own), and
 * pino writes one JSON line per request and per run end, with the trace id.
 */
import { context, trace } from '@opentelemetry/api';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { describe, expect, it } from 'vitest';
import { createReActAgent, createScriptedModel, type RunplaneEvent } from '../../src/index.js';
import { createServeObservability } from '../../src/server/serve-observability.js';
import type { RunningServer, ServeOptions } from '../../src/server/serve.js';
import { useObservedServers } from './observed-servers.js';

const TOKEN = 'obs-user-token';
const METRICS_TOKEN = 'obs-metrics-token';
const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
const callerSpanId = '00f067aa0ba902b7';

const { recorder, start } = useObservedServers();

const boot = async (options: ServeOptions) => {
  const lines: string[] = [];
  const logged: Array<Record<string, unknown>> = [];
  const server = await start({
    tokens: `${TOKEN}:alice`,
    log: (line) => lines.push(line),
    logFormat: 'json',
    logDestination: { write: (line) => logged.push(JSON.parse(line) as Record<string, unknown>) },
    agent: createReActAgent({
      model: createScriptedModel([
        { text: 'Hello.', usage: { promptTokens: 42, completionTokens: 2, totalTokens: 44 } },
      ]),
    }),
    ...options,
  });
  return { server, lines, logged };
};

/** Starts one run over the socket with a `traceparent` (sampled unless `flags` says); resolves when it ended. */
async function runOne(s: RunningServer, flags = '01') {
  const completed = new Promise<RunplaneEvent>((resolve) =>
    s.runtime.onEvent((event) => {
      if (['run.completed', 'run.failed', 'run.cancelled'].includes(event.type)) resolve(event);
    }),
  );
  const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  const session = await fetch(`${s.url}/api/sessions`, { method: 'POST', headers, body: '{}' });
  const { session_id: sessionId } = (await session.json()) as { session_id: string };
  const sent = await fetch(`${s.url}/api/sessions/${sessionId}/events`, {
    method: 'POST',
    headers: { ...headers, traceparent: `00-${traceId}-${callerSpanId}-${flags}` },
    body: JSON.stringify({ events: [{ type: 'user.message', payload: { text: 'hi' } }] }),
  });
  expect(sent.status).toBe(200);
  const event = await completed;
  // The span ends once the run has settled, right after its end is logged.
  await s.runtime.session('alice', sessionId).onIdle();
  return { sessionId, event };
}

const sampleOf = (text: string, name: string, labels: Record<string, string> = {}) =>
  parsePrometheusTextFormat(text)
    .find((family) => family.name === name)
    ?.metrics.find((sample) =>
      Object.entries(labels).every(([key, value]) => sample.labels?.[key] === value),
    );

describe('runplane serve observability', () => {
  it('a traceparent parents the run; /metrics behind its token; JSON lines per request and run end', async () => {
    const { server: s, lines, logged } = await boot({ metricsToken: METRICS_TOKEN });
    expect(s.metricsUrl).toBe(`${s.url}/metrics`);
    expect(lines).toContain(`  metrics: ${s.url}/metrics (bearer: the metrics token)`);
    const { event } = await runOne(s);
    expect(event.payload).toEqual({
      reason: 'completed',
      usage: { input_tokens: 42, output_tokens: 2 },
    });

    const runSpan = recorder
      .spans()
      .find((span) => span.attributes['runplane.run.id'] === event.runId);
    expect(runSpan?.spanContext().traceId).toBe(traceId);
    expect(runSpan?.parentSpanContext?.spanId).toBe(callerSpanId);
    expect(runSpan?.parentSpanContext?.isRemote).toBe(true);
    expect(runSpan?.attributes['gen_ai.usage.input_tokens']).toBe(42);

    // Off for a user token, on for the metrics token.
    const denied = await fetch(`${s.url}/metrics`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(denied.status).toBe(401);
    expect(await denied.json()).toMatchObject({ error: { code: 'unauthorized' } });
    const scraped = await fetch(`${s.url}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    expect(scraped.status).toBe(200);
    expect(scraped.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await scraped.text();
    expect(sampleOf(text, 'runplane_runs_started_total')?.value).toBe('1');
    expect(
      sampleOf(text, 'runplane_runs_ended_total', { status: 'COMPLETED', cause: 'completed' })
        ?.value,
    ).toBe('1');
    expect(sampleOf(text, 'runplane_runs_active')?.value).toBe('0');
    expect(sampleOf(text, 'runplane_model_tokens_total', { type: 'input' })?.value).toBe('42');
    expect(sampleOf(text, 'runplane_model_tokens_total', { type: 'output' })?.value).toBe('2');
    expect(
      Number(sampleOf(text, 'runplane_event_log_appends_total')?.value),
    ).toBeGreaterThanOrEqual(5);
    expect(sampleOf(text, 'runplane_sse_streams_open')?.value).toBe('0');
    // prom-client's default metrics, on the service's own registry.
    expect(Number(sampleOf(text, 'process_resident_memory_bytes')?.value)).toBeGreaterThan(0);
    expect(sampleOf(text, 'nodejs_eventloop_lag_seconds')).toBeDefined();

    const requestLine = logged.find(
      (line) =>
        line.msg === 'request' && line.method === 'POST' && String(line.path).endsWith('/events'),
    );
    expect(requestLine).toMatchObject({ level: 'info', status: 200, service: 'runplane' });
    // No span of ours records the request itself: the caller's trace id stays out of its line.
    expect(requestLine).not.toHaveProperty('trace_id');
    expect(typeof requestLine?.duration_ms).toBe('number');
    expect(
      logged.find((line) => line.msg === 'request' && line.path === '/api/sessions'),
    ).not.toHaveProperty('trace_id');
    expect(logged.find((line) => line.msg === 'run ended')).toMatchObject({
      level: 'info',
      run_id: event.runId,
      owner_id: 'alice',
      status: 'COMPLETED',
      cause: 'completed',
      usage: { input_tokens: 42, output_tokens: 2 },
      trace_id: traceId,
    });
  });

  it('/metrics on a port of its own; off by default', async () => {
    const { server: s } = await boot({ metricsPort: 0 });
    expect(s.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    expect(s.metricsUrl).not.toBe(`${s.url}/metrics`);
    await runOne(s);
    const text = await (await fetch(s.metricsUrl ?? '')).text();
    expect(sampleOf(text, 'runplane_runs_started_total')?.value).toBe('1');
    // Not on the main port: the service's own 404.
    expect((await fetch(`${s.url}/metrics`)).status).toBe(404);
    await s.shutdown({ graceMs: 0 });

    const { server: plain } = await boot({});
    expect(plain.metricsUrl).toBeUndefined();
    const answer = await fetch(`${plain.url}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    expect(answer.status).toBe(404);
  });

  it('--traceparent: parent (the caller samples), link (a root span linked to the caller), ignore', async () => {
    const agent = { execute: () => Promise.resolve({ reply: 'ok' }) };
    const runSpanOf = (runId: string | undefined) =>
      recorder
        .spans()
        .find(
          (span) => span.name === 'runplane.run' && span.attributes['runplane.run.id'] === runId,
        );
    const { server: parent } = await boot({ agent });
    // The caller's unsampled flag suppresses our run span; its sampled flag records it.
    expect(runSpanOf((await runOne(parent, '00')).event.runId)).toBeUndefined();
    const sampled = runSpanOf((await runOne(parent, '01')).event.runId);
    expect(sampled?.parentSpanContext?.spanId).toBe(callerSpanId);
    await parent.shutdown({ graceMs: 0 });

    const { server: link } = await boot({ agent, traceparent: 'link' });
    const linked = runSpanOf((await runOne(link, '00')).event.runId);
    expect(linked?.parentSpanContext).toBeUndefined();
    expect(linked?.spanContext().traceId).not.toBe(traceId);
    expect(linked?.links.map((l) => [l.context.traceId, l.context.spanId])).toEqual([
      [traceId, callerSpanId],
    ]);
    await link.shutdown({ graceMs: 0 });

    const { server: ignore } = await boot({ agent, traceparent: 'ignore' });
    const ignored = runSpanOf((await runOne(ignore, '01')).event.runId);
    expect(ignored?.parentSpanContext).toBeUndefined();
    expect(ignored?.spanContext().traceId).not.toBe(traceId);
    expect(ignored?.links).toEqual([]);
  });

  it("a request line names a trace only when a recording span is active in the request's context", async () => {
    const logged: Array<Record<string, unknown>> = [];
    const observability = createServeObservability({
      logFormat: 'json',
      logDestination: { write: (line) => logged.push(JSON.parse(line) as Record<string, unknown>) },
    });
    let seen: string | undefined;
    const observed = observability.observe(() => {
      seen = trace.getSpan(context.active())?.spanContext().spanId;
      return new Response('ok');
    });
    const request = () =>
      new Request('http://localhost/api/sessions', {
        headers: { traceparent: `00-${traceId}-${callerSpanId}-01` },
      });
    await observed(request());
    expect(logged[0]).not.toHaveProperty('trace_id');
    expect(seen).toBe(callerSpanId);

    // An application's HTTP instrumentation made a server span: it is kept, and logged.
    const server = recorder.tracer.startSpan('GET /api/sessions');
    await context.with(trace.setSpan(context.active(), server), () => observed(request()));
    server.end();
    expect(logged[1]).toMatchObject({ trace_id: server.spanContext().traceId });
    expect(seen).toBe(server.spanContext().spanId);
  });

  it('--metrics-port binds --metrics-host (127.0.0.1), not --host; beyond loopback without a token it warns', async () => {
    const warning = (lines: string[]) => lines.filter((line) => line.includes('warning'));
    const wide = await boot({ host: '0.0.0.0', metricsPort: 0 });
    expect(wide.server.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    expect(warning(wide.lines)).toEqual([]);
    await wide.server.shutdown({ graceMs: 0 });

    const open = await boot({ metricsPort: 0, metricsHost: '0.0.0.0' });
    expect(open.server.metricsUrl).toMatch(/^http:\/\/0\.0\.0\.0:\d+\/metrics$/);
    expect(warning(open.lines)).toEqual([
      `  warning: /metrics at ${open.server.metricsUrl} answers anyone who can reach 0.0.0.0 with no token (set --metrics-token, or --metrics-host 127.0.0.1)`,
    ]);
    await open.server.shutdown({ graceMs: 0 });

    const guarded = await boot({
      metricsPort: 0,
      metricsHost: '0.0.0.0',
      metricsToken: METRICS_TOKEN,
    });
    expect(warning(guarded.lines)).toEqual([]);
  });

  it("a failed run's line says its error (cut to 500 characters) and code, never its input", async () => {
    const agent = {
      execute: () =>
        Promise.reject(
          Object.assign(new Error(`model down ${'!'.repeat(1_000)}`), { code: 'MODEL_DOWN' }),
        ),
    };
    const { server: s, logged } = await boot({ agent });
    const { event } = await runOne(s);
    expect(event.type).toBe('run.failed');
    const line = logged.find((entry) => entry.msg === 'run ended');
    expect(line).toMatchObject({
      level: 'warn',
      status: 'FAILED',
      cause: 'error',
      code: 'MODEL_DOWN',
    });
    expect(line?.error).toBe(`model down ${'!'.repeat(489)}`);
    expect(JSON.stringify(line)).not.toContain('"hi"');
  });

  it('the demo model spent no tokens: no usage in run.completed, the run-end line or the metric', async () => {
    const { server: s, logged } = await boot({ agent: undefined, chunkDelayMs: 0, metricsPort: 0 });
    const { event } = await runOne(s);
    expect(event.payload).toEqual({ reason: 'completed' });
    expect(logged.find((line) => line.msg === 'run ended')).not.toHaveProperty('usage');
    const text = await (await fetch(s.metricsUrl ?? '')).text();
    expect(sampleOf(text, 'runplane_model_tokens_total', { type: 'input' })).toBeUndefined();
  });

  it('an SSE stream logs a second line when it closes: how long it was open, how many events', async () => {
    let closedLine!: (line: Record<string, unknown>) => void;
    const streamClosed = new Promise<Record<string, unknown>>((resolve) => (closedLine = resolve));
    const { server: s } = await boot({
      logDestination: {
        write: (line) => {
          const entry = JSON.parse(line) as Record<string, unknown>;
          if (entry.msg === 'stream closed') closedLine(entry);
        },
      },
    });
    const { sessionId } = await runOne(s);
    const stream = await fetch(`${s.url}/api/sessions/${sessionId}/events/stream?after=0`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const reader = (stream.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = '';
    // Every event the run logged, up to its end.
    while (!text.includes('event: run.completed')) {
      const { value } = await reader.read();
      text += decoder.decode(value, { stream: true });
    }
    const sent = text.match(/^data:/gm)?.length ?? 0;
    await reader.cancel(); // the client goes away
    const line = await streamClosed;
    expect(line).toMatchObject({
      level: 'info',
      method: 'GET',
      path: `/api/sessions/${sessionId}/events/stream`,
      status: 200,
      events: sent,
    });
    expect(sent).toBeGreaterThanOrEqual(5);
    expect(typeof line.duration_ms).toBe('number');
  });
});
