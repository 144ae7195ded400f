/**
 * The service on a real socket (startServer on 127.0.0.1, port 0): a message and its SSE
 * stream over TCP, a client that disconnects, and a graceful shutdown that refuses new work.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import http, { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SimulatedClock } from 'xstate';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/server/serve.js';
import { gatedAgent } from '../helpers.js';
import { expectedFrame, flush, sseReader, wordsAgent } from './helpers.js';

const TOKEN = 'socket-token-1';
let server: RunningServer | undefined;
let dir: string | undefined;
afterEach(async () => {
  await server?.shutdown({ graceMs: 0 });
  server = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

const boot = async (options: Parameters<typeof startServer>[0] = {}) => {
  dir = mkdtempSync(join(tmpdir(), 'runplane-socket-'));
  const lines: string[] = [];
  server = await startServer({
    port: 0,
    dbPath: join(dir, 'runplane.db'),
    tokens: `${TOKEN}:alice`,
    log: (line) => lines.push(line),
    ...options,
  });
  return { server, lines };
};

const call = async (base: string, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
};

/** Waits (turn by turn, never on a timer) until `condition` holds. */
async function until(condition: () => boolean) {
  for (let i = 0; i < 10_000 && !condition(); i++) await flush(1);
  expect(condition()).toBe(true);
}

