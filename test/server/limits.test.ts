/**
 * Limits and hostile input, in memory: the 1 MiB body limit (413), malformed input never
 * answering 500 (a table and a fast-check property), draining (503 for new work), and a history
 * bound of the store (413 `history_too_large`).
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { HistoryTooLargeError, RunplaneError, StaleFenceError } from '../../src/errors.js';
import { HttpError, toHttpError } from '../../src/server/http-error.js';
import type { EventLog } from '../../src/events/event-log.js';
import { gatedAgent } from '../helpers.js';
import { BOB, createTestService } from './helpers.js';

let t: ReturnType<typeof createTestService>;
afterEach(async () => t?.close());

const MiB = 1024 * 1024;

/** Asserts an error answer: the status, and a body of exactly { error: { code, message, ... } }. */
async function expectError(response: Response, status: number, code?: string) {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  const body = (await response.json()) as { error?: { code?: unknown; message?: unknown } };
  expect(typeof body.error?.code).toBe('string');
  expect(typeof body.error?.message).toBe('string');
  if (code !== undefined) expect(body.error?.code).toBe(code);
}

/**
 * Posts a `user.message` to a new session of a service whose session access refuses it with
 * `refusal`: thrown on this instance, or carried as data over a cluster's command Stream.
 */
async function postRefused(refusal: RunplaneError, via: 'thrown' | 'carried'): Promise<Response> {
  t = createTestService({
    sessionAccess: (local) => ({
      ...local,
      execute: async (command) => {
        if (command.type !== 'session.apply_events') return local.execute(command);
        if (via === 'thrown') throw refusal;
        throw HttpError.fromData(JSON.parse(JSON.stringify(toHttpError(refusal).toData())));
      },
    }),
  });
  const id = await t.createSession();
  return t.request('POST', `/api/sessions/${id}/events`, {
    body: { events: [{ type: 'user.message', payload: { text: 'hi' } }] },
  });
}

describe('history bound', () => {
  /**
   * A cluster's session store refuses a write past its history bounds with
   * `HistoryTooLargeError`; a command that meets it is refused through the session access, the
   * seam a cluster plugs in (`ServiceOptions.sessionAccess`), on this instance (`thrown`) or,
   * as a refusal carried over the command Stream, as data (`carried`).
   */
  for (const via of ['thrown', 'carried'] as const) {
    it(`answers 413 history_too_large naming the bound, not 500 (${via})`, async () => {
      const refusal = new HistoryTooLargeError('alice', 's', 'history', 67_108_864, 67_200_000);
      const response = await postRefused(refusal, via);
      expect(response.status).toBe(413);
      expect(await response.json()).toEqual({
        error: {
          code: 'history_too_large',
          message: refusal.message,
          limit: 'history',
          max_bytes: 67_108_864,
          bytes: 67_200_000,
        },
      });
      expect(t.reported).toEqual([]); // a client's bound, not a fault to report
    });
  }
});

describe('session moved', () => {
  /**
   * A cluster's instance that loses a session's lease while it applies a command refuses with
   * `StaleFenceError`; the answer is 503 `session_moved`, on this instance (`thrown`) or carried
   * over the command Stream from the holder (`carried`), with `Retry-After` as a 504
   * `command_timeout` and a 503 `store_unavailable` have.
   */
  for (const via of ['thrown', 'carried'] as const) {
    it(`answers 503 session_moved with Retry-After (${via})`, async () => {
      const refusal = new StaleFenceError('alice', 's', 3, 'deadline_passed');
      const response = await postRefused(refusal, via);
      // Before: 503 without Retry-After, unlike the cluster's other 5xx answers.
      expect(response.status).toBe(503);
      expect(response.headers.get('retry-after')).toBe('1');
      await expectError(response, 503, 'session_moved');
    });
  }
});

