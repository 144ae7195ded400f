/**
 * The server seam (`src/server/session-access.ts`): every command, its answer and its refusal
 * survive `JSON.parse(JSON.stringify(x))` and give the same HTTP answer, which is what a
 * cluster's command Stream relies on (docs/architecture.md, "Cluster on Redis").
 *
 * The same scripted walk through the API runs against a service on the local access and against
 * one whose every command, answer, refusal and read crosses JSON; the two transcripts (status,
 * headers, body, ids normalized) must be equal, and every command and answer must be plain data.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  HttpError,
  statusOfCode,
  toHttpError,
  type HttpErrorCode,
} from '../../src/server/http-error.js';
import { createDemoAgent } from '../../src/server/demo-agent.js';
import type { SessionAccess, SessionCommand } from '../../src/server/session-access.js';
import { createTestService, flush, type TestServiceOptions } from './helpers.js';

type TestService = ReturnType<typeof createTestService>;

const services: TestService[] = [];
afterEach(async () => {
  for (const t of services.splice(0)) await t.close();
});

/** What keeps a value from being plain JSON data, by path (empty when it is plain data). */
function plainDataProblems(value: unknown, path = '$'): string[] {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return [];
  if (typeof value === 'number') return Number.isFinite(value) ? [] : [`${path}: ${value}`];
  if (typeof value !== 'object') return [`${path}: a ${typeof value}`];
  if (Array.isArray(value)) {
    return value.flatMap((item, index) =>
      item === undefined
        ? [`${path}[${index}]: undefined`]
        : plainDataProblems(item, `${path}[${index}]`),
    );
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return [`${path}: a ${value.constructor.name}`];
  // An undefined field is dropped by JSON, and every reader takes a missing field as undefined.
  return Object.entries(value).flatMap(([name, field]) =>
    field === undefined ? [] : plainDataProblems(field, `${path}.${name}`),
  );
}

const overJson = <T>(value: T): T =>
  value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);

/** What crossed JSON: each command with its answer, or its refusal before and after. */
interface Crossing {
  readonly command: SessionCommand;
  readonly answer?: unknown;
  readonly refusal?: { readonly before: HttpError; readonly after: HttpError };
}

/**
 * Wraps an access as a cluster's command Stream would carry it: the holder gets the command as
 * parsed JSON, the caller gets the answer (or the refusal, as `HttpError.toData`) as parsed JSON;
 * reads cross JSON too.
 */
function acrossJson(local: SessionAccess, crossings: Crossing[]): SessionAccess {
  return {
    findSession: async (ownerId, sessionId) =>
      overJson(await local.findSession(ownerId, sessionId)),
    listSessions: async (ownerId, page) =>
      overJson(await local.listSessions(ownerId, overJson(page))),
    viewSession: async (session) => overJson(await local.viewSession(overJson(session))),
    getRun: async (ownerId, runId) => overJson(await local.getRun(ownerId, runId)),
    events: {
      read: async (ctx, key, options) =>
        overJson(await local.events.read(ctx, key, overJson(options))),
      async *follow(ctx, key, options) {
        for await (const event of local.events.follow(ctx, key, overJson(options))) {
          yield overJson(event);
        }
      },
      lastSeq: async (ctx, key) => overJson(await local.events.lastSeq(ctx, overJson(key))),
    },
    idempotencyKeys: {
      begin: async (request) => overJson(await local.idempotencyKeys.begin(overJson(request))),
      complete: (ownerId, key, answer) =>
        local.idempotencyKeys.complete(ownerId, key, overJson(answer)),
      release: (ownerId, key) => local.idempotencyKeys.release(ownerId, key),
      forgetSession: (ownerId, sessionId) =>
        local.idempotencyKeys.forgetSession(ownerId, sessionId),
    },
    execute: (async (command: SessionCommand) => {
      let answer: unknown;
      try {
        answer = await local.execute(overJson(command));
      } catch (error) {
        const before = toHttpError(error);
        const after = HttpError.fromData(overJson(before.toData()));
        crossings.push({ command, refusal: { before, after } });
        throw after;
      }
      crossings.push({ command, answer });
      return overJson(answer);
    }) as SessionAccess['execute'],
  };
}

