/**
 * `Idempotency-Key` on `POST /api/sessions` and `POST /api/sessions/:id/events`, on SQLite:
 * real concurrent retries on a socket apply once and all get the first answer, also after a
 * restart; JSON-equal bodies replay, another body is 422; a 4xx is not kept; a key whose
 * first request died is released after its lock; keys expire after 24 h and are capped per
 * owner. A retry racing the first request waits for it (a gated handler shows it exactly).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Hono } from 'hono';
import { SimulatedClock } from 'xstate';
import { afterEach, describe, expect, it } from 'vitest';
import { idempotency, requestFingerprint } from '../../src/server/middleware/idempotency.js';
import { jsonBody } from '../../src/server/middleware/json-body.js';
import { toIdempotencyKeyAccess } from '../../src/server/local-session-access.js';
import { startServer, type RunningServer } from '../../src/server/serve.js';
import { openSqliteDatabase } from '../../src/stores/sqlite/database.js';
import { createSqliteIdempotencyKeys } from '../../src/stores/sqlite/idempotency-keys.js';
import { gatedAgent } from '../helpers.js';
import { createTestService, flush } from './helpers.js';

const TOKEN = 'idempotency-token-1';
let server: RunningServer | undefined;
let t: ReturnType<typeof createTestService> | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await server?.shutdown({ graceMs: 0 });
  server = undefined;
  await t?.close();
  t = undefined;
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  readonly status: number;
  readonly replayed: boolean;
  readonly body: Record<string, unknown>;
}

const post = async (base: string, path: string, key: string, body: string): Promise<Answer> => {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${TOKEN}`,
      'content-type': 'application/json',
      'idempotency-key': key,
    },
    body,
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed') === 'true',
    body: (await response.json()) as Record<string, unknown>,
  };
};

describe('idempotent retries on a socket, on SQLite', () => {
  it('applies concurrent retries once, replays JSON-equal ones, refuses reuse, survives a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runplane-idempotency-'));
    dirs.push(dir);
    const dbPath = join(dir, 'runplane.db');
    const gate = gatedAgent<string>();
    const boot = () =>
      startServer({
        port: 0,
        dbPath,
        tokens: `${TOKEN}:alice`,
        clock: new SimulatedClock(),
        agent: gate.agent,
        log: () => undefined,
        lingerMs: 0,
      });
    server = await boot();
    const s = server;
    const count = (sql: string) => {
      const reader = new Database(dbPath, { readonly: true });
      try {
        return (reader.prepare(sql).get() as { n: number }).n;
      } finally {
        reader.close();
      }
    };

    // Eight concurrent creations under one key: one session, one answer.
    const created = await Promise.all(
      Array.from({ length: 8 }, () => post(s.url, '/api/sessions', 'create-1', '{}')),
    );
    expect(created.map((answer) => answer.status)).toEqual(Array(8).fill(201));
    expect(new Set(created.map((answer) => JSON.stringify(answer.body))).size).toBe(1);
    expect(created.filter((answer) => !answer.replayed)).toHaveLength(1);
    expect(count('SELECT COUNT(*) AS n FROM runplane_sessions')).toBe(1);
    const id = created[0]?.body.session_id as string;

    // Eight concurrent retries of one message: one run, one logged user.message.
    const path = `/api/sessions/${id}/events`;
    const message = '{"events":[{"type":"user.message","payload":{"text":"once"}}]}';
    const sent = await Promise.all(
      Array.from({ length: 8 }, () => post(s.url, path, 'message-1', message)),
    );
    expect(sent.map((answer) => answer.status)).toEqual(Array(8).fill(200));
    expect(new Set(sent.map((answer) => JSON.stringify(answer.body))).size).toBe(1);
    expect(sent.filter((answer) => !answer.replayed)).toHaveLength(1);
    const runId = (sent[0]?.body.results as Array<{ run_id: string }>)[0]?.run_id ?? '';
    expect(s.runtime.runs.size).toBe(1);
    const messages = async () =>
      (await s.runtime.eventLog.read({}, { ownerId: 'alice', sessionId: id })).filter(
        (event) => event.type === 'user.message',
      ).length;
    expect(await messages()).toBe(1);

    // A JSON-equal body (other key order, other spacing) replays; another body is 422.
    const equal = await post(
      s.url,
      path,
      'message-1',
      '{ "events": [ { "payload": { "text": "once" }, "type": "user.message" } ] }',
    );
    expect([equal.status, equal.replayed, equal.body]).toEqual([200, true, sent[0]?.body]);
    const other = await post(
      s.url,
      path,
      'message-1',
      '{"events":[{"type":"user.message","payload":{"text":"twice"}}]}',
    );
    expect(other.status).toBe(422);
    expect((other.body.error as { code: string }).code).toBe('idempotency_key_reused');
    // The same key on another endpoint is another request too.
    expect((await post(s.url, '/api/sessions', 'message-1', '{}')).status).toBe(422);

    // A 4xx applied nothing and is not kept: the same retry applies once the session is free.
    const rejecting =
      '{"events":[{"type":"user.message","payload":{"text":"r","strategy":"reject"}}]}';
    const busy = await post(s.url, path, 'reject-1', rejecting);
    expect([busy.status, busy.replayed]).toEqual([409, false]);
    gate.complete(runId, 'done');
    await s.runtime.runs.find('alice', id, runId)?.termination;
    await s.runtime.session('alice', id).onIdle();
    const accepted = await post(s.url, path, 'reject-1', rejecting);
    expect([accepted.status, accepted.replayed]).toEqual([200, false]);
    const secondRun = (accepted.body.results as Array<{ run_id: string }>)[0]?.run_id ?? '';

    // A 4xx that refused an event after the batch applied earlier ones is kept: its retry
    // replays it and applies nothing twice (the hint is logged once).
    const partly =
      '{"events":[{"type":"user.supplement","payload":{"text":"ONCE-ONLY"}},' +
      '{"type":"user.message","payload":{"text":"r2","strategy":"reject"}}]}';
    const refused = await post(s.url, path, 'partly-1', partly);
    expect([refused.status, refused.replayed]).toEqual([409, false]);
    expect(refused.body.results).toHaveLength(1);
    gate.complete(secondRun, 'done');
    await s.runtime.runs.find('alice', id, secondRun)?.termination;
    await s.runtime.session('alice', id).onIdle();
    const retried = await post(s.url, path, 'partly-1', partly);
    expect([retried.status, retried.replayed, retried.body]).toEqual([409, true, refused.body]);
    const hints = (await s.runtime.eventLog.read({}, { ownerId: 'alice', sessionId: id })).filter(
      (event) => event.type === 'user.supplement',
    );
    expect(hints).toHaveLength(1);

    // After a restart the key is still there: the retry replays, nothing is applied.
    await s.shutdown({ graceMs: 0 });
    server = await boot();
    const again = await post(server.url, path, 'message-1', message);
    expect([again.status, again.replayed, again.body]).toEqual([200, true, sent[0]?.body]);
    expect(server.runtime.runs.size).toBe(0);
    expect(
      (await server.runtime.eventLog.read({}, { ownerId: 'alice', sessionId: id })).filter(
        (event) => event.type === 'user.message',
      ),
    ).toHaveLength(2);
  });
});

describe('key lifetime, in memory over SQLite', () => {
  const batch = { events: [{ type: 'user.supplement', payload: { text: 'hint' } }] };
  const send = (key: string, body: unknown = batch, sessionId?: string) =>
    t!.request(
      'POST',
      sessionId === undefined ? '/api/sessions' : `/api/sessions/${sessionId}/events`,
      {
        body,
        headers: { 'idempotency-key': key },
      },
    );

  it('releases a key whose first request died after the 30 s lock, and forgets keys after 24 h', async () => {
    t = createTestService();
    const id = await t.createSession();
    const path = `/api/sessions/${id}/events`;
    // What a process that died mid-request leaves behind: a claim without an answer.
    t.idempotencyKeys().begin({
      ownerId: 'alice',
      key: 'orphan',
      fingerprint: requestFingerprint('POST', path, batch),
      at: t.clock.now(),
      ttlMs: 24 * 3_600_000,
      lockMs: 30_000,
      maxKeysPerOwner: 10_000,
    });
    const held = await send('orphan', batch, id);
    expect(held.status).toBe(409);
    expect(held.headers.get('retry-after')).toBe('30');
    expect(((await held.json()) as { error: { code: string } }).error.code).toBe(
      'idempotency_key_in_progress',
    );
    expect(t.runtime.inbox.size('alice', id)).toBe(0);
    t.clock.increment(30_000);
    const applied = await send('orphan', batch, id);
    expect(applied.status).toBe(200);
    expect(t.runtime.inbox.size('alice', id)).toBe(1);
    expect((await send('orphan', batch, id)).headers.get('idempotent-replayed')).toBe('true');
    expect(t.runtime.inbox.size('alice', id)).toBe(1);
    // 24 h later the key is forgotten: it may name a new request.
    t.clock.increment(24 * 3_600_000);
    const fresh = await send(
      'orphan',
      { events: [{ type: 'user.supplement', payload: { text: 'new' } }] },
      id,
    );
    expect(fresh.status).toBe(200);
    expect(t.countRows('runplane_idempotency_keys')).toBe(1);
  });

  it('caps the keys one owner holds (429), per owner, and refuses a malformed key (400)', async () => {
    t = createTestService({ maxIdempotencyKeysPerOwner: 2 });
    expect((await send('k1', {})).status).toBe(201);
    expect((await send('"k2"', {})).status).toBe(201); // the draft's sf-string form
    const over = await send('k3', {});
    expect(over.status).toBe(429);
    expect(((await over.json()) as { error: { code: string } }).error.code).toBe(
      'too_many_idempotency_keys',
    );
    expect((await send('k1', {})).headers.get('idempotent-replayed')).toBe('true');
    expect((await send('k2', {})).headers.get('idempotent-replayed')).toBe('true');
    // Bob's keys are his own.
    const bob = await t.request('POST', '/api/sessions', {
      body: {},
      token: 'bob-token-22',
      headers: { 'idempotency-key': 'k1' },
    });
    expect([bob.status, bob.headers.get('idempotent-replayed')]).toEqual([201, null]);
    for (const bad of ['', 'with space', 'x'.repeat(256), 'a"b']) {
      const answer = await send(bad, {});
      expect(answer.status).toBe(400);
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe(
        'invalid_idempotency_key',
      );
    }
  });
});

describe('a retry racing its first request', () => {
  it('waits for it, then replays its answer; the handler runs once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runplane-idempotency-'));
    dirs.push(dir);
    const database = openSqliteDatabase({ path: join(dir, 'keys.db') });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let calls = 0;
    const app = new Hono<{ Variables: { ownerId: string; body: unknown } }>();
    app.use(async (c, next) => {
      c.set('ownerId', 'alice');
      await next();
    });
    app.post(
      '/work',
      jsonBody(),
      idempotency({
        store: toIdempotencyKeyAccess(createSqliteIdempotencyKeys({ database })),
        clock: new SimulatedClock(),
        ttlMs: 24 * 3_600_000,
        lockMs: 30_000,
        maxKeysPerOwner: 10,
      }),
      async (c) => {
        calls++;
        await gate;
        return c.json({ call: calls }, 201);
      },
    );
    const request = async () =>
      await app.request('/work', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': 'race' },
        body: '{"a":1}',
      });
    let firstDone = false;
    let retryDone = false;
    const first = request().then((response) => ((firstDone = true), response));
    await flush();
    const retry = request().then((response) => ((retryDone = true), response));
    await flush();
    expect([calls, firstDone, retryDone]).toEqual([1, false, false]);
    release();
    const [a, b] = await Promise.all([first, retry]);
    expect([a.status, b.status, b.headers.get('idempotent-replayed')]).toEqual([201, 201, 'true']);
    expect([await a.json(), await b.json()]).toEqual([{ call: 1 }, { call: 1 }]);
    expect(calls).toBe(1);
    database.close();
  });
});
