/**
 * Shutdown never resets a client, on a real socket with concurrent clients: at the signal the
 * listener refuses new connections; on the connections still open, new work gets 503
 * `shutting_down` with `Retry-After` and `Connection: close`, while reads, a request already
 * under way and `user.interrupt` are answered; SSE streams get their tail and end. Each client
 * has its own keep-alive connection (node:http Agent, one socket), idle before the signal.
 * Every wait is for an answer or an event, never for time.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SimulatedClock } from 'xstate';
import { afterEach, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../src/server/serve.js';
import { gatedAgent } from '../helpers.js';
import { sseReader } from './helpers.js';

const TOKEN = 'shutdown-token-1';
let server: RunningServer | undefined;
let dir: string | undefined;
afterEach(async () => {
  await server?.shutdown({ graceMs: 0 });
  server = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Record<string, unknown>;
}

/** A client with one keep-alive connection; it records every socket error it sees. */
function keepAliveClient(port: number) {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const sockets = new Set<Socket>();
  const errors: Error[] = [];
  const closed = new Map<Socket, Promise<void>>();
  const send = (method: string, path: string, body?: unknown) =>
    new Promise<Answer>((resolve, reject) => {
      const request = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method,
          path,
          agent,
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        },
        (response) => {
          let text = '';
          response.setEncoding('utf8');
          response.on('data', (chunk: string) => (text += chunk));
          response.on('end', () =>
            resolve({
              status: response.statusCode ?? 0,
              headers: response.headers,
              body: JSON.parse(text) as Record<string, unknown>,
            }),
          );
        },
      );
      request.on('socket', (socket: Socket) => {
        if (sockets.has(socket)) return;
        sockets.add(socket);
        socket.on('error', (error) => errors.push(error));
        closed.set(socket, new Promise((done) => socket.once('close', () => done())));
      });
      request.on('error', reject);
      request.end(body === undefined ? undefined : JSON.stringify(body));
    });
  return { send, sockets, errors, closed, agent };
}

