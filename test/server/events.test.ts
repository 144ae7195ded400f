/**
 * POST /api/sessions/:id/events, in memory: whole-batch validation, one result per event,
 * busy-session strategies, fenced interrupts, tool confirmations and supplements.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createDemoAgent } from '../../src/server/demo-agent.js';
import { gatedAgent } from '../helpers.js';
import { createTestService, flush, wordsAgent } from './helpers.js';

let t: ReturnType<typeof createTestService>;
afterEach(async () => t?.close());

const message = (text: string, extra: Record<string, unknown> = {}) => ({
  type: 'user.message',
  payload: { text, ...extra },
});
const interrupt = (payload?: Record<string, unknown>) =>
  payload === undefined ? { type: 'user.interrupt' } : { type: 'user.interrupt', payload };

describe('batch validation', () => {
  it('validates the whole batch before applying any event: 400 with an error per bad event', async () => {
    t = createTestService({ agent: gatedAgent<string>().agent });
    const id = await t.createSession();
    const { status, body } = await t.post(id, [
      message('fine'),
      { type: 'user.message', payload: { text: '' } },
      { type: 'user.teleport', payload: {} },
      'not an event',
      interrupt({ run_id: 'ok' }),
      { type: 'user.tool_confirmation', payload: { tool_use_id: 't1', allow: 'yes' } },
      { type: 'user.supplement', payload: { text: 'x', extra: true } },
    ]);
    expect(status).toBe(400);
    expect(body).toEqual({
      error: {
        code: 'invalid_event',
        message: expect.stringMatching(
          /^5 events are invalid; first: expected `events\[1\]/,
        ) as string,
        events: [
          {
            index: 1,
            code: 'invalid_event',
            message:
              'expected `events[1].payload.text` to be a non-empty string of at most 100000 characters, got ""',
          },
          {
            index: 2,
            code: 'invalid_event',
            message:
              'expected `events[2].type` to be one of user.message, user.interrupt, user.tool_confirmation, user.supplement, got "user.teleport"',
          },
          {
            index: 3,
            code: 'invalid_event',
            message: 'expected `events[3]` to be an object { type, payload }, got "not an event"',
          },
          {
            index: 5,
            code: 'invalid_event',
            message: 'expected `events[5].payload.allow` to be a boolean, got "yes"',
          },
          {
            index: 6,
            code: 'invalid_event',
            message: 'expected `events[6].payload` to have no key "extra"',
          },
        ],
      },
    });
    // Nothing was applied: no run, no event.
    expect(await t.events(id)).toEqual([]);
    expect(t.runtime.runs.size).toBe(0);
  });

  it.each([
    ['""', ''],
    ['null', null],
    ['a number', 42],
    ['an object', { id: 'r' }],
  ])(
    'user.interrupt with run_id %s is 400 invalid_run_id and interrupts nothing',
    async (_name, runId) => {
      const gate = gatedAgent<string>();
      t = createTestService({ agent: gate.agent });
      const id = await t.createSession();
      const active = await t.send(id, 'keep running');
      const { status, body } = await t.post(id, [interrupt({ run_id: runId })]);
      expect(status).toBe(400);
      const error = body.error as { code: string; events: Array<Record<string, unknown>> };
      expect(error.code).toBe('invalid_run_id');
      expect(error.events).toEqual([
        {
          index: 0,
          code: 'invalid_run_id',
          message: expect.stringMatching(
            /^expected `events\[0\]\.payload\.run_id` to be a non-empty string of at most 256 characters, got /,
          ) as string,
        },
      ]);
      // It never fell back to a session-wide interrupt.
      expect(t.runtime.runs.find('alice', id, active)?.status).toBe('RUNNING');
      gate.complete(active, 'done');
    },
  );

  it('rejects a body that is not { events: [1..100] } as a whole', async () => {
    t = createTestService();
    const id = await t.createSession();
    const cases: Array<[unknown, string]> = [
      [{}, 'invalid_body'],
      [{ events: [] }, 'invalid_body'],
      [{ events: Array.from({ length: 101 }, () => interrupt()) }, 'invalid_body'],
      [{ events: 'user.message' }, 'invalid_body'],
      [{ events: [interrupt()], also: 1 }, 'invalid_body'],
      [[interrupt()], 'invalid_body'],
      [null, 'invalid_body'],
      ['', 'invalid_json'],
      ['{"events":[', 'invalid_json'],
    ];
    for (const [body, code] of cases) {
      const response = await t.request('POST', `/api/sessions/${id}/events`, {
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
      expect([JSON.stringify(body).slice(0, 40), response.status]).toEqual([
        JSON.stringify(body).slice(0, 40),
        400,
      ]);
      expect(((await t.json(response)).error as { code: string }).code).toBe(code);
    }
  });
});

describe('user.message and the session strategy', () => {
  it('returns the run_id at once; the second message of a busy session waits (enqueue)', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    const { status, body } = await t.post(id, [message('one'), message('two')]);
    expect(status).toBe(200);
    const [first, second] = body.results as Array<{ run_id: string }>;
    expect(body.results).toEqual([
      { type: 'user.message', result: 'accepted', run_id: first?.run_id, status: 'RUNNING' },
      { type: 'user.message', result: 'accepted', run_id: second?.run_id, status: 'QUEUED' },
    ]);
    const log = await t.events(id);
    expect(log.slice(0, 5).map((e) => [e.seq, e.type, e.runId])).toEqual([
      [1, 'user.message', first?.run_id],
      [2, 'session.run_queued', first?.run_id],
      [3, 'run.status', first?.run_id],
      [4, 'session.run_started', first?.run_id],
      [5, 'run.status', first?.run_id],
    ]);
    expect(log[0]?.payload).toEqual({ run_id: first?.run_id, text: 'one', strategy: 'enqueue' });
    gate.complete(first?.run_id ?? '', 'done');
    await t.waitForEvent(id, (e) => e.type === 'session.run_started' && e.runId === second?.run_id);
    gate.complete(second?.run_id ?? '', 'done');
  });

  it('reject: 409 session_busy with active_run_id; earlier results kept, no run for the refused message', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession({ strategy: 'reject' });
    const { status, body } = await t.post(id, [message('first'), message('second')]);
    expect(status).toBe(409);
    const results = body.results as Array<{ run_id: string }>;
    const active = results[0]?.run_id;
    expect(body).toEqual({
      error: {
        code: 'session_busy',
        message: `session ${id} is busy with run ${active}`,
        active_run_id: active,
        event_index: 1,
      },
      results: [{ type: 'user.message', result: 'accepted', run_id: active, status: 'RUNNING' }],
    });
    expect(t.runtime.runs.size).toBe(1);
    expect((await t.events(id)).filter((e) => e.type === 'user.message')).toHaveLength(1);
    // A later message is refused too, until the session is idle.
    expect((await t.post(id, [message('third')])).status).toBe(409);
    gate.complete(active ?? '', 'done');
    await t.runtime.session('alice', id).onIdle();
    expect((await t.post(id, [message('fourth')])).status).toBe(200);
  });

  it('a session holding maxQueuedRuns unsettled runs answers 429 session_queue_full; earlier results kept', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    // The runtime's default cap (32): one running, 31 queued, then one too many in the batch.
    const batch = Array.from({ length: 33 }, (_, i) => message(`m${i}`));
    const { status, body } = await t.post(id, batch.slice(0, 32));
    expect(status).toBe(200);
    const over = await t.post(id, [message('one more')]);
    expect(over.status).toBe(429);
    expect(over.body).toMatchObject({ error: { code: 'session_queue_full', event_index: 0 } });
    expect(t.runtime.runs.size).toBe(32);
    // Nothing of the refused message was applied: no run, no user.message.
    expect((await t.events(id)).filter((e) => e.type === 'user.message')).toHaveLength(32);
    const first = (body.results as Array<{ run_id: string }>)[0]?.run_id ?? '';
    gate.complete(first, 'done');
    await t.waitForEvent(id, (e) => e.type === 'run.completed' && e.runId === first);
    expect((await t.post(id, [message('room again')])).status).toBe(200);
    t.runtime.session('alice', id).cancelAll({ includeActive: true });
  });

  it('interrupt: the active run is interrupted, then cancelled after grace_ms; the new one runs', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession({ strategy: 'interrupt', grace_ms: 1000 });
    const old = await t.send(id, 'old');
    const fresh = await t.send(id, 'new');
    expect(gate.ctx(old).interruptRequested).toBe(true);
    t.clock.increment(1000);
    await t.waitForEvent(id, (e) => e.type === 'session.run_started' && e.runId === fresh);
    const cancelled = (await t.events(id)).find((e) => e.type === 'run.cancelled');
    // Who asked: the session's interrupt strategy, for the newer run (not the user).
    expect(cancelled).toMatchObject({
      runId: old,
      payload: { cause: 'cancel', initiator: 'strategy' },
    });
    gate.complete(fresh, 'done');
  });

  it('preempt (the session default or one message): queued runs cancelled, the active one stops at a safe point', async () => {
    t = createTestService({ agent: wordsAgent(['a ', 'b ', 'c '], 10) });
    const id = await t.createSession({ grace_ms: 50 });
    const active = await t.send(id, 'first');
    const queued = await t.send(id, 'second');
    const urgent = await t.send(id, 'urgent', { strategy: 'preempt' });
    await t.waitForEvent(id, (e) => e.type === 'run.cancelled' && e.runId === queued);
    // The words agent has no safe point: the preempt escalates after grace_ms.
    t.clock.increment(50);
    await t.waitForEvent(id, (e) => e.type === 'session.run_started' && e.runId === urgent);
    const log = await t.events(id);
    const cancels = log.filter((e) => e.type === 'run.cancelled');
    expect(cancels.map((e) => [e.runId, e.payload.cause, e.payload.initiator])).toEqual([
      [queued, 'preempt', 'preempt'],
      [active, 'preempt', 'preempt'],
    ]);
    expect(cancels[1]?.payload.escalated).toBe(true);
  });
});

describe('user.interrupt', () => {
  it('with run_id is an exact, fenced cancel: accepted, then ended; never another run', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    const other = await t.createSession();
    const first = await t.send(id, 'first');
    const second = await t.send(id, 'second');
    const stop = await t.post(id, [interrupt({ run_id: first })]);
    expect(stop.body.results).toEqual([
      { type: 'user.interrupt', result: 'accepted', run_id: first },
    ]);
    await t.waitForEvent(id, (e) => e.type === 'session.run_started' && e.runId === second);
    // A stale stop for the first run arrives late: it must not touch the second.
    const stale = await t.post(id, [interrupt({ run_id: first })]);
    expect(stale.body.results).toEqual([
      { type: 'user.interrupt', result: 'ended', run_id: first },
    ]);
    const unknown = await t.post(id, [interrupt({ run_id: 'never-was' })]);
    expect(unknown.body.results).toEqual([
      { type: 'user.interrupt', result: 'not_found', run_id: 'never-was' },
    ]);
    // The run exists, but in another session of the same owner: not_found.
    const elsewhere = await t.post(other, [interrupt({ run_id: second })]);
    expect(elsewhere.body.results).toEqual([
      { type: 'user.interrupt', result: 'not_found', run_id: second },
    ]);
    expect(t.runtime.runs.find('alice', id, second)?.status).toBe('RUNNING');
    gate.complete(second, 'done');
  });

  it('cancelling queued B while A runs leaves A alone and C waiting for A', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    const [a, b, c] = [await t.send(id, 'A'), await t.send(id, 'B'), await t.send(id, 'C')];
    const result = await t.post(id, [interrupt({ run_id: b })]);
    expect((result.body.results as Array<{ result: string }>)[0]?.result).toBe('accepted');
    await flush();
    expect(t.runtime.runs.find('alice', id, a)?.status).toBe('RUNNING');
    expect(t.runtime.session('alice', id).queuedRunIds).toEqual([c]);
    expect(gate.ran(c)).toBe(false);
    gate.complete(a, 'done');
    await t.waitForEvent(id, (e) => e.type === 'session.run_started' && e.runId === c);
    expect(gate.ran(b)).toBe(false);
    gate.complete(c, 'done');
  });

  it('without run_id targets the active run now, or answers idle and remembers nothing', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    const idle = await t.post(id, [interrupt()]);
    expect(idle.body.results).toEqual([{ type: 'user.interrupt', result: 'idle', run_id: null }]);
    // Nothing was remembered: the next message runs normally.
    const runId = await t.send(id, 'runs');
    expect(t.runtime.runs.find('alice', id, runId)?.status).toBe('RUNNING');
    const stop = await t.post(id, [interrupt({})]);
    expect(stop.body.results).toEqual([
      { type: 'user.interrupt', result: 'accepted', run_id: runId },
    ]);
    await t.waitForEvent(id, (e) => e.type === 'run.cancelled');
    expect((await t.json(await t.request('GET', `/api/runs/${runId}`))).status).toBe('CANCELLED');
  });

  it('mode interrupt is cooperative; a safe-point mode waits for the safe point', async () => {
    const gate = gatedAgent<string>();
    t = createTestService({ agent: gate.agent });
    const id = await t.createSession();
    const runId = await t.send(id, 'work');
    await t.post(id, [interrupt({ run_id: runId, mode: 'interrupt', reason: 'wrap up' })]);
    const ctx = gate.ctx(runId);
    expect(ctx.interruptRequested).toBe(true);
    expect(ctx.interruptMessage).toBe('wrap up');
    gate.complete(runId, 'wrapped');
    const completed = await t.waitForEvent(id, (e) => e.type === 'run.completed');
    expect(completed.payload).toEqual({ reason: 'interrupted', initiator: 'user' });

    const next = await t.send(id, 'more');
    await t.post(id, [interrupt({ run_id: next, mode: 'after_tool_calls', timeout_ms: 500 })]);
    expect(t.runtime.runs.find('alice', id, next)?.status).toBe('RUNNING');
    expect(() => gate.ctx(next).safePoint('afterChatModel')).not.toThrow();
    expect(() => gate.ctx(next).safePoint('afterToolCalls')).toThrow(/RUN_CANCELLED/);
    gate.fail(next, new Error('unwound after the safe point'));
    const cancelled = await t.waitForEvent(id, (e) => e.type === 'run.cancelled');
    expect(cancelled).toMatchObject({
      runId: next,
      payload: { cause: 'cancel', escalated: false, initiator: 'user' },
    });
  });
});

describe('user.tool_confirmation and user.supplement', () => {
  it('answers a waiting approval (allow, deny with deny_message or denyMessage); unknown ids are not_found', async () => {
    t = createTestService({ agentOn: (clock) => createDemoAgent({ clock, chunkDelayMs: 0 }) });
    const id = await t.createSession();
    const ask = async () => {
      const runId = await t.send(id, 'what time is it?');
      const requested = await t.waitForEvent(
        id,
        (e) => e.type === 'agent.approval_requested' && e.runId === runId,
      );
      return { runId, toolUseId: String(requested.payload.tool_use_id) };
    };

    const allowed = await ask();
    const session = await t.json(await t.request('GET', `/api/sessions/${id}`));
    expect(session.pending_approvals).toEqual([
      { tool_use_id: allowed.toolUseId, name: 'clock', args: {}, run_id: allowed.runId },
    ]);
    const yes = await t.post(id, [
      { type: 'user.tool_confirmation', payload: { tool_use_id: allowed.toolUseId, allow: true } },
    ]);
    expect(yes.body.results).toEqual([
      { type: 'user.tool_confirmation', result: 'accepted', tool_use_id: allowed.toolUseId },
    ]);
    const ok = await t.waitForEvent(
      id,
      (e) => e.type === 'agent.tool_result' && e.runId === allowed.runId,
    );
    expect(ok.payload).toMatchObject({
      status: 'ok',
      content: expect.stringContaining('"iso":"1970') as string,
    });
    await t.waitForEvent(id, (e) => e.type === 'run.completed' && e.runId === allowed.runId);

    for (const field of ['deny_message', 'denyMessage']) {
      const denied = await ask();
      await t.post(id, [
        {
          type: 'user.tool_confirmation',
          payload: { tool_use_id: denied.toolUseId, allow: false, [field]: 'not now' },
        },
      ]);
      const result = await t.waitForEvent(
        id,
        (e) => e.type === 'agent.tool_result' && e.runId === denied.runId,
      );
      expect(result.payload).toMatchObject({
        status: 'denied',
        content: 'Error: the user denied this tool call: not now',
      });
      // A denial is not a cancel: the run completes.
      const end = await t.waitForEvent(
        id,
        (e) => e.type.startsWith('run.') && e.type !== 'run.status' && e.runId === denied.runId,
      );
      expect(end.type).toBe('run.completed');
    }

    const stale = await t.post(id, [
      { type: 'user.tool_confirmation', payload: { tool_use_id: allowed.toolUseId, allow: true } },
    ]);
    expect(stale.body.results).toEqual([
      { type: 'user.tool_confirmation', result: 'not_found', tool_use_id: allowed.toolUseId },
    ]);
    const both = await t.post(id, [
      {
        type: 'user.tool_confirmation',
        payload: { tool_use_id: 'x', allow: false, deny_message: 'a', denyMessage: 'b' },
      },
    ]);
    expect(both.status).toBe(400);
  });

  it('user.supplement queues a hint, logs it, and the next reasoning step reads it', async () => {
    t = createTestService({ agentOn: (clock) => createDemoAgent({ clock, chunkDelayMs: 0 }) });
    const id = await t.createSession();
    const { body } = await t.post(id, [
      { type: 'user.supplement', payload: { text: 'budget is 5000' } },
    ]);
    const [result] = body.results as Array<{ hint_id: string }>;
    expect(body.results).toEqual([
      { type: 'user.supplement', result: 'accepted', hint_id: expect.any(String) as string },
    ]);
    expect(t.runtime.inbox.size('alice', id)).toBe(1);
    const runId = await t.send(id, 'plan the trip');
    const consumed = await t.waitForEvent(id, (e) => e.type === 'agent.hint_consumed');
    expect(consumed).toMatchObject({ runId, payload: { hint_id: result?.hint_id } });
    const reply = await t.waitForEvent(id, (e) => e.type === 'agent.message' && e.runId === runId);
    expect(String(reply.payload.content)).toMatch(/^Noted: "budget is 5000"/);
    expect((await t.events(id))[0]).toMatchObject({
      type: 'user.supplement',
      payload: { hint_id: result?.hint_id, text: 'budget is 5000' },
    });
  });
});
