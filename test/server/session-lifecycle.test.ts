/**
 * Deleting sessions, listing them, and the background sweep (deleted sessions' data, retention),
 * on a real SQLite file. The sweep's non-blocking is shown by ordering: the sweep is held between
 * two of its steps, and requests are answered while it is held.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createDataSweeper, type DataSweeper } from '../../src/server/data-sweeper.js';
import { deferred, gatedAgent, type Deferred } from '../helpers.js';
import { ALICE, BOB, createTestService, sseReader } from './helpers.js';

let t: ReturnType<typeof createTestService> | undefined;
let sweeper: DataSweeper | undefined;
afterEach(async () => {
  await sweeper?.stop();
  sweeper = undefined;
  await t?.close();
  t = undefined;
});

/** Rows of every per-session table that belong to alice's `sessionId`. */
function rowsOf(service: ReturnType<typeof createTestService>, sessionId: string) {
  const count = (table: string) => service.countSessionRows(table, sessionId);
  return {
    sessions: count('runplane_sessions'),
    events: count('runplane_events'),
    seqs: count('runplane_event_seqs'),
    history: count('runplane_session_messages'),
    hints: count('runplane_inbox'),
    runs: count('runplane_runs'),
    keys: count('runplane_idempotency_keys'),
  };
}

const none = { sessions: 0, events: 0, seqs: 0, history: 0, hints: 0, runs: 0, keys: 0 };

describe('GET /api/sessions', () => {
  it("lists the owner's sessions newest first, page by page with a cursor", async () => {
    t = createTestService();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(await t.createSession());
      if (i !== 2) t.clock.increment(1_000); // two sessions share a created_at
    }
    await t.createSession({}, BOB);
    const seen: string[] = [];
    let after: string | null = null;
    let pages = 0;
    do {
      const query: string =
        after === null ? '?limit=2' : `?limit=2&after=${encodeURIComponent(after)}`;
      const response = await t.request('GET', `/api/sessions${query}`);
      expect(response.status).toBe(200);
      const body = (await response.json()) as {
        sessions: Array<Record<string, unknown>>;
        next_after: string | null;
        has_more: boolean;
      };
      for (const session of body.sessions) {
        expect(Object.keys(session)).toEqual([
          'session_id',
          'mode',
          'created_at',
          'updated_at',
          'last_seq',
          'title',
        ]);
        expect(session.mode).toBe('runs');
        seen.push(session.session_id as string);
      }
      expect(body.has_more).toBe(body.next_after !== null);
      after = body.next_after;
      pages++;
    } while (after !== null);
    expect(pages).toBe(3);
    // ids[2] and ids[3] share a created_at: between them, the greater id comes first.
    expect(seen).toEqual([ids[4], ...[ids[2], ids[3]].sort().reverse(), ids[1], ids[0]]);
    const bob = (await t.json(await t.request('GET', '/api/sessions', { token: BOB }))) as {
      sessions: unknown[];
    };
    expect(bob.sessions).toHaveLength(1);
    // A session's title is its first message, on one line, cut at 80 characters.
    await t.send(ids[4] ?? '', `  What is\n\n${'very '.repeat(30)}long?  `);
    await t.send(ids[4] ?? '', 'a second message');
    const titled = (await t.json(await t.request('GET', '/api/sessions?limit=2'))) as {
      sessions: Array<{ title: string | null }>;
    };
    const title = `What is ${'very '.repeat(30)}long?`.slice(0, 79) + '…';
    expect(titled.sessions.map((s) => s.title)).toEqual([title, null]);
  });
});

