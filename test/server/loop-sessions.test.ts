/**
 * Loop sessions over HTTP, in memory on a simulated clock: `{"mode":"loop"}` sessions whose
 * messages are TurnLoop items. Every wait is for a logged event or an agent call, never for time.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { RunplaneEvent } from '../../src/events/event-log.js';
import type { Agent, RunContext } from '../../src/run/agent.js';
import { createTestService, flush } from './helpers.js';

/** One call of the gated agent: its input, and the controls the test drives it with. */
interface Call {
  readonly input: unknown;
  readonly ctx: RunContext;
  /** Returns the run's reply. */
  finish(): void;
  /** Reports a safe point (`afterChatModel`, with the input as its state). */
  safePoint(): void;
}

/** An agent that runs until the test finishes it or a cancel aborts it. */
function createGatedAgent() {
  const calls: Call[] = [];
  const waiters: Array<() => void> = [];
  const agent: Agent<string, { reply: string }> = {
    execute: (input, ctx) =>
      new Promise((resolve, reject) => {
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error), {
          once: true,
        });
        calls.push({
          input,
          ctx,
          finish: () => resolve({ reply: `answered ${JSON.stringify(input)}` }),
          safePoint: () => {
            try {
              ctx.safePoint('afterChatModel', { input });
            } catch (error) {
              // A safe-point cancel landed: the run ends here.
              reject(error instanceof Error ? error : new Error(String(error)));
            }
          },
        });
        for (const wake of waiters.splice(0)) wake();
      }),
  };
  /** The n-th call (0-based), once the agent has been called that often. */
  const call = async (n: number): Promise<Call> => {
    while (calls.length <= n) await new Promise<void>((wake) => waiters.push(wake));
    return calls[n] as Call;
  };
  return { agent, calls, call };
}

type Service = ReturnType<typeof createTestService>;
let t: Service | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const setUp = () => {
  const gated = createGatedAgent();
  t = createTestService({ agent: gated.agent });
  return { t, ...gated };
};

/** Sends one message (`extra` e.g. `{ preempt: true }`); returns its item id. */
const push = async (s: Service, sessionId: string, text: string, extra = {}) => {
  const { status, body } = await s.post(sessionId, [
    { type: 'user.message', payload: { text, ...extra } },
  ]);
  expect(status).toBe(200);
  const [result] = body.results as Array<Record<string, unknown>>;
  expect(result).toMatchObject({ type: 'user.message', result: 'accepted' });
  return result?.item_id as string;
};

const started = (s: Service, sessionId: string, nth: number) => {
  let seen = 0;
  return s.waitForEvent(sessionId, (e) => e.type === 'session.run_started' && seen++ === nth);
};

const endOf = (s: Service, sessionId: string, runId: string) =>
  s.waitForEvent(
    sessionId,
    (e) => e.runId === runId && ['run.completed', 'run.failed', 'run.cancelled'].includes(e.type),
  );

const itemIdsOf = (event: RunplaneEvent) => event.payload.item_ids;

