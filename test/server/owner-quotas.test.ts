/**
 * Per-owner caps of the service: sessions, running runs (a run over the cap waits, and owners
 * take turns for freed slots), and the request rate (429 with `Retry-After`). On a real SQLite
 * file and the simulated clock; waits are for events, never for time.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { RunSlots, type SlotWaiter } from '../../src/runtime/run-slots.js';
import { gatedAgent } from '../helpers.js';
import { BOB, createTestService } from './helpers.js';

let t: ReturnType<typeof createTestService> | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

describe('sessions per owner', () => {
  it('answers 429 too_many_sessions past the cap; another owner is not counted; a deletion frees a place', async () => {
    t = createTestService({ maxSessionsPerOwner: 2 });
    const first = await t.createSession();
    await t.createSession();
    const refused = await t.request('POST', '/api/sessions');
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe(
      'too_many_sessions',
    );
    expect((await t.request('POST', '/api/sessions', { token: BOB })).status).toBe(201);
    expect((await t.request('DELETE', `/api/sessions/${first}`)).status).toBe(204);
    expect((await t.request('POST', '/api/sessions')).status).toBe(201);
  });
});

describe('request rate per owner', () => {
  it('answers 429 rate_limited with Retry-After once the burst is spent, per owner, and refills on the clock', async () => {
    t = createTestService({ rateLimit: { perSecond: 2, burst: 3 } });
    const id = await t.createSession(); // 1
    expect((await t.request('GET', `/api/sessions/${id}`)).status).toBe(200); // 2
    expect((await t.request('GET', '/api/sessions')).status).toBe(200); // 3
    const limited = await t.request('GET', `/api/sessions/${id}`);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
    // Another owner has a bucket of its own.
    expect((await t.request('GET', '/api/sessions', { token: BOB })).status).toBe(200);
    t.clock.increment(499);
    expect((await t.request('GET', `/api/sessions/${id}`)).status).toBe(429);
    t.clock.increment(1);
    expect((await t.request('GET', `/api/sessions/${id}`)).status).toBe(200);
    expect((await t.request('GET', `/api/sessions/${id}`)).status).toBe(429);
    // Health and the page are not counted.
    expect((await t.request('GET', '/healthz', { token: null })).status).toBe(200);
  });
});

describe('runs per owner not yet ended', () => {
  it('answers 429 too_many_runs past the cap, across sessions; another owner is not counted; an end frees a place', async () => {
    const gate = gatedAgent<{ reply: string }>();
    t = createTestService({ agent: gate.agent, maxUnfinishedRunsPerOwner: 3 });
    const one = await t.createSession();
    const two = await t.createSession();
    const first = await t.send(one, 'a');
    await t.send(one, 'b'); // waits behind the first
    await t.send(two, 'c');
    const refused = await t.post(two, [{ type: 'user.message', payload: { text: 'd' } }]);
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ code: 'too_many_runs', event_index: 0 });
    const bob = await t.createSession({}, BOB);
    const sent = await t.post(bob, [{ type: 'user.message', payload: { text: 'hi' } }], BOB);
    expect(sent.status).toBe(200);
    await gate.started(first);
    gate.complete(first, { reply: 'done' });
    await t.waitForEvent(one, (e) => e.type === 'run.completed');
    expect((await t.post(two, [{ type: 'user.message', payload: { text: 'd' } }])).status).toBe(
      200,
    );
  });
});

describe('running runs per owner', () => {
  /** Alice's sessions, one message each; returns the run ids. */
  async function flood(service: ReturnType<typeof createTestService>, sessions: number) {
    const runs: string[] = [];
    for (let i = 0; i < sessions; i++) {
      runs.push(await service.send(await service.createSession(), `flood ${i}`));
    }
    return runs;
  }

  it("one owner floods past its cap: its extra runs wait (status queued), the other owner's run starts", async () => {
    const gate = gatedAgent<{ reply: string }>();
    t = createTestService({ agent: gate.agent, maxRunningRunsPerOwner: 2 });
    const alice = await flood(t, 6);
    await gate.started(alice[0] ?? '');
    await gate.started(alice[1] ?? '');
    expect(alice.map((id) => gate.ran(id))).toEqual([true, true, false, false, false, false]);
    const bobSession = await t.createSession({}, BOB);
    const sent = await t.post(bobSession, [{ type: 'user.message', payload: { text: 'hi' } }], BOB);
    expect(sent.body.results).toEqual([
      expect.objectContaining({ result: 'accepted', status: 'RUNNING' }),
    ]);
    // A waiting run of alice shows as queued, and it starts when one of hers ends.
    const third = alice[2] ?? '';
    const waiting = await t.json(await t.request('GET', `/api/runs/${third}`));
    expect(waiting.status).toBe('QUEUED');
    gate.complete(alice[0] ?? '', { reply: 'done' });
    await gate.started(third);
    expect(alice.map((id) => gate.ran(id))).toEqual([true, true, true, false, false, false]);
  });

  it('with every slot taken, a freed slot goes to the owners in turn, not to the flood', async () => {
    const gate = gatedAgent<{ reply: string }>();
    t = createTestService({ agent: gate.agent, maxConcurrentRuns: 2, maxRunningRunsPerOwner: 2 });
    const alice = await flood(t, 5);
    await gate.started(alice[1] ?? '');
    const bobSession = await t.createSession({}, BOB);
    const sent = await t.post(bobSession, [{ type: 'user.message', payload: { text: 'hi' } }], BOB);
    const bobRun = (sent.body.results as Array<{ run_id: string; status: string }>)[0];
    expect(bobRun?.status).toBe('QUEUED'); // no slot anywhere
    // Alice's third run asked before Bob's; the slot alice frees goes to Bob all the same.
    gate.complete(alice[0] ?? '', { reply: 'done' });
    await gate.started(bobRun?.run_id ?? '');
    expect(gate.ran(alice[2] ?? '')).toBe(false);
    // The next freed slot is alice's turn again.
    gate.complete(alice[1] ?? '', { reply: 'done' });
    await gate.started(alice[2] ?? '');
    expect(gate.ran(alice[3] ?? '')).toBe(false);
  });
});