describe('DELETE /api/sessions/:id', () => {
  it('cancels its runs, then removes its log, history, hints, run records and keys; later requests are 404', async () => {
    const gate = gatedAgent<{ reply: string }>();
    let deletedKey: { ownerId: string; sessionId: string } | undefined;
    t = createTestService({ agent: gate.agent, onSessionDeleted: (key) => (deletedKey = key) });
    const created = await t.request('POST', '/api/sessions', {
      body: {},
      headers: { 'idempotency-key': 'create-1' },
    });
    const id = ((await created.json()) as { session_id: string }).session_id;
    const other = await t.createSession();
    const first = await t.send(id, 'first');
    await gate.started(first);
    gate.complete(first, { reply: 'done' });
    await t.waitForEvent(id, (e) => e.type === 'run.completed');
    await t.runtime.sessionStore.append({}, { ownerId: 'alice', sessionId: id }, [
      { role: 'user', content: 'first' },
    ]);
    const running = await t.send(id, 'second');
    await gate.started(running);
    const queued = await t.send(id, 'third');
    expect(
      (await t.post(id, [{ type: 'user.supplement', payload: { text: 'a hint' } }])).status,
    ).toBe(200);
    const otherRun = await t.send(other, 'elsewhere');
    await gate.started(otherRun);
    const before = rowsOf(t, id);
    expect(before).toEqual({
      sessions: 1,
      events: expect.any(Number) as number,
      seqs: 1,
      history: 1,
      hints: 1,
      runs: 3,
      keys: 1,
    });

    const watching = sseReader(await t.request('GET', `/api/sessions/${id}/events/stream`));
    await watching.until((text) => text.includes('event: user.supplement'));
    const response = await t.request('DELETE', `/api/sessions/${id}`);
    expect(response.status).toBe(204);
    // Cancelled first: both runs ended before the answer, the other session's run untouched.
    expect(t.runtime.runs.find('alice', id, running)).toBeUndefined();
    expect(t.runtime.runs.find('alice', id, queued)).toBeUndefined();
    expect(t.runtime.runs.find('alice', other, otherRun)?.status).toBe('RUNNING');
    expect(deletedKey).toEqual({ ownerId: 'alice', sessionId: id });
    for (const [method, path] of [
      ['GET', `/api/sessions/${id}`],
      ['PATCH', `/api/sessions/${id}`],
      ['DELETE', `/api/sessions/${id}`],
      ['POST', `/api/sessions/${id}/events`],
      ['GET', `/api/sessions/${id}/events`],
      ['GET', `/api/sessions/${id}/events/stream`],
      ['GET', `/api/runs/${first}`],
    ] as const) {
      const body = method === 'POST' || method === 'PATCH' ? { strategy: 'reject' } : undefined;
      expect([method, path, (await t.request(method, path, { body })).status]).toEqual([
        method,
        path,
        404,
      ]);
    }
    const list = (await t.json(await t.request('GET', '/api/sessions'))) as {
      sessions: Array<{ session_id: string }>;
    };
    expect(list.sessions.map((s) => s.session_id)).toEqual([other]);
    // Its keys went with the DELETE, before any purge: the create retried makes a new session.
    expect(rowsOf(t, id).keys).toBe(0);
    const retried = await t.request('POST', '/api/sessions', {
      body: {},
      headers: { 'idempotency-key': 'create-1' },
    });
    expect(retried.status).toBe(201);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    expect(((await retried.json()) as { session_id: string }).session_id).not.toBe(id);

    // The data goes with the sweep (here run by hand, as `runplane serve` does on the kick).
    const purge = t.sessionPurge();
    expect(purge.deleted(10)).toEqual([{ ownerId: 'alice', sessionId: id }]);
    while (!purge.purgeStep({ ownerId: 'alice', sessionId: id }, 2));
    expect(rowsOf(t, id)).toEqual(none);
    expect(purge.deleted(10)).toEqual([]);
    // A stream still open on the session ends once its data is gone.
    await watching.until(() => false);
    expect(watching.ended).toBe(true);
    expect(rowsOf(t, other).events).toBeGreaterThan(0);
    expect(t.sqliteLog.lastSeq({}, { ownerId: 'alice', sessionId: id })).toBe(0);
    // The other session works on.
    gate.complete(otherRun, { reply: 'fine' });
    await t.waitForEvent(other, (e) => e.type === 'run.completed');
    expect(t.reported).toEqual([]);
  });

  it('leaves the data of a session whose runs still unwind to a later sweep', async () => {
    const stubborn = gatedAgent<{ reply: string }>({ honoursSignal: false });
    const deleted: string[] = [];
    t = createTestService({
      agent: stubborn.agent,
      onSessionDeleted: (key) => deleted.push(key.sessionId),
    });
    const id = await t.createSession();
    const runId = await t.send(id, 'ignore the stop');
    await stubborn.started(runId);
    const answer = t.request('DELETE', `/api/sessions/${id}`);
    await t.waitForEvent(id, (e) => e.type === 'run.cancelled');
    // Marked deleted at once, but its run is still unwinding: the sweep must not purge it yet.
    expect((await t.request('GET', `/api/sessions/${id}`)).status).toBe(404);
    expect(t.service.isSettling({ ownerId: 'alice', sessionId: id })).toBe(true);
    expect(deleted).toEqual([]);
    const swept: unknown[] = [];
    sweeper = createDataSweeper({
      purge: t.sessionPurge(),
      sessions: t.sessions,
      clock: t.clock,
      skip: (key) => t?.service.isSettling(key) === true,
      reportError: (error) => t?.reported.push(error),
      onSwept: (report) => swept.push(report),
    });
    expect(await sweeper.sweep()).toEqual({ expired: 0, purged: 0, steps: 0 });
    expect(rowsOf(t, id).runs).toBe(1);
    // The agent is abandoned after the unwind timeout; then the deletion completes.
    t.clock.increment(1_000);
    expect((await answer).status).toBe(204);
    expect(t.service.isSettling({ ownerId: 'alice', sessionId: id })).toBe(false);
    expect(deleted).toEqual([id]);
    expect((await sweeper.sweep()).purged).toBe(1);
    expect(rowsOf(t, id)).toEqual(none);
    // Only the sweep that did something was reported (serve logs it).
    expect(swept).toEqual([{ expired: 0, purged: 1, steps: expect.any(Number) as number }]);
  });

  it("is 404 for another owner's session and leaves it alone", async () => {
    t = createTestService();
    const id = await t.createSession();
    expect((await t.request('DELETE', `/api/sessions/${id}`, { token: BOB })).status).toBe(404);
    expect((await t.request('GET', `/api/sessions/${id}`, { token: ALICE })).status).toBe(200);
  });
});

