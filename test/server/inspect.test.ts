/**
 * The live timeline served by `runplane serve` (issue 6): `/inspect` is the viewer page and
 * `/api/inspect/stream` the caller's own lifecycle transitions over SSE.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createTimelineHub } from '../../src/inspect/timeline-hub.js';
import { ALICE, BOB, createTestService, sseReader, wordsAgent } from './helpers.js';

describe('GET /inspect and /api/inspect/stream', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  it('serves the viewer page wired to the owner-scoped stream', async () => {
    const service = createTestService({ timeline: createTimelineHub() });
    cleanups.push(service.close);
    const page = await service.request('GET', '/inspect', { token: null });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(await page.text()).toContain('data-live-url="/api/inspect/stream"');
  });

  it('needs a token, and streams only the caller’s own runs', async () => {
    const hub = createTimelineHub();
    const service = createTestService({ timeline: hub, agent: wordsAgent(['hi'], 10) });
    cleanups.push(service.close);
    expect((await service.request('GET', '/api/inspect/stream', { token: null })).status).toBe(401);
    expect(
      (await service.request('GET', '/api/inspect/stream', { headers: { 'last-event-id': 'x' } }))
        .status,
    ).toBe(400);

    const aliceSession = await service.createSession();
    const bobSession = await service.createSession({}, BOB);
    const aliceRun = await service.send(aliceSession, 'hello');
    const bobRun = await service.post(
      bobSession,
      [{ type: 'user.message', payload: { text: 'x' } }],
      BOB,
    );
    expect(bobRun.status).toBe(200);
    const bobRunId = (bobRun.body.results as Array<{ run_id: string }>)[0]?.run_id ?? '';

    const response = await service.request('GET', '/api/inspect/stream', { token: ALICE });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const reader = sseReader(response);
    const text = await reader.until(
      (t) => t.includes(`"id":"${aliceRun}"`) && t.includes('"to":"RUNNING'),
    );
    await reader.cancel();
    expect(text).toContain('event: transition');
    expect(text).not.toContain(bobRunId);
  });

  it('numbers each owner’s transitions 1, 2, 3, …: ids reveal nothing of other owners', async () => {
    const hub = createTimelineHub();
    const service = createTestService({ timeline: hub, agent: wordsAgent(['hi'], 10) });
    cleanups.push(service.close);
    // Alice is busy first, then bob starts a run, then alice again.
    const aliceFirst = await service.send(await service.createSession(), 'one');
    const bobSession = await service.createSession({}, BOB);
    const bobSent = await service.post(
      bobSession,
      [{ type: 'user.message', payload: { text: 'x' } }],
      BOB,
    );
    const bobRun = (bobSent.body.results as Array<{ run_id: string }>)[0]?.run_id ?? '';
    const aliceSecond = await service.send(await service.createSession(), 'two');

    const idsOf = async (token: string, runId: string) => {
      const reader = sseReader(await service.request('GET', '/api/inspect/stream', { token }));
      const text = await reader.until(
        (t) => t.includes(`"id":"${runId}"`) && t.includes('"to":"RUNNING'),
      );
      await reader.cancel();
      return [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    };
    const bobIds = await idsOf(BOB, bobRun);
    expect(bobIds.length).toBeGreaterThan(1);
    expect(bobIds).toEqual(bobIds.map((_, i) => i + 1));
    const aliceIds = await idsOf(ALICE, aliceSecond);
    expect(aliceIds).toEqual(aliceIds.map((_, i) => i + 1));
    expect(aliceFirst).not.toBe(aliceSecond);
    // Resuming after an id replays only that owner's later transitions.
    const resumed = sseReader(
      await service.request('GET', '/api/inspect/stream', {
        token: BOB,
        headers: { 'last-event-id': String(bobIds.length - 1) },
      }),
    );
    const text = await resumed.until((t) => /^id: /m.test(t));
    await resumed.cancel();
    expect([...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]))[0]).toBe(bobIds.length);
  });
});
