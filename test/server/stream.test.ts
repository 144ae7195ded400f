/**
 * Reading a session's events, in memory: GET .../events with cursors, and the SSE stream with
 * exact frames, resume, heartbeats, the error frame and the disconnect path.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { EventLog } from '../../src/events/event-log.js';
import { gatedAgent } from '../helpers.js';
import { createTestService, expectedFrame, flush, sseReader, wordsAgent } from './helpers.js';

let t: ReturnType<typeof createTestService>;
afterEach(async () => t?.close());

/** Logs `n` events of alternating types into alice's session `id`. */
const seed = (id: string, n: number) => {
  for (let i = 1; i <= n; i++) {
    t.eventLog.append(
      {},
      { ownerId: 'alice', sessionId: id },
      {
        type: i % 2 === 0 ? 'test.even' : 'test.odd',
        runId: 'r1',
        payload: { i },
        at: i,
      },
    );
  }
};

describe('GET /api/sessions/:id/events', () => {
  it('reads after an exclusive cursor, 100 by default, with has_more and next_after', async () => {
    t = createTestService();
    const id = await t.createSession();
    seed(id, 150);
    const first = await t.json(await t.request('GET', `/api/sessions/${id}/events`));
    const events = first.events as Array<{ seq: number }>;
    expect(events).toHaveLength(100);
    expect(events[0]).toEqual({
      seq: 1,
      id: expect.any(String) as string,
      session_id: id,
      run_id: 'r1',
      type: 'test.odd',
      payload: { i: 1 },
      at: 1,
    });
    expect(first).toMatchObject({ next_after: 100, has_more: true, last_seq: 150 });
    const rest = await t.json(await t.request('GET', `/api/sessions/${id}/events?after=100`));
    expect((rest.events as Array<{ seq: number }>).map((e) => e.seq)).toEqual(
      Array.from({ length: 50 }, (_, i) => 101 + i),
    );
    expect(rest).toMatchObject({ next_after: 150, has_more: false });
    const end = await t.json(await t.request('GET', `/api/sessions/${id}/events?after=150`));
    expect(end).toEqual({ events: [], next_after: 150, has_more: false, last_seq: 150 });
  });

  it('filters by types and honours limit up to 1000', async () => {
    t = createTestService();
    const id = await t.createSession();
    seed(id, 1200);
    const even = await t.json(
      await t.request('GET', `/api/sessions/${id}/events?types=test.even&after=10&limit=3`),
    );
    expect((even.events as Array<{ seq: number }>).map((e) => e.seq)).toEqual([12, 14, 16]);
    const max = await t.json(await t.request('GET', `/api/sessions/${id}/events?limit=1000`));
    expect((max.events as unknown[]).length).toBe(1000);
    const both = await t.json(
      await t.request('GET', `/api/sessions/${id}/events?types=test.odd,test.even&limit=2`),
    );
    expect((both.events as Array<{ seq: number }>).map((e) => e.seq)).toEqual([1, 2]);
  });

  it.each([
    ['after=-1', /`after`/],
    ['after=abc', /`after`/],
    ['after=1.5', /`after`/],
    ['after=99999999999999999999', /`after`/],
    ['limit=0', /`limit`/],
    ['limit=1001', /`limit`/],
    ['limit=', /`limit`/],
    ['types=', /`types`/],
    ['types=a,,b', /`types`/],
    ['types=%0Aevil', /`types`/],
  ])('answers 400 invalid_query for %s', async (query, message) => {
    t = createTestService();
    const id = await t.createSession();
    const response = await t.request('GET', `/api/sessions/${id}/events?${query}`);
    expect(response.status).toBe(400);
    const error = (await t.json(response)).error as { code: string; message: string };
    expect(error.code).toBe('invalid_query');
    expect(error.message).toMatch(message);
  });
});