describe('RunSlots', () => {
  const waiter = (ownerId: string, granted: string[], name: string): SlotWaiter => ({
    key: { ownerId, sessionId: name },
    grantSlot: () => granted.push(name),
  });

  it('grants a freed slot to the owner running the fewest runs, ties round-robin, each owner in request order', () => {
    const slots = new RunSlots(2, 2);
    const granted: string[] = [];
    for (const name of ['a1', 'a2', 'a3', 'a4', 'a5']) slots.request(waiter('a', granted, name));
    for (const name of ['b1', 'b2']) slots.request(waiter('b', granted, name));
    slots.request(waiter('c', granted, 'c1'));
    expect(granted).toEqual(['a1', 'a2']);
    slots.release('a');
    slots.release('a');
    slots.release('b');
    slots.release('c');
    slots.release('a');
    expect(granted).toEqual(['a1', 'a2', 'b1', 'a3', 'c1', 'b2', 'a4']);
  });

  it('never lets an owner over its own cap, even with free slots; a withdrawn waiter is skipped', () => {
    const slots = new RunSlots(Number.POSITIVE_INFINITY, 1);
    const granted: string[] = [];
    slots.request(waiter('a', granted, 'a1'));
    const a2 = waiter('a', granted, 'a2');
    slots.request(a2);
    slots.request(waiter('a', granted, 'a3'));
    expect(slots.hasFree('a')).toBe(false);
    expect(slots.hasFree('b')).toBe(true);
    slots.withdraw(a2);
    slots.release('a');
    expect(granted).toEqual(['a1', 'a3']);
  });
});