/** Keys whose string values are ids (or cursors) that differ from one service to another. */
const idKeys = new Set([
  'session_id',
  'run_id',
  'hint_id',
  'item_id',
  'active_run_id',
  'queued_run_ids',
  'tool_use_id',
  'message_id',
  'id',
  'next_after',
]);

/** Replaces ids by `<id N>` in order of first appearance, in fields and inside messages. */
function createIdNormalizer() {
  const names = new Map<string, string>();
  const learn = (value: unknown, key?: string): void => {
    if (typeof value === 'string' && key !== undefined && idKeys.has(key) && !names.has(value)) {
      names.set(value, `<id ${names.size + 1}>`);
    } else if (Array.isArray(value)) {
      for (const item of value) learn(item, key);
    } else if (typeof value === 'object' && value !== null) {
      for (const [name, field] of Object.entries(value)) learn(field, name);
    }
  };
  const replace = (value: unknown): unknown => {
    if (typeof value === 'string') {
      let text = value;
      for (const [id, name] of names) text = text.split(id).join(name);
      return text;
    }
    if (Array.isArray(value)) return value.map(replace);
    if (typeof value === 'object' && value !== null) {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replace(v)]));
    }
    return value;
  };
  return {
    normalize(body: unknown): unknown {
      learn(body);
      return replace(body);
    },
    /** The id a placeholder stands for in this service. */
    idOf(name: string): string {
      for (const [id, placeholder] of names) if (placeholder === name) return id;
      throw new Error(`no id is ${name}`);
    },
  };
}

const serviceOptions: TestServiceOptions = {
  agentOn: (clock) => createDemoAgent({ clock, chunkDelayMs: 0 }),
  maxPendingHints: 2,
  maxSessionsPerOwner: 5,
};

/**
 * A walk through every command and its refusals; each step's answer is recorded with ids
 * normalized. Steps name earlier ids by placeholder, so both services take the same steps.
 */