describe('body limit', () => {
  it('answers 413 payload_too_large past 1 MiB, and takes a body just under it', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    const batch = JSON.stringify({ events: [{ type: 'user.message', payload: { text: 'hi' } }] });
    const over = batch + ' '.repeat(MiB + 1 - batch.length);
    expect(over.length).toBe(MiB + 1);
    await expectError(
      await t.request('POST', `/api/sessions/${id}/events`, { body: over }),
      413,
      'payload_too_large',
    );
    await expectError(await t.request('POST', '/api/sessions', { body: over }), 413);
    await expectError(await t.request('PATCH', `/api/sessions/${id}`, { body: over }), 413);
    expect(t.runtime.runs.size).toBe(0);
    const under = batch + ' '.repeat(MiB - batch.length);
    const ok = await t.request('POST', `/api/sessions/${id}/events`, { body: under });
    expect(ok.status).toBe(200);
    const [result] = ((await ok.json()) as { results: Array<{ run_id: string }> }).results;
    gate.complete(result?.run_id ?? '', 'done');
  });
});

describe('content type', () => {
  it('answers 415 unsupported_media_type for a body that is not sent as JSON, and takes +json', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    const batch = JSON.stringify({ events: [{ type: 'user.message', payload: { text: 'hi' } }] });
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data']) {
      await expectError(
        await t.request('POST', `/api/sessions/${id}/events`, {
          body: batch,
          headers: { 'content-type': type },
        }),
        415,
        'unsupported_media_type',
      );
    }
    expect(t.runtime.runs.size).toBe(0); // nothing was taken from a refused body
    const ok = await t.request('POST', `/api/sessions/${id}/events`, {
      body: batch,
      headers: { 'content-type': 'application/vnd.runplane+json; charset=utf-8' },
    });
    expect(ok.status).toBe(200);
    const [result] = ((await ok.json()) as { results: Array<{ run_id: string }> }).results;
    gate.complete(result?.run_id ?? '', 'done');
  });
});

describe('methods', () => {
  it('answers 405 method_not_allowed with Allow for a known path, 404 for an unknown one', async () => {
    t = createTestService();
    const id = await t.createSession();
    const replaced = await t.request('PUT', `/api/sessions/${id}`, { body: {} });
    await expectError(replaced, 405, 'method_not_allowed');
    expect(replaced.headers.get('allow')).toBe('GET, DELETE, PATCH');
    const put = await t.request('PUT', `/api/sessions/${id}/events`, { body: {} });
    await expectError(put, 405, 'method_not_allowed');
    expect(put.headers.get('allow')).toBe('POST, GET');
    await expectError(await t.request('GET', '/api/nothing-here'), 404, 'not_found');
    // Authentication still comes first.
    await expectError(await t.request('PUT', `/api/sessions/${id}`, { token: null }), 401);
  });
});

describe('pending hints per session', () => {
  it('answers 429 too_many_hints past the cap, with the batch results applied before it', async () => {
    t = createTestService({ maxPendingHints: 2 });
    const id = await t.createSession();
    const hint = (text: string) => ({ type: 'user.supplement', payload: { text } });
    expect((await t.post(id, [hint('one'), hint('two')])).status).toBe(200);
    const over = await t.post(id, [hint('three')]);
    expect(over.status).toBe(429);
    expect(over.body).toMatchObject({
      error: { code: 'too_many_hints', event_index: 0 },
      results: [],
    });
    expect(t.runtime.inbox.size('alice', id)).toBe(2); // nothing of the refused hint was kept
    const logged = await t.eventLog.read({}, { ownerId: 'alice', sessionId: id });
    expect(logged.filter((e) => e.type === 'user.supplement')).toHaveLength(2);
  });
});

describe('open streams per owner', () => {
  it('answers 429 too_many_streams past the cap; a closed stream frees its place; owners are apart', async () => {
    t = createTestService({ maxStreamsPerOwner: 2 });
    const id = await t.createSession();
    const open = (token?: string, session = id) =>
      t.request('GET', `/api/sessions/${session}/events/stream`, { token });
    const first = await open();
    const second = await open();
    expect([first.status, second.status]).toEqual([200, 200]);
    await expectError(await open(), 429, 'too_many_streams');
    // Another owner has places of its own.
    const bobs = await t.createSession({}, BOB);
    const bob = await open(BOB, bobs);
    expect(bob.status).toBe(200);
    await first.body?.cancel();
    const third = await open();
    expect(third.status).toBe(200);
    for (const response of [second, third, bob]) await response.body?.cancel();
  });
});

