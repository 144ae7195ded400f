/**
 * HTTP service, in memory (app.request): authentication, owners, sessions, runs, health.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createServiceApp } from '../../src/server/service-app.js';
import { gatedAgent } from '../helpers.js';
import { ALICE, BOB, createTestService, flush } from './helpers.js';

let t: ReturnType<typeof createTestService>;
afterEach(async () => t?.close());

describe('authentication', () => {
  it('answers 401 with a JSON error and WWW-Authenticate without a valid Bearer token', async () => {
    t = createTestService();
    const cases: Array<Record<string, string>> = [
      {},
      { authorization: 'Bearer nope-not-a-token' },
      { authorization: `Basic ${ALICE}` },
      { authorization: 'Bearer' },
      { authorization: `Bearer ${ALICE} extra` },
    ];
    for (const headers of cases) {
      const response = await t.request('POST', '/api/sessions', { token: null, headers, body: {} });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe('Bearer realm="runplane"');
      const body = await t.json(response);
      expect(body).toEqual({
        error: { code: 'unauthorized', message: expect.any(String) as string },
      });
    }
    // Nothing was created by the refused requests.
    expect(t.countRows('runplane_sessions')).toBe(0);
  });

  it('takes the owner from the token, never from the body', async () => {
    t = createTestService();
    const response = await t.request('POST', '/api/sessions', {
      body: { owner_id: 'bob' },
    });
    expect(response.status).toBe(400);
    const id = await t.createSession();
    expect(t.sessions.get('alice', id)).toBeDefined();
    expect(t.sessions.get('bob', id)).toBeUndefined();
  });

  it("answers 404 for someone else's session on every route, exactly as for a missing one", async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    const runId = await t.send(id, 'hello');
    const routes: Array<[string, string, unknown?]> = [
      ['GET', `/api/sessions/${id}`],
      ['PATCH', `/api/sessions/${id}`, { strategy: 'reject' }],
      ['POST', `/api/sessions/${id}/events`, { events: [{ type: 'user.interrupt' }] }],
      ['GET', `/api/sessions/${id}/events`],
      ['GET', `/api/sessions/${id}/events/stream`],
      ['GET', `/api/runs/${runId}`],
    ];
    for (const [method, path, body] of routes) {
      const asBob = await t.request(method, path, { token: BOB, body });
      const missing = await t.request(method, path.replace(id, 'nope').replace(runId, 'nope'), {
        token: BOB,
        body,
      });
      expect([path, asBob.status]).toEqual([path, 404]);
      expect(missing.status).toBe(404);
      const bobError = (await t.json(asBob)).error as { code: string };
      expect(bobError.code).toBe('not_found');
    }
    // Bob's interrupt never reached alice's run.
    expect(t.runtime.runs.find('alice', id, runId)?.status).toBe('RUNNING');
    gate.complete(runId, 'done');
  });

  it('serves /healthz and the chat page without a token', async () => {
    t = createTestService();
    const health = await t.request('GET', '/healthz', { token: null });
    expect(health.status).toBe(200);
    expect(await t.json(health)).toEqual({ status: 'ok' });
    const page = await t.request('GET', '/', { token: null });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    expect(html).toContain('<title>runplane chat</title>');
    expect(html).toContain('new EventSource(');
    expect(html).not.toMatch(/<script[^>]+src=/); // no CDN, nothing fetched from elsewhere
  });

  it('answers an unknown route with a JSON 404', async () => {
    t = createTestService();
    const response = await t.request('GET', '/api/nothing-here');
    expect(response.status).toBe(404);
    expect(await t.json(response)).toEqual({
      error: { code: 'not_found', message: 'no route for GET /api/nothing-here' },
    });
  });
});

describe('sessions', () => {
  it('POST /api/sessions creates a session (default strategy enqueue, grace 5000 ms)', async () => {
    t = createTestService();
    const response = await t.request('POST', '/api/sessions');
    expect(response.status).toBe(201);
    const body = await t.json(response);
    expect(body).toEqual({
      session_id: expect.stringMatching(/^[\w-]{21}$/) as string,
      mode: 'runs',
      strategy: 'enqueue',
      grace_ms: 5000,
      approval_timeout_ms: 600_000,
      failover: 'mark',
      status: 'idle',
      active_run_id: null,
      queued_run_ids: [],
      pending_approvals: [],
      last_seq: 0,
      created_at: 0,
      updated_at: 0,
    });
    const withStrategy = await t.json(
      await t.request('POST', '/api/sessions', { body: { strategy: 'reject', grace_ms: 250 } }),
    );
    expect(withStrategy).toMatchObject({ strategy: 'reject', grace_ms: 250 });
    const resuming = await t.json(
      await t.request('POST', '/api/sessions', { body: { failover: 'resume' } }),
    );
    expect(resuming).toMatchObject({ failover: 'resume', strategy: 'enqueue' });
    const id = resuming.session_id as string;
    const marking = await t.request('PATCH', `/api/sessions/${id}`, { body: { failover: 'mark' } });
    expect(await t.json(marking)).toMatchObject({ failover: 'mark' });
    expect(await t.json(await t.request('GET', `/api/sessions/${id}`))).toMatchObject({
      failover: 'mark',
    });
  });

  it('rejects bad session bodies with 400 and a message naming the field', async () => {
    t = createTestService();
    const cases: Array<[unknown, string, RegExp]> = [
      [{ strategy: 'later' }, 'invalid_body', /`body\.strategy` to be one of enqueue, reject/],
      [{ grace_ms: -1 }, 'invalid_body', /`body\.grace_ms`/],
      [{ grace_ms: 1.5 }, 'invalid_body', /`body\.grace_ms`/],
      [{ failover: 'retry' }, 'invalid_body', /`body\.failover` to be one of mark, resume/],
      [{ mode: 'loop', failover: 'resume' }, 'invalid_body', /`failover` to be absent/],
      [{ surprise: 1 }, 'invalid_body', /no key "surprise"/],
      [[], 'invalid_body', /expected `body`/],
      ['{not json', 'invalid_json', /JSON/],
    ];
    for (const [body, code, message] of cases) {
      const response = await t.request('POST', '/api/sessions', { body });
      expect(response.status).toBe(400);
      const error = (await t.json(response)).error as { code: string; message: string };
      expect(error.code).toBe(code);
      expect(error.message).toMatch(message);
    }
  });

  it('PATCH changes the strategy; GET shows status, active run and queued runs', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    const patched = await t.request('PATCH', `/api/sessions/${id}`, {
      body: { strategy: 'preempt', grace_ms: 100 },
    });
    expect(await t.json(patched)).toMatchObject({ strategy: 'preempt', grace_ms: 100 });
    const empty = await t.request('PATCH', `/api/sessions/${id}`, { body: {} });
    expect(empty.status).toBe(400);
    const bad = await t.request('PATCH', `/api/sessions/${id}`, { body: { failover: 'never' } });
    expect(bad.status).toBe(400);
    expect(((await t.json(bad)).error as { code: string }).code).toBe('invalid_body');
    await t.request('PATCH', `/api/sessions/${id}`, { body: { strategy: 'enqueue' } });

    const first = await t.send(id, 'one');
    const second = await t.send(id, 'two');
    const busy = await t.json(await t.request('GET', `/api/sessions/${id}`));
    expect(busy).toMatchObject({
      strategy: 'enqueue',
      status: 'running',
      active_run_id: first,
      queued_run_ids: [second],
      last_seq: expect.any(Number) as number,
    });
    expect(busy.last_seq).toBe((await t.events(id)).at(-1)?.seq);
    gate.complete(first, 'a');
    await t.waitForEvent(id, (e) => e.type === 'run.completed' && e.runId === first);
    await flush();
    gate.complete(second, 'b');
    await t.waitForEvent(id, (e) => e.type === 'run.completed' && e.runId === second);
    await t.runtime.session('alice', id).onIdle();
    const idle = await t.json(await t.request('GET', `/api/sessions/${id}`));
    expect(idle).toMatchObject({ status: 'idle', active_run_id: null, queued_run_ids: [] });
  });
});

describe('GET /api/runs/:id', () => {
  it("returns the owner's run record through its lifecycle, with the outcome once settled", async () => {
    const gate = gatedAgent<{ reply: string; reason: string }>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    const runId = await t.send(id, 'hello there');
    const running = await t.json(await t.request('GET', `/api/runs/${runId}`));
    expect(running).toEqual({
      run_id: runId,
      session_id: id,
      status: 'RUNNING',
      input: 'hello there',
      outcome: null,
      created_at: 0,
      updated_at: 0,
      ended_at: null,
    });
    t.clock.increment(40);
    gate.complete(runId, { reply: 'hi!', reason: 'completed' });
    await t.waitForEvent(id, (e) => e.type === 'run.completed');
    await flush();
    expect(await t.json(await t.request('GET', `/api/runs/${runId}`))).toMatchObject({
      status: 'COMPLETED',
      outcome: { status: 'COMPLETED', reason: 'completed', reply: 'hi!' },
      ended_at: 40,
    });
    const unknown = await t.request('GET', '/api/runs/unknown-run');
    expect(unknown.status).toBe(404);
  });
});

describe('createServiceApp options', () => {
  it.each([
    [{ heartbeatMs: 0 }, /`heartbeatMs` to be a positive integer, got 0/],
    [{ maxBodyBytes: -1 }, /`maxBodyBytes`/],
    [{ defaultGraceMs: 1.5 }, /`defaultGraceMs`/],
  ])('refuses %j', (bad, message) => {
    t = createTestService();
    expect(() =>
      createServiceApp({
        runtime: t.runtime,
        agent: { execute: () => Promise.resolve('') },
        sessions: t.sessions,
        runs: t.runs,
        authenticate: () => undefined,
        ...bad,
      }),
    ).toThrow(message);
  });
});