async function walk(t: TestService) {
  const ids = createIdNormalizer();
  const transcript: Array<{
    step: string;
    status: number;
    headers: Record<string, string | null>;
    body: unknown;
  }> = [];
  const step = async (
    name: string,
    method: string,
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ) => {
    // Placeholders in the path and the body stand for this service's ids.
    const actual = (text: string) => text.replace(/<id \d+>/g, (name) => ids.idOf(name));
    const response = await t.request(method, actual(path), {
      body: body === undefined ? undefined : actual(JSON.stringify(body)),
      headers,
    });
    const text = await response.text();
    const answer = ids.normalize(text === '' ? null : JSON.parse(text));
    transcript.push({
      step: name,
      status: response.status,
      headers: {
        'retry-after': response.headers.get('retry-after'),
        'idempotent-replayed': response.headers.get('idempotent-replayed'),
      },
      body: answer,
    });
    await flush();
    t.clock.increment(1); // sessions and events get distinct times: the list's order is fixed
    return answer as Record<string, unknown>;
  };
  const events = (name: string, id: string, list: unknown[]) =>
    step(name, 'POST', `/api/sessions/${id}/events`, { events: list });
  const waitFor = async (id: string, type: string, runId: string) => {
    await t.waitForEvent(ids.idOf(id), (e) => e.type === type && e.runId === ids.idOf(runId));
    await flush();
  };

  const a = (await step('create enqueue', 'POST', '/api/sessions', {})).session_id as string;
  const r = (await step('create reject', 'POST', '/api/sessions', { strategy: 'reject' }))
    .session_id as string;
  await step('create loop with strategy', 'POST', '/api/sessions', {
    mode: 'loop',
    strategy: 'enqueue',
  });
  await step('patch mode', 'PATCH', `/api/sessions/${r}`, { mode: 'loop' });
  await step('patch nothing', 'PATCH', `/api/sessions/${r}`, {});
  await step('patch grace', 'PATCH', `/api/sessions/${r}`, {
    grace_ms: 50,
    approval_timeout_ms: 600_000,
  });
  const sent = await events('message', r, [
    { type: 'user.message', payload: { text: 'what time is it?' } },
  ]);
  const run1 = (sent.results as Array<{ run_id: string }>)[0]?.run_id ?? '';
  await waitFor(r, 'agent.approval_requested', run1);
  const view = await step('view busy', 'GET', `/api/sessions/${r}`);
  const toolUseId =
    (view.pending_approvals as Array<{ tool_use_id: string }>)[0]?.tool_use_id ?? '';
  await events('hint, then a message while busy', r, [
    { type: 'user.supplement', payload: { text: 'in UTC' } },
    { type: 'user.message', payload: { text: 'and now?' } },
  ]);
  await events('confirm an unknown tool call', r, [
    { type: 'user.tool_confirmation', payload: { tool_use_id: 'nope', allow: true } },
  ]);
  await events('deny the tool call', r, [
    {
      type: 'user.tool_confirmation',
      payload: { tool_use_id: toolUseId, allow: false, deny_message: 'not now' },
    },
  ]);
  await waitFor(r, 'run.completed', run1);
  const again = await events('message again', r, [
    { type: 'user.message', payload: { text: 'what time is it?' } },
  ]);
  const run2 = (again.results as Array<{ run_id: string }>)[0]?.run_id ?? '';
  await waitFor(r, 'agent.approval_requested', run2);
  await events('interrupt unknown, then at a safe point', r, [
    { type: 'user.interrupt', payload: { run_id: 'nope' } },
    {
      type: 'user.interrupt',
      payload: { run_id: run2, mode: 'any_safe_point', timeout_ms: 1, reason: 'enough' },
    },
  ]);
  await waitFor(r, 'run.cancelled', run2);
  await events('interrupt the idle session, then an ended run', r, [
    { type: 'user.interrupt' },
    { type: 'user.interrupt', payload: { run_id: run1 } },
  ]);
  await step('run', 'GET', `/api/runs/${run2}`);
  await step('no run', 'GET', '/api/runs/nope');
  await step('a page of events', 'GET', `/api/sessions/${r}/events?limit=4&after=2`);
  await events(
    'three hints, one too many',
    a,
    [1, 2, 3].map((n) => ({ type: 'user.supplement', payload: { text: `hint ${n}` } })),
  );
  const key = { 'idempotency-key': 'k1' };
  await step('create with a key', 'POST', '/api/sessions', {}, key);
  await step('create retried', 'POST', '/api/sessions', {}, key);
  await step('key reused', 'POST', '/api/sessions', { strategy: 'reject' }, key);
  const l = (await step('create loop', 'POST', '/api/sessions', { mode: 'loop' }))
    .session_id as string;
  await events('loop message with a strategy', l, [
    { type: 'user.message', payload: { text: 'hello', strategy: 'reject' } },
  ]);
  await events('loop message', l, [
    { type: 'user.message', payload: { text: 'hello', preempt: true } },
  ]);
  await t.waitForEvent(ids.idOf(l), (e) => e.type === 'run.completed');
  await flush();
  await step('view loop', 'GET', `/api/sessions/${l}`);
  await step('create fifth', 'POST', '/api/sessions', {});
  await step('create sixth', 'POST', '/api/sessions', {});
  await step('list', 'GET', '/api/sessions?limit=3');
  await step('delete loop', 'DELETE', `/api/sessions/${l}`);
  await step('view deleted', 'GET', `/api/sessions/${l}`);
  await step('delete again', 'DELETE', `/api/sessions/${l}`);
  await events('hint to the deleted session', l, [
    { type: 'user.supplement', payload: { text: 'late' } },
  ]);
  t.service.drain();
  await events('message while draining', a, [
    { type: 'user.message', payload: { text: 'one more' } },
  ]);
  await step('create while draining', 'POST', '/api/sessions', {});
  return transcript;
}