describe('loop sessions', () => {
  it('a message is an item: logged at once, batched while a turn runs, in order', async () => {
    const { t, call } = setUp();
    const created = await t.request('POST', '/api/sessions', { body: { mode: 'loop' } });
    expect(created.status).toBe(201);
    const session = await t.json(created);
    expect(session).toMatchObject({ mode: 'loop', strategy: null, status: 'idle' });
    const id = session.session_id as string;

    const a = await push(t, id, 'first');
    expect(a).toMatch(/^item_/);
    // Durable when the POST answers: its user.message is in the log.
    expect((await t.events(id)).find((e) => e.type === 'user.message')?.payload).toEqual({
      item_id: a,
      text: 'first',
      preempt: false,
    });
    const first = await started(t, id, 0);
    expect(itemIdsOf(first)).toEqual([a]);
    const turn1 = await call(0);
    expect(turn1.input).toBe('first');

    const b = await push(t, id, 'second');
    const c = await push(t, id, 'third');
    await flush();
    expect(t.service.loopSessions.size).toBe(1);
    turn1.finish();
    const second = await started(t, id, 1);
    expect(itemIdsOf(second)).toEqual([b, c]);
    const turn2 = await call(1);
    expect(turn2.input).toBe('second\n\nthird');
    turn2.finish();
    const end = await endOf(t, id, second.runId ?? '');
    expect(end.type).toBe('run.completed');
    // Each turn's run is recorded, with its outcome.
    await flush();
    expect(t.runs.get('alice', first.runId ?? '')).toMatchObject({
      status: 'COMPLETED',
      input: 'first',
    });
  });

  it('holds at most 100 messages waiting for a turn (429 session_queue_full), and a turn frees them', async () => {
    const { t, call } = setUp();
    const id = (await t.json(await t.request('POST', '/api/sessions', { body: { mode: 'loop' } })))
      .session_id as string;
    await push(t, id, 'first');
    const turn1 = await call(0);
    for (let i = 0; i < 100; i++) await push(t, id, `waiting ${i}`);
    const full = await t.post(id, [{ type: 'user.message', payload: { text: 'one too many' } }]);
    expect(full.status).toBe(429);
    expect(full.body.error).toMatchObject({ code: 'session_queue_full', event_index: 0 });
    turn1.finish();
    const second = await started(t, id, 1);
    expect(itemIdsOf(second)).toHaveLength(100);
    expect(t.service.loopSessions.waitingItems({ ownerId: 'alice', sessionId: id })).toBe(0);
    await push(t, id, 'room again');
  });

  it('preempt: true cancels the turn at its next safe point; without one it escalates after grace_ms', async () => {
    const { t, call } = setUp();
    const id = await t.createSession({ mode: 'loop', grace_ms: 1_000 });
    await push(t, id, 'long task');
    const first = await started(t, id, 0);
    const turn1 = await call(0);
    const urgent = await push(t, id, 'urgent', { preempt: true });
    turn1.safePoint();
    const cut = await endOf(t, id, first.runId ?? '');
    expect(cut.type).toBe('run.cancelled');
    expect(cut.payload).toMatchObject({ cause: 'preempt', escalated: false, initiator: 'preempt' });
    const second = await started(t, id, 1);
    expect(itemIdsOf(second)).toEqual([urgent]);
    await call(1);

    // PATCH changes the grace of the next preempt; this turn never reaches a safe point.
    const patched = await t.request('PATCH', `/api/sessions/${id}`, { body: { grace_ms: 200 } });
    expect(await t.json(patched)).toMatchObject({ grace_ms: 200 });
    await push(t, id, 'more urgent', { preempt: true });
    await flush();
    t.clock.increment(199);
    await flush();
    expect(
      (await t.events(id)).some((e) => e.runId === second.runId && e.type === 'run.cancelled'),
    ).toBe(false);
    t.clock.increment(1);
    const escalated = await endOf(t, id, second.runId ?? '');
    expect(escalated.payload).toMatchObject({ cause: 'preempt', escalated: true });
    await started(t, id, 2);
  });

  it('a preempting message with no turn running just starts one', async () => {
    const { t, call } = setUp();
    const id = await t.createSession({ mode: 'loop' });
    const urgent = await push(t, id, 'urgent', { preempt: true });
    const first = await started(t, id, 0);
    expect(itemIdsOf(first)).toEqual([urgent]);
    const turn = await call(0);
    turn.safePoint(); // nothing to preempt: the safe point passes
    turn.finish();
    expect((await endOf(t, id, first.runId ?? '')).type).toBe('run.completed');
  });

  it('user.interrupt with run_id cancels exactly that turn; later messages still get a turn', async () => {
    const { t, call } = setUp();
    const id = await t.createSession({ mode: 'loop' });
    await push(t, id, 'one');
    const first = await started(t, id, 0);
    const turn1 = await call(0);
    const waiting = await push(t, id, 'two');
    turn1.finish();
    await endOf(t, id, first.runId ?? '');
    const second = await started(t, id, 1);
    await call(1);
    // The ended turn's id answers `ended` and touches the running one.
    const stale = await t.post(id, [{ type: 'user.interrupt', payload: { run_id: first.runId } }]);
    expect(stale.body.results).toEqual([
      { type: 'user.interrupt', result: 'ended', run_id: first.runId },
    ]);
    const later = await push(t, id, 'three');
    const exact = await t.post(id, [{ type: 'user.interrupt', payload: { run_id: second.runId } }]);
    expect(exact.body.results).toEqual([
      { type: 'user.interrupt', result: 'accepted', run_id: second.runId },
    ]);
    const cancelled = await endOf(t, id, second.runId ?? '');
    expect(cancelled.payload).toMatchObject({ cause: 'cancel', initiator: 'user' });
    expect(waiting).not.toBe(later);
    const third = await started(t, id, 2);
    expect(itemIdsOf(third)).toEqual([later]);
    await call(2);
    // Without run_id: the current turn.
    const current = await t.post(id, [{ type: 'user.interrupt' }]);
    expect(current.body.results).toEqual([
      { type: 'user.interrupt', result: 'accepted', run_id: third.runId },
    ]);
    expect((await endOf(t, id, third.runId ?? '')).type).toBe('run.cancelled');
  });

  it('refuses the busy-session strategies and a mode change with a clear 400', async () => {
    const { t } = setUp();
    const both = await t.request('POST', '/api/sessions', {
      body: { mode: 'loop', strategy: 'reject' },
    });
    expect(both.status).toBe(400);
    expect(await t.json(both)).toMatchObject({ error: { code: 'invalid_body' } });
    const id = await t.createSession({ mode: 'loop' });
    const strategy = await t.post(id, [
      { type: 'user.message', payload: { text: 'hi', strategy: 'preempt' } },
    ]);
    expect(strategy.status).toBe(400);
    expect(strategy.body).toMatchObject({
      error: { code: 'invalid_event', events: [{ index: 0, code: 'invalid_event' }] },
    });
    // Nothing of the refused batch was applied.
    expect(await t.events(id)).toEqual([]);
    for (const body of [{ strategy: 'enqueue' }, { mode: 'runs' }]) {
      const patched = await t.request('PATCH', `/api/sessions/${id}`, { body });
      expect(patched.status).toBe(400);
    }
    const runs = await t.createSession({});
    const preempt = await t.post(runs, [
      { type: 'user.message', payload: { text: 'hi', preempt: true } },
    ]);
    expect(preempt.status).toBe(400);
  });

  it('DELETE stops the loop and cancels its turn', async () => {
    const { t, call } = setUp();
    const id = await t.createSession({ mode: 'loop' });
    await push(t, id, 'one');
    const first = await started(t, id, 0);
    await call(0);
    await push(t, id, 'two');
    const deleted = await t.request('DELETE', `/api/sessions/${id}`);
    expect(deleted.status).toBe(204);
    expect(t.service.loopSessions.size).toBe(0);
    const end = (await t.events(id)).find(
      (e) => e.runId === first.runId && e.type === 'run.cancelled',
    );
    expect(end).toBeDefined();
    // The waiting message got no turn.
    expect((await t.events(id)).filter((e) => e.type === 'session.run_started')).toHaveLength(1);
  });
});