describe('the service on a real socket', () => {
  it('streams a run over TCP with exact frames; a disconnect closes only the stream', async () => {
    const clock = new SimulatedClock();
    const { server: s, lines } = await boot({ clock, agent: wordsAgent(['one ', 'two'], 10) });
    expect(s.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(lines.at(-1)).toBe(`runplane serve: listening on ${s.url}`);
    const session = await call(s.url, 'POST', '/api/sessions', {});
    expect(session.status).toBe(201);
    const id = session.body.session_id as string;
    const sent = await call(s.url, 'POST', `/api/sessions/${id}/events`, {
      events: [{ type: 'user.message', payload: { text: 'count' } }],
    });
    const runId = (sent.body.results as Array<{ run_id: string }>)[0]?.run_id ?? '';

    const controller = new AbortController();
    const response = await fetch(`${s.url}/api/sessions/${id}/events/stream?after=0`, {
      headers: { authorization: `Bearer ${TOKEN}` },
      signal: controller.signal,
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const sse = sseReader(response);
    await sse.until((text) => text.includes('event: session.run_started'));
    clock.increment(10);
    await sse.until((text) => text.includes('"delta":"one "'));
    const key = { ownerId: 'alice', sessionId: id };
    const logged = await s.runtime.eventLog.read({}, key);
    expect(sse.text).toBe(logged.map(expectedFrame).join(''));
    expect(s.service.openStreams).toBe(1);

    controller.abort(); // the client goes away
    await until(() => s.service.openStreams === 0);
    expect(s.runtime.runs.find('alice', id, runId)?.status).toBe('RUNNING');
    clock.increment(10);
    const run = s.runtime.runs.find('alice', id, runId);
    expect((await run?.termination)?.status).toBe('COMPLETED');
  });

  it('shuts down gracefully: 503 for new work while draining, drained once runs finish', async () => {
    const clock = new SimulatedClock();
    const gate = gatedAgent<string>();
    const { server: s } = await boot({ clock, agent: gate.agent });
    const id = (await call(s.url, 'POST', '/api/sessions', {})).body.session_id as string;
    const sent = await call(s.url, 'POST', `/api/sessions/${id}/events`, {
      events: [{ type: 'user.message', payload: { text: 'slow' } }],
    });
    const runId = (sent.body.results as Array<{ run_id: string }>)[0]?.run_id ?? '';
    const stopping = s.shutdown({ graceMs: 60_000 });
    expect(s.service.draining).toBe(true);
    // On the connection still open (the listener is closed): reads work, new work is refused
    // and that connection closed.
    const health = await fetch(`${s.url}/healthz`);
    expect(health.status).toBe(503);
    await health.text();
    const refused = await call(s.url, 'POST', '/api/sessions', {});
    expect(refused).toEqual({
      status: 503,
      body: {
        error: {
          code: 'shutting_down',
          message: 'the service is shutting down and takes no new work',
        },
      },
    });
    expect(gate.ctx(runId).interruptRequested).toBe(true);
    gate.complete(runId, 'finished in time');
    expect(await stopping).toEqual({ drained: true });
    await expect(fetch(`${s.url}/healthz`)).rejects.toThrow();
  });

  it('answers oversized headers and a malformed request in JSON, on the raw socket', async () => {
    const { server: running } = await boot();
    const raw = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(running.port, '127.0.0.1');
        let answer = '';
        socket.on('data', (chunk) => (answer += chunk.toString()));
        socket.on('end', () => resolve(answer));
        socket.on('error', reject);
        socket.write(request);
      });
    const huge = await raw(
      `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    );
    expect(huge).toMatch(/^HTTP\/1\.1 431 Request Header Fields Too Large\r\n/);
    expect(huge).toMatch(/\r\ncontent-type: application\/json\r\n/);
    expect(JSON.parse(huge.slice(huge.indexOf('\r\n\r\n') + 4))).toMatchObject({
      error: { code: 'headers_too_large' },
    });
    const garbled = await raw('THIS IS NOT HTTP\r\n\r\n');
    expect(garbled).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(JSON.parse(garbled.slice(garbled.indexOf('\r\n\r\n') + 4))).toMatchObject({
      error: { code: 'bad_request' },
    });
    // The service itself is unharmed.
    expect((await fetch(`${running.url}/healthz`)).status).toBe(200);
  });

  it('answers a request without Host and an unknown Expect in JSON, on the raw socket', async () => {
    const { server: running } = await boot();
    const raw = (request: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(running.port, '127.0.0.1');
        let answer = '';
        socket.on('data', (chunk) => (answer += chunk.toString()));
        socket.on('end', () => resolve(answer));
        socket.on('error', reject);
        socket.write(request);
      });
    const bodyOf = (answer: string): unknown =>
      JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
    const hostless = await raw('GET /healthz HTTP/1.1\r\n\r\n');
    expect(hostless).toMatch(/^HTTP\/1\.1 400 /);
    expect(hostless).toMatch(/\r\ncontent-type: application\/json\r\n/i);
    expect(hostless).toMatch(/\r\nconnection: close\r\n/i);
    expect(bodyOf(hostless)).toEqual({
      error: { code: 'bad_request', message: 'expected a Host header in an HTTP/1.1 request' },
    });
    const bogus = await raw('GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 999-bogus\r\n\r\n');
    expect(bogus).toMatch(/^HTTP\/1\.1 417 Expectation Failed\r\n/);
    expect(bogus).toMatch(/\r\ncontent-type: application\/json\r\n/);
    expect(bodyOf(bogus)).toMatchObject({ error: { code: 'expectation_failed' } });
    // HTTP/1.0 needs no Host.
    const old = await raw('GET /healthz HTTP/1.0\r\n\r\n');
    expect(old).toMatch(/^HTTP\/1\.1 200 /);
    expect(bodyOf(old)).toEqual({ status: 'ok' });
    expect((await fetch(`${running.url}/healthz`)).status).toBe(200);
  });

  it('reports a busy port as an error and leaves nothing open', async () => {
    const { server: s } = await boot();
    const other = mkdtempSync(join(tmpdir(), 'runplane-socket-'));
    await expect(
      startServer({ port: s.port, dbPath: join(other, 'r.db'), log: () => undefined }),
    ).rejects.toThrow(/EADDRINUSE/);
    rmSync(other, { recursive: true, force: true });
  });

  it('runs the default agent on an OpenAI-compatible endpoint when one is given', async () => {
    const requests: Array<{ authorization: string | undefined; body: Record<string, unknown> }> =
      [];
    const fake = createServer((req, res) => {
      let raw = '';
      req.setEncoding('utf8');
      req.on('data', (part: string) => (raw += part));
      req.on('end', () => {
        requests.push({
          authorization: req.headers.authorization,
          body: JSON.parse(raw) as Record<string, unknown>,
        });
        const chunk = (delta: Record<string, unknown>, finish: string | null) =>
          `data: ${JSON.stringify({
            id: 'c1',
            object: 'chat.completion.chunk',
            created: 1,
            model: 'fake-model',
            choices: [{ index: 0, delta, finish_reason: finish }],
          })}\n\n`;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(chunk({ role: 'assistant', content: 'Hello from ' }, null));
        res.write(chunk({ content: 'the model.' }, null));
        res.write(chunk({}, 'stop'));
        res.end('data: [DONE]\n\n');
      });
    });
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    const baseURL = `http://127.0.0.1:${(fake.address() as AddressInfo).port}/v1`;
    try {
      const { server: s, lines } = await boot({
        openai: { baseURL, apiKey: 'local-key', model: 'fake-model' },
      });
      expect(lines.join('\n')).toContain(`agent: ReAct on fake-model at ${baseURL}`);
      const id = (await call(s.url, 'POST', '/api/sessions', {})).body.session_id as string;
      const sent = await call(s.url, 'POST', `/api/sessions/${id}/events`, {
        events: [{ type: 'user.message', payload: { text: 'hi model' } }],
      });
      const runId = (sent.body.results as Array<{ run_id: string }>)[0]?.run_id ?? '';
      const outcome = await s.runtime.runs.find('alice', id, runId)?.termination;
      expect(outcome).toMatchObject({
        status: 'COMPLETED',
        output: { reply: 'Hello from the model.' },
      });
      expect(requests).toHaveLength(1);
      expect(requests[0]?.authorization).toBe('Bearer local-key');
      expect(requests[0]?.body.model).toBe('fake-model');
      const tools = requests[0]?.body.tools as Array<{ function: { name: string } }>;
      expect(tools.map((tool) => tool.function.name)).toEqual(['calculator', 'clock']);
    } finally {
      await new Promise((resolve) => fake.close(resolve));
    }
  });
});

describe('a paused SSE reader on a real socket', () => {
  it('is ended with a comment once it leaves its byte budget full, and resumes by Last-Event-ID losing nothing', async () => {
    const clock = new SimulatedClock();
    const { server: s } = await boot({ clock, heartbeatMs: 1_000, streamBufferBytes: 65_536 });
    const id = (await call(s.url, 'POST', '/api/sessions', {})).body.session_id as string;
    const key = { ownerId: 'alice', sessionId: id };
    const text = 'y'.repeat(100_000);

    /** Opens the stream; `pause` leaves the socket unread until `resume`. */
    const open = (lastEventId?: number) =>
      new Promise<http.IncomingMessage>((resolve, reject) => {
        const request = http.get(
          `${s.url}/api/sessions/${id}/events/stream`,
          {
            agent: false,
            headers: {
              authorization: `Bearer ${TOKEN}`,
              ...(lastEventId === undefined ? {} : { 'last-event-id': String(lastEventId) }),
            },
          },
          resolve,
        );
        request.on('error', reject);
      });
    /** Reads frames until the stream ends or `done` holds; returns the seqs and comments. */
    const readUntil = (response: http.IncomingMessage, done: (seqs: number[]) => boolean) =>
      new Promise<{ seqs: number[]; comments: string[]; ended: boolean }>((resolve) => {
        const seqs: number[] = [];
        const comments: string[] = [];
        let buffer = '';
        const finish = (ended: boolean) => {
          response.removeAllListeners('data');
          response.destroy();
          resolve({ seqs, comments, ended });
        };
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => {
          buffer += chunk;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const seq = /^id: (\d+)$/m.exec(frame)?.[1];
            if (seq !== undefined) seqs.push(Number(seq));
            else if (frame.startsWith(':')) comments.push(frame);
          }
          if (done(seqs)) finish(false);
        });
        response.once('end', () => finish(true));
        response.resume();
      });

    const paused = await open();
    paused.pause();
    const total = 100; // 10 MB: more than the loopback socket buffers hold
    for (let i = 0; i < total; i++) {
      s.runtime.eventLog.append({}, key, { type: 'test.note', payload: { text }, at: clock.now() });
    }
    // Heartbeat intervals go by while the reader takes nothing.
    for (let i = 0; i < 40; i++) {
      clock.increment(1_000);
      await flush(3);
    }
    const first = await readUntil(paused, (seqs) => seqs.at(-1) === total);
    expect(first.comments.filter((c) => c !== ': heartbeat')).toEqual([
      ': behind; reconnect with Last-Event-ID',
    ]);
    expect(first.ended).toBe(true);
    expect(first.seqs.length).toBeLessThan(total);
    await until(() => s.service.openStreams === 0);

    const last = first.seqs.at(-1) ?? 0;
    const second = await readUntil(await open(last), (seqs) => seqs.at(-1) === total);
    expect([...first.seqs, ...second.seqs]).toEqual(Array.from({ length: total }, (_, i) => i + 1));
  });
});