describe('SessionAccess over JSON', () => {
  it('every command, answer and refusal crosses JSON as plain data and gives the same HTTP answer', async () => {
    const direct = createTestService(serviceOptions);
    services.push(direct);
    const expected = await walk(direct);

    const crossings: Crossing[] = [];
    let carriedAccess: SessionAccess | undefined;
    const carried = createTestService({
      ...serviceOptions,
      sessionAccess: (local) => (carriedAccess = acrossJson(local, crossings)),
    });
    services.push(carried);
    const seen = await walk(carried);
    // A command for a session that went away after the route found it (a delete racing it).
    const gone = { ownerId: 'alice', sessionId: 'gone' };
    for (const command of [
      { type: 'session.update', ...gone, settings: { grace_ms: 1 } },
      { type: 'session.delete', ...gone },
      { type: 'session.apply_events', ...gone, events: [] },
    ] as const) {
      await expect(carriedAccess?.execute(command)).rejects.toMatchObject({
        status: 404,
        code: 'not_found',
      });
    }

    expect(seen).toEqual(expected);
    // The walk did what it says: each status in turn.
    expect(expected.map((s) => `${s.status} ${s.step}`)).toEqual([
      '201 create enqueue',
      '201 create reject',
      '400 create loop with strategy',
      '400 patch mode',
      '400 patch nothing',
      '200 patch grace',
      '200 message',
      '200 view busy',
      '409 hint, then a message while busy',
      '200 confirm an unknown tool call',
      '200 deny the tool call',
      '200 message again',
      '200 interrupt unknown, then at a safe point',
      '200 interrupt the idle session, then an ended run',
      '200 run',
      '404 no run',
      '200 a page of events',
      '429 three hints, one too many',
      '201 create with a key',
      '201 create retried',
      '422 key reused',
      '201 create loop',
      '400 loop message with a strategy',
      '200 loop message',
      '200 view loop',
      '201 create fifth',
      '429 create sixth',
      '200 list',
      '204 delete loop',
      '404 view deleted',
      '404 delete again',
      '404 hint to the deleted session',
      '503 message while draining',
      '503 create while draining',
    ]);

    const problems = crossings.flatMap(({ command, answer, refusal }) => [
      ...plainDataProblems(command, command.type),
      ...(refusal === undefined
        ? plainDataProblems(answer, `${command.type} answer`)
        : plainDataProblems(refusal.before.toData(), `${command.type} refusal`)),
    ]);
    expect(problems).toEqual([]);
    for (const { refusal } of crossings) {
      if (refusal === undefined) continue;
      expect([refusal.after.status, refusal.after.toBody()]).toEqual([
        refusal.before.status,
        refusal.before.toBody(),
      ]);
    }
    expect(new Set(crossings.map((c) => c.command.type))).toEqual(
      new Set(['session.create', 'session.update', 'session.delete', 'session.apply_events']),
    );
    expect(
      new Set(crossings.flatMap((c) => (c.refusal === undefined ? [] : [c.refusal.before.code]))),
    ).toEqual(
      new Set([
        'invalid_body',
        'session_busy',
        'too_many_hints',
        'invalid_event',
        'too_many_sessions',
        'not_found',
        'shutting_down',
      ]),
    );
  });
});

describe('HttpError.fromData', () => {
  it('reads back every code with its status, details and extra; anything else is internal', () => {
    for (const code of Object.keys(statusOfCode) as HttpErrorCode[]) {
      const error = new HttpError(
        code,
        `a ${code}`,
        { active_run_id: 'r1' },
        { results: [{ type: 'x' }] },
      );
      const back = HttpError.fromData(overJson(error.toData()));
      expect([back.status, back.toBody()]).toEqual([error.status, error.toBody()]);
    }
    for (const junk of [
      null,
      'x',
      1,
      [],
      {},
      { code: 'teapot', message: 'm' },
      { code: 'not_found' },
      { code: 'toString', message: 'm' },
    ]) {
      expect(HttpError.fromData(junk).toBody()).toEqual({
        error: { code: 'internal', message: 'an internal error occurred' },
      });
    }
  });
});