describe('malformed input never answers 500', () => {
  it('answers each of these with a 4xx JSON error', async () => {
    t = createTestService({ agent: gatedAgent<string>().agent });
    const id = await t.createSession();
    const events = `/api/sessions/${id}/events`;
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    const cases: Array<[string, string, string | undefined, Record<string, string>?]> = [
      ['POST', events, deep],
      ['POST', events, `{"events":${deep}}`],
      [
        'POST',
        events,
        '{"events":[{"type":"user.message","payload":{"text":"a","strategy":{"__proto__":1}}}]}',
      ],
      ['POST', events, '{"__proto__":{"events":1}}'],
      [
        'POST',
        events,
        '{"events":[{"type":"user.message","payload":{"text":"\\ud800"}}],"x":1e999}',
      ],
      ['POST', events, '{"events":[{"type":"user.interrupt","payload":{"timeout_ms":1e999}}]}'],
      ['POST', events, '{"events":[{"type":"user.interrupt","payload":{"mode":"now"}}]}'],
      ['POST', events, '{"events":[{"type":"user.interrupt","payload":"run-1"}]}'],
      ['POST', events, '{"events":[{"type":"user.interrupt","payload":{"run_id":"x".repeat}}]}'],
      ['POST', events, '\u0000\u0001'],
      ['POST', events, 'null'],
      ['POST', events, '"events"'],
      ['POST', events, '{"events":[{"type":"user.message","payload":{}}]}'],
      ['POST', events, undefined],
      ['PATCH', `/api/sessions/${id}`, '{"strategy":null}'],
      ['PATCH', `/api/sessions/${id}`, '{"grace_ms":"5"}'],
      ['POST', '/api/sessions', '{"strategy":["enqueue"]}'],
      ['GET', '/api/sessions/%E0%A4%A', undefined],
      ['GET', '/api/sessions/..%2F..%2Fetc', undefined],
      ['GET', `/api/sessions/${'x'.repeat(5000)}`, undefined],
      ['GET', '/api/sessions/%00', undefined],
      ['GET', `/api/runs/${'%ff'.repeat(10)}`, undefined],
      ['GET', `${events}?after=1&after=x`, undefined],
      ['GET', `${events}?limit=1e3`, undefined],
      ['GET', `${events}/stream?after=%F0%9F%92%A9`, undefined],
      ['GET', `${events}/stream`, undefined, { 'last-event-id': '-5' }],
      ['PUT', `/api/sessions/${id}`, undefined],
      ['PUT', events, '{}'],
      ['GET', '/api/sessions?after=zzz', undefined],
      ['GET', '/api/sessions?after=1.x&after=2.y', undefined],
      ['GET', '/api/sessions?limit=0', undefined],
      ['GET', '/api/sessions?limit=101', undefined],
      ['GET', '/api/sessions?cursor=1', undefined],
      ['DELETE', '/api/sessions/%00', undefined],
      ['DELETE', `/api/sessions/${'x'.repeat(5000)}`, undefined],
    ];
    for (const [method, path, body, headers] of cases) {
      const response = await t.request(method, path, { body, headers });
      const label = [method, path.slice(0, 60), body?.slice(0, 60)];
      expect([...label, response.status >= 400 && response.status < 500]).toEqual([...label, true]);
      await expectError(response, response.status);
    }
    expect(t.reported).toEqual([]);
  });

  it('property: any JSON as the body, the events or an event is a 4xx or a 200, never a 500', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession({ strategy: 'reject' });
    const event = fc.oneof(
      fc.jsonValue(),
      fc.record({
        type: fc.constantFrom(
          'user.message',
          'user.interrupt',
          'user.tool_confirmation',
          'user.supplement',
          'x',
        ),
        payload: fc.oneof(
          fc.jsonValue(),
          fc.dictionary(
            fc.constantFrom(
              'text',
              'run_id',
              'mode',
              'timeout_ms',
              'tool_use_id',
              'allow',
              'deny_message',
              'strategy',
              'reason',
            ),
            fc.jsonValue(),
          ),
        ),
      }),
    );
    const body = fc.oneof(
      fc.jsonValue(),
      fc.record({ events: fc.oneof(fc.jsonValue(), fc.array(event, { maxLength: 5 })) }),
    );
    await fc.assert(
      fc.asyncProperty(body, async (value) => {
        const response = await t.request('POST', `/api/sessions/${id}/events`, {
          body: JSON.stringify(value),
        });
        expect(response.status).not.toBeGreaterThanOrEqual(500);
        const json = (await response.json()) as Record<string, unknown>;
        if (response.status >= 400)
          expect(json.error).toMatchObject({ code: expect.any(String) as string });
        else expect(Array.isArray(json.results)).toBe(true);
        // Whatever ran is ended, so the next case starts from an idle session.
        t.runtime.session('alice', id).cancelAll({ includeActive: true });
      }),
      { numRuns: 300, seed: 5 },
    );
    expect(t.reported).toEqual([]);
  });
});

