/**
 * HTTP hygiene on a real socket: a slow body is answered 408 in JSON and its connection
 * closed; a client that goes away mid-body is no error of the service (no report, no stack);
 * an answer sent before the body was read says `Connection: close`, so a keep-alive client
 * (Node's own fetch) never reuses a socket the server is about to close. Every wait is for an
 * answer or an event, bounded by the test timeout, never for time.
 */
import type { Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ALICE, createTestService } from './helpers.js';

let t: ReturnType<typeof createTestService> | undefined;
let server: Server | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  server?.closeAllConnections();
  await new Promise((resolve) =>
    server === undefined ? resolve(undefined) : server.close(resolve),
  );
  server = undefined;
  await t?.close();
  t = undefined;
});

/**
 * The test service (real SQLite) on a real socket; `settled` resolves once the service has
 * answered `n` requests (whether or not the client is still there to read the answer).
 */
async function listenOn(options: Parameters<typeof createTestService>[0] = {}) {
  t = createTestService(options);
  const service = t.service;
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  let answered = 0;
  server = createAdaptorServer({
    fetch: async (request: Request) => {
      try {
        return await service.fetch(request);
      } finally {
        answered++;
        for (const waiter of waiters.filter((w) => w.n <= answered)) waiter.resolve();
      }
    },
  }) as Server;
  const running = server;
  await new Promise<void>((resolve) => running.listen(0, '127.0.0.1', resolve));
  const port = (running.address() as AddressInfo).port;
  const settled = (n: number) =>
    new Promise<void>((resolve) => {
      if (answered >= n) resolve();
      else waiters.push({ n, resolve });
    });
  return { port, url: `http://127.0.0.1:${port}`, settled };
}

/** Sends `text` on a fresh socket; resolves with everything read once the server closes it. */
const exchange = (port: number, text: string) =>
  new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (answer += chunk));
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
    socket.write(text);
  });

const partialPost = (path: string) =>
  `POST ${path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer ${ALICE}\r\n` +
  'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"events":';

describe('slow and abandoned bodies', () => {
  it('answers a body that does not arrive in time with a JSON 408 and closes the connection', async () => {
    const { port } = await listenOn({ bodyTimeoutMs: 200 });
    const id = await t!.createSession();
    // 10 of the 100 announced bytes, then nothing: the answer comes, and the socket closes.
    const answer = await exchange(port, partialPost(`/api/sessions/${id}/events`));
    expect(answer).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(answer.toLowerCase()).toContain('\r\nconnection: close\r\n');
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({
      error: { code: 'request_timeout', message: 'expected the request body within 200 ms' },
    });
    expect(t!.runtime.runs.size).toBe(0);
    expect(t!.reported).toEqual([]);
  });

  it('takes a client that closes mid-body as what it is: no 500, no report, no stack', async () => {
    const errors = vi.spyOn(console, 'error');
    const { port, settled } = await listenOn();
    const id = await t!.createSession();
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.write(partialPost(`/api/sessions/${id}/events`));
    socket.destroy(); // Content-Length: 100, 10 bytes, gone
    await settled(1); // the service has answered the abandoned request
    expect(t!.reported).toEqual([]);
    expect(errors).not.toHaveBeenCalled();
    expect(t!.runtime.runs.size).toBe(0);
    expect((await t!.events(id)).length).toBe(0);
  });
});

describe('answers sent before the body was read', () => {
  it('say Connection: close, so Node fetch reuses no dying socket: a 413, then more requests', async () => {
    const { url } = await listenOn({ maxBodyBytes: 1_024 });
    const headers = { authorization: `Bearer ${ALICE}`, 'content-type': 'application/json' };
    for (let round = 0; round < 5; round++) {
      const tooBig = await fetch(`${url}/api/sessions`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ pad: 'x'.repeat(64 * 1024) }),
      });
      expect(tooBig.status).toBe(413);
      expect(tooBig.headers.get('connection')).toBe('close');
      expect(((await tooBig.json()) as { error: { code: string } }).error.code).toBe(
        'payload_too_large',
      );
      const next = await fetch(`${url}/api/sessions`, { method: 'POST', headers, body: '{}' });
      expect(next.status).toBe(201);
      expect(next.headers.get('connection')).toBe('keep-alive');
    }
    // A 401 and a 404 that never read their bodies close too; a read body keeps the socket.
    const unauthorized = await fetch(`${url}/api/sessions`, { method: 'POST', body: '{}' });
    expect([unauthorized.status, unauthorized.headers.get('connection')]).toEqual([401, 'close']);
    const unknown = await fetch(`${url}/nowhere`, { method: 'POST', headers, body: '{}' });
    expect([unknown.status, unknown.headers.get('connection')]).toEqual([404, 'close']);
    const bad = await fetch(`${url}/api/sessions`, { method: 'POST', headers, body: '{' });
    expect([bad.status, bad.headers.get('connection')]).toEqual([400, 'keep-alive']);
  });
});