describe('GET /api/sessions/:id/events/stream (SSE)', () => {
  it('replays stored events as exact frames with id: <seq>, then streams live ones', async () => {
    t = createTestService({ agent: wordsAgent(['Hel', 'lo'], 10) });
    const id = await t.createSession();
    const runId = await t.send(id, 'hi');
    const response = await t.request('GET', `/api/sessions/${id}/events/stream`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(response.headers.get('cache-control')).toBe('no-cache, no-transform');
    const sse = sseReader(response);
    await sse.until((text) => text.split('\n\n').length > 5);
    const stored = await t.events(id);
    expect(stored.map((e) => e.type)).toEqual([
      'user.message',
      'session.run_queued',
      'run.status',
      'session.run_started',
      'run.status',
    ]);
    expect(sse.text).toBe(stored.map(expectedFrame).join(''));
    // One frame spelled out in full, bytes and all.
    const first = stored[0];
    expect(sse.frames[0]).toBe(
      `id: 1\nevent: user.message\ndata: {"seq":1,"id":"${first?.id}","session_id":"${id}",` +
        `"run_id":"${runId}","type":"user.message","payload":{"run_id":"${runId}","text":"hi","strategy":"enqueue"},"at":0}\n\n`,
    );
    t.clock.increment(10);
    await sse.until((text) => text.includes('"delta":"Hel"'));
    t.clock.increment(10);
    await sse.until((text) => text.includes('event: run.completed'));
    const all = await t.events(id);
    expect(sse.text).toBe(all.map(expectedFrame).join(''));
    await sse.cancel();
  });

  it('resumes from max(after, Last-Event-ID)', async () => {
    t = createTestService();
    const id = await t.createSession();
    seed(id, 8);
    const all = await t.events(id);
    const cases: Array<[string, Record<string, string>, number]> = [
      ['?after=2', { 'last-event-id': '4' }, 5],
      ['?after=5', { 'last-event-id': '2' }, 6],
      ['', { 'last-event-id': '7' }, 8],
      ['?after=3', {}, 4],
      ['?after=6', { 'last-event-id': '' }, 7],
    ];
    for (const [query, headers, firstSeq] of cases) {
      const response = await t.request('GET', `/api/sessions/${id}/events/stream${query}`, {
        headers,
      });
      const sse = sseReader(response);
      await sse.until((text) => text.includes('id: 8\n'));
      expect([query, headers, sse.text]).toEqual([
        query,
        headers,
        all
          .slice(firstSeq - 1)
          .map(expectedFrame)
          .join(''),
      ]);
      await sse.cancel();
    }
  });

  it('answers 400 for a Last-Event-ID that is not a seq, and 400 for limit on a stream', async () => {
    t = createTestService();
    const id = await t.createSession();
    const bad = await t.request('GET', `/api/sessions/${id}/events/stream`, {
      headers: { 'last-event-id': 'abc' },
    });
    expect(bad.status).toBe(400);
    expect(((await t.json(bad)).error as { code: string }).code).toBe('invalid_last_event_id');
    const limited = await t.request('GET', `/api/sessions/${id}/events/stream?limit=5`);
    expect(limited.status).toBe(400);
  });

  it('answers 400 for a cursor past the log (a forged Last-Event-ID once got silence forever), and streams from the last seq itself', async () => {
    t = createTestService();
    const id = await t.createSession();
    seed(id, 3);
    for (const [query, headers] of [
      ['', { 'last-event-id': '99999999' }],
      ['?after=4', {}],
    ] as const) {
      const ahead = await t.request('GET', `/api/sessions/${id}/events/stream${query}`, {
        headers,
      });
      expect(ahead.status).toBe(400);
      expect(((await t.json(ahead)).error as { message: string }).message).toMatch(
        /at most the session's last seq 3, got (99999999|4)/,
      );
    }
    const atEnd = await t.request('GET', `/api/sessions/${id}/events/stream`, {
      headers: { 'last-event-id': '3' },
    });
    expect(atEnd.status).toBe(200);
    await atEnd.body?.cancel();
  });

  it('filters the stream by types; ids stay the seq of each event', async () => {
    t = createTestService();
    const id = await t.createSession();
    seed(id, 6);
    const response = await t.request('GET', `/api/sessions/${id}/events/stream?types=test.even`);
    const sse = sseReader(response);
    await sse.until((text) => text.includes('id: 6\n'));
    expect(sse.frames.map((frame) => frame.split('\n')[0])).toEqual(['id: 2', 'id: 4', 'id: 6']);
    await sse.cancel();
  });

  it('sends a heartbeat comment every heartbeatMs (15 s by default) on the clock', async () => {
    t = createTestService();
    const id = await t.createSession();
    const sse = sseReader(await t.request('GET', `/api/sessions/${id}/events/stream`));
    await flush();
    t.clock.increment(14_999);
    seed(id, 1);
    await sse.until((text) => text.includes('id: 1\n'));
    expect(sse.text).not.toContain(': heartbeat');
    t.clock.increment(1);
    await sse.until((text) => text.endsWith(': heartbeat\n\n'));
    t.clock.increment(15_000);
    await sse.until((text) => text.split(': heartbeat\n\n').length === 3);
    const [stored] = await t.events(id);
    expect(sse.text).toBe(`${expectedFrame(stored!)}: heartbeat\n\n: heartbeat\n\n`);
    await sse.cancel();
  });

  it('takes an injected heartbeat interval', async () => {
    t = createTestService({ heartbeatMs: 50 });
    const id = await t.createSession();
    const sse = sseReader(await t.request('GET', `/api/sessions/${id}/events/stream`));
    await flush();
    t.clock.increment(50);
    expect(await sse.until((text) => text.length > 0)).toBe(': heartbeat\n\n');
    await sse.cancel();
  });

  it('sends an error frame and closes when the log fails', async () => {
    let failing = false;
    t = createTestService({
      wrapEventLog: (log): EventLog => ({
        ...log,
        async *follow(ctx, key, options) {
          for await (const event of log.follow(ctx, key, options)) {
            yield event;
            if (failing) throw new Error('disk on fire');
          }
        },
      }),
    });
    const id = await t.createSession();
    seed(id, 1);
    const sse = sseReader(await t.request('GET', `/api/sessions/${id}/events/stream`));
    await sse.until((text) => text.includes('id: 1\n'));
    failing = true;
    seed(id, 1);
    const text = await sse.until(() => false); // reads to the end of the stream
    expect(sse.ended).toBe(true);
    const all = await t.events(id);
    expect(text).toBe(
      all.map(expectedFrame).join('') +
        'event: error\ndata: {"error":{"code":"store_failed","message":"the event stream failed: disk on fire"}}\n\n',
    );
    expect(t.service.openStreams).toBe(0);
    expect(t.reported).toHaveLength(1);
  });

  it('a client disconnect closes the stream cleanly and never touches the run', async () => {
    t = createTestService({ agent: wordsAgent(['a', 'b', 'c'], 10) });
    const id = await t.createSession();
    const runId = await t.send(id, 'go');
    const sse = sseReader(await t.request('GET', `/api/sessions/${id}/events/stream`));
    await sse.until((text) => text.includes('event: session.run_started'));
    expect(t.service.openStreams).toBe(1);
    await sse.cancel();
    expect(t.service.openStreams).toBe(0);
    expect(t.runtime.runs.find('alice', id, runId)?.status).toBe('RUNNING');
    for (let i = 0; i < 3; i++) {
      t.clock.increment(10);
      await flush();
    }
    const ended = await t.waitForEvent(id, (e) => e.type === 'run.completed');
    expect(ended.runId).toBe(runId);
    expect((await t.events(id)).some((e) => e.type === 'run.cancelled')).toBe(false);
  });

  it('closeStreams() ends open streams cleanly; the run goes on', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    const runId = await t.send(id, 'go');
    const sse = sseReader(await t.request('GET', `/api/sessions/${id}/events/stream`));
    await sse.until((text) => text.includes('event: session.run_started'));
    t.service.closeStreams();
    await sse.until(() => false);
    expect(sse.ended).toBe(true);
    expect(t.runtime.runs.find('alice', id, runId)?.status).toBe('RUNNING');
    gate.complete(runId, 'done');
  });

  it('closeStreams() first writes what the log already holds (the final events of a shutdown)', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    const runId = await t.send(id, 'go');
    const sse = sseReader(await t.request('GET', `/api/sessions/${id}/events/stream`));
    await sse.until((text) => text.includes('event: session.run_started'));
    // The run ends and the streams are closed in the same tick, before any follower woke up.
    t.runtime.runs.cancel('alice', id, runId);
    t.service.closeStreams();
    const text = await sse.until(() => false);
    expect(sse.ended).toBe(true);
    expect(text).toContain('event: run.cancelled');
    const lastSeq = (await t.events(id)).at(-1)?.seq;
    expect(text).toContain(`id: ${lastSeq}\n`);
  });

  it('accepts the token as ?access_token= on the stream only (EventSource sends no headers)', async () => {
    t = createTestService();
    const id = await t.createSession();
    const ok = await t.request(
      'GET',
      `/api/sessions/${id}/events/stream?access_token=alice-token-1`,
      { token: null },
    );
    expect(ok.status).toBe(200);
    await ok.body?.cancel();
    const wrong = await t.request(
      'GET',
      `/api/sessions/${id}/events/stream?access_token=nope-nope`,
      {
        token: null,
      },
    );
    expect(wrong.status).toBe(401);
    const elsewhere = await t.request(
      'GET',
      `/api/sessions/${id}/events?access_token=alice-token-1`,
      {
        token: null,
      },
    );
    expect(elsewhere.status).toBe(401);
  });
});