describe('a purge step', () => {
  it('deletes about a megabyte of big events at most, however many rows the batch allows', async () => {
    t = createTestService();
    const id = await t.createSession();
    const key = { ownerId: 'alice', sessionId: id };
    const big = 'x'.repeat(100_000);
    for (let i = 0; i < 30; i++)
      t.sqliteLog.append({}, key, { type: 'note', payload: { big }, at: 0 });
    expect((await t.request('DELETE', `/api/sessions/${id}`)).status).toBe(204);
    const purge = t.sessionPurge();
    const left: number[] = [];
    while (!purge.purgeStep(key, 500)) left.push(rowsOf(t, id).events);
    // 100 KB rows: the eleventh starts before the megabyte is reached and is the last of a step.
    expect(left.slice(0, 3)).toEqual([19, 8, 0]);
    expect(rowsOf(t, id)).toEqual(none);
  });
});

describe('the background sweep', () => {
  /**
   * A sweep held between its steps: each yield waits for the test. `next()` resolves `true`
   * once the sweep is held at a yield, `false` once it has finished; `step()` lets it go on.
   */
  function heldSweep(service: ReturnType<typeof createTestService>, retentionMs?: number) {
    const order: string[] = [];
    let hold: Deferred<void> | undefined;
    let reached = deferred<boolean>();
    const started = createDataSweeper({
      purge: service.sessionPurge(),
      sessions: service.sessions,
      clock: service.clock,
      retentionMs,
      batchSize: 100,
      intervalMs: 3_600_000,
      yieldToRequests: () => {
        order.push('sweep yields');
        hold = deferred();
        reached.resolve(true);
        return hold.promise;
      },
      reportError: (error) => service.reported.push(error),
    });
    sweeper = started;
    // Chained after the sweep that started with the sweeper: settles once that one is over.
    void started.sweep().then(() => reached.resolve(false));
    return {
      order,
      next: async () => {
        const held = await reached.promise;
        if (held) reached = deferred<boolean>();
        return held;
      },
      step: () => hold?.resolve(),
    };
  }

  it('deletes in small batches and never holds a request: requests are answered between its steps', async () => {
    t = createTestService();
    const doomed = await t.createSession();
    const kept = await t.createSession();
    for (let i = 0; i < 1_000; i++) {
      t.sqliteLog.append({}, { ownerId: 'alice', sessionId: doomed }, { type: 'note', at: 0 });
    }
    expect((await t.request('DELETE', `/api/sessions/${doomed}`)).status).toBe(204);

    const sweep = heldSweep(t);
    expect(await sweep.next()).toBe(true); // after its first step: 100 events gone, 900 left
    expect(rowsOf(t, doomed).events).toBe(900);
    // While the sweep is held mid-purge, the service answers: reads, a list, writes.
    for (const [method, path] of [
      ['GET', `/api/sessions/${kept}`],
      ['GET', '/api/sessions'],
      ['POST', '/api/sessions'],
      ['POST', `/api/sessions/${kept}/events`],
    ] as const) {
      const body = path.endsWith('events')
        ? { events: [{ type: 'user.supplement', payload: { text: 'hi' } }] }
        : undefined;
      const response = await t.request(method, path, { body });
      expect(response.status).toBeLessThan(300);
      sweep.order.push(`${method} ${path === '/api/sessions' ? path : 'a session'} answered`);
    }
    expect(rowsOf(t, doomed).events).toBe(900); // the sweep took no step meanwhile
    let steps = 1;
    for (;;) {
      const eventsBefore = rowsOf(t, doomed).events;
      sweep.step();
      const held = await sweep.next();
      steps++;
      // Each step deleted at most one batch.
      expect(eventsBefore - rowsOf(t, doomed).events).toBeLessThanOrEqual(100);
      if (!held) break;
    }
    expect(rowsOf(t, doomed)).toEqual(none);
    expect(sweep.order.slice(0, 6)).toEqual([
      'sweep yields',
      'GET a session answered',
      'GET /api/sessions answered',
      'POST /api/sessions answered',
      'POST a session answered',
      'sweep yields',
    ]);
    // 10 batches of events, the high-water mark, then the record.
    expect(steps).toBe(12);
    expect(rowsOf(t, kept).sessions).toBe(1);
    expect(t.reported).toEqual([]);
  });

  it('with a retention period, deletes sessions idle that long and keeps active ones', async () => {
    const gate = gatedAgent<{ reply: string }>();
    t = createTestService({ agent: gate.agent });
    const day = 86_400_000;
    const idle = await t.createSession();
    const settingsChanged = await t.createSession();
    const talking = await t.createSession();
    const busy = await t.createSession();
    const running = await t.send(busy, 'a long task');
    await gate.started(running);
    t.clock.increment(day);
    expect(
      (
        await t.request('PATCH', `/api/sessions/${settingsChanged}`, {
          body: { strategy: 'reject' },
        })
      ).status,
    ).toBe(200);
    await t.post(talking, [{ type: 'user.supplement', payload: { text: 'still here' } }]);
    t.clock.increment(day);

    const sweep = heldSweep(t, 1.5 * day);
    while (await sweep.next()) sweep.step();
    expect(rowsOf(t, idle)).toEqual(none);
    expect(rowsOf(t, settingsChanged).sessions).toBe(1);
    expect(rowsOf(t, talking).sessions).toBe(1);
    expect(rowsOf(t, busy).sessions).toBe(1); // idle for two days, but its run is unfinished
    expect((await t.request('GET', `/api/sessions/${idle}`)).status).toBe(404);
    gate.complete(running, { reply: 'done' });
    await t.waitForEvent(busy, (e) => e.type === 'run.completed');
  });
});

describe('retention reads sessions window by window', () => {
  it('each query reads at most one window of sessions, and the windows cover every session once', async () => {
    t = createTestService();
    const day = 86_400_000;
    const ids: string[] = [];
    for (let i = 0; i < 250; i++) ids.push(await t.createSession());
    const active = ids[7]!;
    t.clock.increment(2 * day);
    await t.post(active, [{ type: 'user.supplement', payload: { text: 'still here' } }]);
    const purge = t.sessionPurge();
    const before = t.clock.now() - day;
    const idle: string[] = [];
    const windows: number[] = [];
    let after: { ownerId: string; sessionId: string } | undefined = { ownerId: '', sessionId: '' };
    while (after !== undefined) {
      const window = purge.idleIn(before, after, 100);
      windows.push(window.idle.length);
      idle.push(...window.idle.map((key) => key.sessionId));
      after = window.next;
    }
    // 250 sessions in windows of 100: three queries; the active one is in one of them.
    expect(windows).toHaveLength(3);
    expect(windows.every((n) => n <= 100)).toBe(true);
    expect(new Set(idle).size).toBe(249);
    expect(idle).not.toContain(active);
    expect([...idle, active].sort()).toEqual([...ids].sort());
  });
});