describe('store failures', () => {
  it('answer 500 store_failed as JSON, are reported, and leave no run behind', async () => {
    let failing = false;
    t = createTestService({
      agent: gatedAgent<string>().agent,
      wrapEventLog: (log): EventLog => ({
        ...log,
        append(ctx, key, event) {
          if (failing && event.type === 'user.message') {
            throw new RunplaneError('STORE_FAILED', 'event log append failed: disk full');
          }
          return log.append(ctx, key, event);
        },
      }),
    });
    const id = await t.createSession();
    failing = true;
    const response = await t.request('POST', `/api/sessions/${id}/events`, {
      body: { events: [{ type: 'user.message', payload: { text: 'hi' } }] },
    });
    await expectError(response, 500, 'store_failed');
    expect(t.reported).toHaveLength(1);
    expect(t.runtime.runs.size).toBe(0);
    expect(t.runtime.session('alice', id).activeRunId).toBeUndefined();
  });
});

describe('draining', () => {
  it('refuses new work with 503 shutting_down; stops, reads and health still answer', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    const runId = await t.send(id, 'before');
    t.service.drain();
    expect(t.service.draining).toBe(true);
    await expectError(await t.request('POST', '/api/sessions', { body: {} }), 503, 'shutting_down');
    const mixed = await t.post(id, [
      { type: 'user.interrupt', payload: { run_id: runId } },
      { type: 'user.message', payload: { text: 'after' } },
    ]);
    expect(mixed.status).toBe(503);
    // The whole batch was refused: the interrupt in it was not applied.
    expect(t.runtime.runs.find('alice', id, runId)?.status).toBe('RUNNING');
    const stop = await t.post(id, [{ type: 'user.interrupt', payload: { run_id: runId } }]);
    expect(stop.body.results).toEqual([
      { type: 'user.interrupt', result: 'accepted', run_id: runId },
    ]);
    expect((await t.request('GET', `/api/sessions/${id}/events`)).status).toBe(200);
    const health = await t.request('GET', '/healthz', { token: null });
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({
      status: 'draining',
      error: { code: 'shutting_down' },
    });
  });
});

describe('texts and cursors', () => {
  it('refuses a lone UTF-16 surrogate (strict JSON readers could not read the log back)', async () => {
    const service = createTestService();
    const id = await service.createSession();
    const response = await service.request('POST', `/api/sessions/${id}/events`, {
      body: '{"events":[{"type":"user.supplement","payload":{"text":"\\ud800"}}]}',
    });
    expect(response.status).toBe(400);
    const body = (await response.json()) as { error: { code: string } };
    expect(body.error.code).toBe('invalid_event');
    await service.close();
  });

  it('never hands out a next_after past the end of the log', async () => {
    const service = createTestService();
    const id = await service.createSession();
    const response = await service.request('GET', `/api/sessions/${id}/events?after=999999`);
    const body = (await response.json()) as { next_after: number; last_seq: number };
    expect(body.next_after).toBe(body.last_seq);
    await service.close();
  });
});