it('stops listening at once, answers every open connection, resets no one', async () => {
  dir = mkdtempSync(join(tmpdir(), 'runplane-shutdown-'));
  const gate = gatedAgent<string>();
  server = await startServer({
    port: 0,
    dbPath: join(dir, 'runplane.db'),
    tokens: `${TOKEN}:alice`,
    clock: new SimulatedClock(),
    agent: gate.agent,
    log: () => undefined,
  });
  const s = server;
  const [main, messenger, creator, reader] = [0, 1, 2, 3].map(() => keepAliveClient(s.port));
  if (main === undefined || messenger === undefined || creator === undefined || !reader) {
    throw new Error('four clients');
  }

  // Before the signal: a running run, a stream following it, idle keep-alive connections.
  const id = (await main.send('POST', '/api/sessions', {})).body.session_id as string;
  const sent = await main.send('POST', `/api/sessions/${id}/events`, {
    events: [{ type: 'user.message', payload: { text: 'a long one' } }],
  });
  const runId = (sent.body.results as Array<{ run_id: string }>)[0]?.run_id ?? '';
  await gate.started(runId);
  const stream = await fetch(`${s.url}/api/sessions/${id}/events/stream?after=0`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  });
  const sse = sseReader(stream);
  await sse.until((text) => text.includes('event: session.run_started'));
  for (const client of [messenger, creator, reader]) {
    expect((await client.send('GET', `/api/sessions/${id}`)).status).toBe(200);
  }
  // A request under way: one answered request first (so Node holds the connection), then
  // headers and half a body.
  const slow = connect(s.port, '127.0.0.1');
  const slowErrors: Error[] = [];
  slow.on('error', (error) => slowErrors.push(error));
  slow.setEncoding('utf8');
  let slowText = '';
  slow.on('data', (chunk: string) => (slowText += chunk));
  const slowAnswered = (count: number) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if ((slowText.match(/HTTP\/1\.1 /g) ?? []).length >= count && slowText.endsWith('}')) {
          slow.off('data', check);
          resolve();
        }
      };
      slow.on('data', check);
      check();
    });
  const head = (method: string, path: string, length: number) =>
    `${method} ${path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${TOKEN}\r\n` +
    `Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
  slow.write(head('GET', `/api/sessions/${id}`, 0));
  await slowAnswered(1);
  const hint = JSON.stringify({ events: [{ type: 'user.supplement', payload: { text: 'hi' } }] });
  slowText = '';
  slow.write(head('POST', `/api/sessions/${id}/events`, hint.length) + hint.slice(0, 20));

  // The signal.
  const stopping = s.shutdown({ graceMs: 60_000 });

  const refusedConnection = new Promise<string | undefined>((resolve) => {
    const socket = connect(s.port, '127.0.0.1');
    socket.on('connect', () => {
      socket.destroy();
      resolve(undefined);
    });
    socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code));
  });
  const [newConnection, message, creation, read, runRead] = await Promise.all([
    refusedConnection,
    messenger.send('POST', `/api/sessions/${id}/events`, {
      events: [{ type: 'user.message', payload: { text: 'one more' } }],
    }),
    creator.send('POST', '/api/sessions', {}),
    reader.send('GET', `/api/sessions/${id}`),
    reader.send('GET', `/api/runs/${runId}`),
    (async () => {
      slow.write(hint.slice(20));
      await slowAnswered(1);
    })(),
  ]);
  expect(newConnection).toBe('ECONNREFUSED');
  for (const refused of [message, creation]) {
    expect(refused.status).toBe(503);
    expect(refused.headers['retry-after']).toBe('5');
    expect(refused.headers.connection).toBe('close');
    expect(refused.body).toEqual({
      error: {
        code: 'shutting_down',
        message: 'the service is shutting down and takes no new work',
      },
    });
  }
  // Refused clients' connections end (closed after the answer, never reset).
  await Promise.all([...messenger.closed.values(), ...creator.closed.values()]);
  // Reads keep working, on the same connection.
  expect([read.status, read.headers.connection]).toEqual([200, 'keep-alive']);
  expect(runRead.status).toBe(200);
  expect(runRead.body.status).toBe('RUNNING');
  expect(reader.sockets.size).toBe(1);
  // The request under way completes.
  expect(slowText).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  expect(slowText).toContain('"type":"user.supplement","result":"accepted"');

  // A stop still works on a connection idle since before the signal; it ends the drain.
  const stop = await main.send('POST', `/api/sessions/${id}/events`, {
    events: [{ type: 'user.interrupt', payload: { run_id: runId } }],
  });
  expect(stop.status).toBe(200);
  expect(stop.body.results).toEqual([
    { type: 'user.interrupt', result: 'accepted', run_id: runId },
  ]);
  expect(main.sockets.size).toBe(1);

  // The stream gets its tail (the run's end) and ends cleanly.
  await sse.until(() => false);
  expect(sse.ended).toBe(true);
  expect(sse.text).toContain('event: run.cancelled');
  await stopping;

  expect([...main.errors, ...messenger.errors, ...creator.errors, ...reader.errors]).toEqual([]);
  expect(slowErrors).toEqual([]);
  for (const client of [main, messenger, creator, reader]) client.agent.destroy();
  slow.destroy();
});

it('answers, never resets, a client that reuses an idle connection just after the signal', async () => {
  dir = mkdtempSync(join(tmpdir(), 'runplane-shutdown-'));
  server = await startServer({
    port: 0,
    dbPath: join(dir, 'runplane.db'),
    tokens: `${TOKEN}:alice`,
    log: () => undefined,
  });
  const s = server;
  const clients = Array.from({ length: 8 }, () => keepAliveClient(s.port));
  const id = (await clients[0]!.send('POST', '/api/sessions', {})).body.session_id as string;
  for (const client of clients) {
    expect((await client.send('GET', `/api/sessions/${id}`)).status).toBe(200);
  }
  // Nothing runs: the drain is over at once. Every idle connection is used right after.
  const stopping = s.shutdown({ graceMs: 60_000 });
  const answers = await Promise.all(
    clients.map((client, index) =>
      index % 2 === 0
        ? client.send('GET', `/api/sessions/${id}`)
        : client.send('POST', `/api/sessions/${id}/events`, {
            events: [{ type: 'user.message', payload: { text: 'late' } }],
          }),
    ),
  );
  expect(answers.map((answer) => [answer.status, answer.headers.connection])).toEqual(
    clients.map((_, index) => [index % 2 === 0 ? 200 : 503, 'close']),
  );
  await stopping;
  expect(clients.flatMap((client) => client.errors)).toEqual([]);
  for (const client of clients) client.agent.destroy();
});
