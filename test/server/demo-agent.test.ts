/**
 * The default agent's parts: the safe calculator, the demo model's plan, the demo agent end to
 * end on a simulated clock, auth helpers and crash recovery.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SimulatedClock } from 'xstate';
import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/agent/messages.js';
import { CancelMode } from '../../machines/cancel-request.js';
import { createMemoryEventLog } from '../../src/events/memory-event-log.js';
import { createRuntime } from '../../src/runtime/create-runtime.js';
import {
  bearerToken,
  createDevToken,
  createTokenAuthenticator,
  parseTokenList,
} from '../../src/server/auth.js';
import { evaluateArithmetic } from '../../src/server/calculator.js';
import { createDemoAgent, createDemoTools, planDemoReply } from '../../src/server/demo-agent.js';
import { recoverCrashedRuns } from '../../src/server/recover.js';
import { parseServeArgs } from '../../src/server/serve-command.js';
import { openSqliteDatabase } from '../../src/stores/sqlite/database.js';
import { createSqliteRunRecords } from '../../src/stores/sqlite/run-records.js';

describe('evaluateArithmetic', () => {
  it.each<[string, number]>([
    ['6*7', 42],
    ['(2 + 3) * 7', 35],
    ['2^3^2', 512],
    ['2**10', 1024],
    ['-3 + +4', 1],
    ['10 % 4', 2],
    ['7 / 2', 3.5],
    ['1e3 + .5', 1000.5],
    ['sqrt(16) + abs(-2)', 6],
    ['round(pi * 100)', 314],
    ['2 × 3 ÷ 4 − 1', 0.5],
    ['-2^2', -4],
  ])('%s = %d', (expression, value) => {
    expect(evaluateArithmetic(expression)).toBeCloseTo(value, 10);
  });

  it.each<[string, RegExp]>([
    ['', /non-empty/],
    ['1 +', /ends where a number was expected/],
    ['(1 + 2', /expected "\)"/],
    ['1 / 0', /division by zero/],
    ['5 % 0', /division by zero/],
    ['2 ^ 5000', /finite value/],
    ['process.exit(1)', /character "\."/],
    ['process', /unknown name "process"/],
    ["require('fs')", /character "'"/],
    ['1; 2', /character ";"/],
    ['x'.repeat(501), /at most 500 characters/],
    ['('.repeat(70) + '1' + ')'.repeat(70), /nested at most 64 levels/],
    ['-'.repeat(100) + '1', /nested at most 64 levels/],
    ['sqrt 4', /expected "\("/],
    ['1 2', /unexpected "2"/],
  ])('refuses %j with a typed error', (expression, message) => {
    expect(() => evaluateArithmetic(expression)).toThrow(message);
    expect(() => evaluateArithmetic(expression)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', field: 'expression' }),
    );
  });
});

describe('planDemoReply', () => {
  const user = (content: string): ChatMessage => ({ role: 'user', content });
  it('calls the calculator for arithmetic, the clock for the time, else replies at length', () => {
    const calc = planDemoReply([user('what is (2 + 3) * 7?')]);
    expect(calc.toolCalls).toEqual([
      {
        id: expect.stringMatching(/^toolu_/) as string,
        name: 'calculator',
        args: { expression: '(2 + 3) * 7' },
      },
    ]);
    expect(planDemoReply([user('What time is it?')]).toolCalls[0]?.name).toBe('clock');
    const long = planDemoReply([user('hello')]);
    expect(long.toolCalls).toEqual([]);
    expect(long.words.length).toBeGreaterThan(60);
    expect(long.words.join('')).toMatch(/^You said: "hello"\. /);
  });

  it('summarizes tool results and acknowledges hints of the turn', () => {
    const plan = planDemoReply([
      user('6*7'),
      {
        role: 'assistant',
        id: 'm1',
        content: '',
        toolCalls: [{ id: 't', name: 'calculator', arguments: '{}' }],
      },
      {
        role: 'tool',
        toolCallId: 't',
        name: 'calculator',
        content: '{"expression":"6*7","value":42}',
        isError: false,
      },
      { role: 'user', content: 'be quick', hintId: 'h1' },
    ]);
    expect(plan).toEqual({
      words: ['Noted: ', '"be ', 'quick". ', '6*7 ', '= ', '42.'],
      toolCalls: [],
    });
  });

  it('leaves out the cancelled attempts of calls a resumed turn asked again', () => {
    // A loop turn cut twice while the clock waited, resumed (README "Agents"): each cut saved a
    // "cancelled" result, each resume asked the call again; the reply speaks of the one that ran.
    const ask = (id: string): ChatMessage => ({
      role: 'assistant',
      id,
      content: '',
      toolCalls: [{ id: `${id}_0`, name: 'clock', arguments: '{}' }],
    });
    const result = (id: string, content: string, isError: boolean): ChatMessage => ({
      role: 'tool',
      toolCallId: `${id}_0`,
      name: 'clock',
      content,
      isError,
    });
    const cancelled = 'Error: the run was cancelled before this tool call finished.';
    const time = '{"iso":"2026-12-03T03:00:00.000Z","time_zone":"UTC"}';
    const plan = planDemoReply([
      user('What time is it?'),
      ask('m1'),
      result('m1', cancelled, true),
      ask('m2'),
      result('m2', cancelled, true),
      ask('m3'),
      result('m3', time, false),
    ]);
    expect(plan.words.join('')).toBe(
      'The server time is 2026-12-03T03:00:00.000Z (time zone UTC).',
    );
    // A call the turn did not ask again is still reported as not run.
    const notRun = planDemoReply([
      user('What time is it?'),
      ask('m1'),
      result('m1', cancelled, true),
    ]);
    expect(notRun.words.join('')).toBe(`The clock tool did not run (${cancelled}).`);
  });

  it('continues a reply a cancel cut, and replies anew when the cut text is not its start', () => {
    const whole = planDemoReply([user('hello')]).words.join('');
    const cut = 'You said: "hello". This reply ';
    const cutReply = (content: string): ChatMessage => ({
      role: 'assistant',
      id: 'm1',
      content,
      stop: 'cancelled',
    });
    const rest = planDemoReply([user('hello'), cutReply(cut)]).words.join('');
    expect(rest).toBe(whole.slice(cut.length));
    expect(rest.startsWith('streams word by word')).toBe(true);
    expect(planDemoReply([user('hello'), cutReply('Something else. ')]).words.join('')).toBe(whole);
  });
});

describe('createDemoAgent', () => {
  it('computes with the calculator, streaming words on the clock', async () => {
    const clock = new SimulatedClock();
    const runtime = createRuntime({ clock });
    const agent = createDemoAgent({ clock, chunkDelayMs: 10 });
    const deltas: string[] = [];
    runtime.onEvent((event) => {
      if (event.type === 'agent.message_delta') deltas.push(String(event.payload.delta));
    });
    const run = runtime.prepare({ ownerId: 'u', sessionId: 's', agent, input: 'what is 6*7?' });
    run.start();
    const result = run.result();
    for (let i = 0; i < 20; i++) {
      clock.increment(10);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect((await result).reply).toBe('6*7 = 42.');
    expect(deltas).toEqual(['Let ', 'me ', 'calculate ', 'that.', '6*7 ', '= ', '42.']);
    await runtime.shutdown({ graceMs: 0 });
  });

  it('reaches a safe point between streamed sentences; a resumed run streams only the rest', async () => {
    const clock = new SimulatedClock();
    const runtime = createRuntime({ clock });
    const agent = createDemoAgent({ clock, chunkDelayMs: 10 });
    const deltas = new Map<string, string[]>();
    runtime.onEvent((event) => {
      if (event.type !== 'agent.message_delta') return;
      const list = deltas.get(event.runId ?? '') ?? [];
      list.push(String(event.payload.delta));
      deltas.set(event.runId ?? '', list);
    });
    const drive = async (done: () => boolean) => {
      for (let i = 0; i < 200 && !done(); i++) {
        clock.increment(10);
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    const key = { ownerId: 'u', sessionId: 's' };
    const cut = runtime.prepare({ ...key, agent, input: 'hello' });
    cut.start();
    await drive(() => (deltas.get(cut.id)?.length ?? 0) >= 2);
    // A preempt's kind of cancel: at any safe point, escalating only after 10 s.
    cut.cancel({ mode: CancelMode.AnySafePoint, timeoutMs: 10_000 });
    let outcome: Awaited<typeof cut.termination> | undefined;
    void cut.termination.then((o) => (outcome = o));
    await drive(() => outcome !== undefined);
    expect(outcome).toMatchObject({ status: 'CANCELLED', escalated: false });
    const partial = (deltas.get(cut.id) ?? []).join('');
    expect(partial).toBe('You said: "hello". ');
    expect(cut.safePointState).toMatchObject({ step: 1, partial });

    const resumed = runtime.prepare({
      ...key,
      agent,
      input: { resume: cut.safePointState as never },
    });
    resumed.start();
    const result = resumed.result();
    let finished = false;
    void result.finally(() => (finished = true));
    await drive(() => finished);
    const whole = planDemoReply([{ role: 'user', content: 'hello' }]).words.join('');
    expect((await result).reply).toBe(whole.slice(partial.length));
    expect(`${partial}${(deltas.get(resumed.id) ?? []).join('')}`).toBe(whole);
    // The session's history holds the question once, the cut reply, and its continuation.
    const history = await runtime.sessionStore.load({}, key);
    expect(history.map((m) => [m.role, 'stop' in m ? m.stop : undefined])).toEqual([
      ['user', undefined],
      ['assistant', 'cancelled'],
      ['assistant', undefined],
    ]);
    await runtime.shutdown({ graceMs: 0 });
  });

  it('resumes a carried turn (a cluster failover: nothing saved it) and saves it whole, the question once', async () => {
    const clock = new SimulatedClock();
    const runtime = createRuntime({ clock });
    const agent = createDemoAgent({ clock, chunkDelayMs: 10 });
    const key = { ownerId: 'u', sessionId: 's' };
    const partial = 'You said: "hello". ';
    const run = runtime.prepare({
      ...key,
      agent,
      // What the holder recorded at its last safe point; the history holds none of the turn.
      input: {
        resume: { step: 1, messages: [{ role: 'user', content: 'hello' }], partial },
        carried: true,
      },
    });
    run.start();
    const result = run.result();
    let finished = false;
    void result.finally(() => (finished = true));
    for (let i = 0; i < 200 && !finished; i++) {
      clock.increment(10);
      await new Promise((resolve) => setImmediate(resolve));
    }
    const whole = planDemoReply([{ role: 'user', content: 'hello' }]).words.join('');
    // The same run as the lost attempt: its reply is the whole reply.
    expect((await result).reply).toBe(whole);
    const history = await runtime.sessionStore.load({}, key);
    expect(history.map((m) => [m.role, m.content, 'stop' in m ? m.stop : undefined])).toEqual([
      ['user', 'hello', undefined],
      ['assistant', partial, 'cancelled'],
      ['assistant', whole.slice(partial.length), undefined],
    ]);
    await runtime.shutdown({ graceMs: 0 });
  });

  it('refuses an unknown tool name to confirm', () => {
    expect(() => createDemoTools({ confirm: ['shell'] })).toThrow(/calculator and clock/);
  });
});

describe('auth helpers', () => {
  it('parses token:owner lists and authenticates by digest', () => {
    const tokens = parseTokenList(' alice-secret:alice , bob-secret-2:bob:admin ');
    expect([...tokens]).toEqual([
      ['alice-secret', 'alice'],
      ['bob-secret-2', 'bob:admin'],
    ]);
    const authenticate = createTokenAuthenticator(tokens);
    expect(authenticate('alice-secret')).toBe('alice');
    expect(authenticate('alice-secreT')).toBeUndefined();
    expect(authenticate('')).toBeUndefined();
    expect(createDevToken()).toMatch(/^rp_dev_[\w-]{32}$/);
    expect(bearerToken('bearer abc')).toBe('abc');
    expect(bearerToken('Bearer a b')).toBeUndefined();
  });

  it.each(['', 'short:me', 'no-owner-here', 'tok-ok-1:alice,tok-ok-1:bob', 'spaced token:alice'])(
    'refuses the token list %j without echoing secrets',
    (spec) => {
      expect(() => parseTokenList(spec)).toThrow(/INVALID_ARGUMENT/);
      try {
        parseTokenList(spec);
      } catch (error) {
        if (spec.includes('tok-ok-1')) expect(String(error)).not.toContain('tok-ok-1');
      }
    },
  );
});

describe('recoverCrashedRuns', () => {
  it('marks unfinished runs FAILED (cause crashed) from their last logged status, after the last seq', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'runplane-recover-'));
    const db = openSqliteDatabase({ path: join(dir, 'r.db') });
    const runs = createSqliteRunRecords({ database: db });
    const eventLog = createMemoryEventLog();
    const key = { ownerId: 'alice', sessionId: 's1' };
    const status = (runId: string, from: string, to: string) =>
      eventLog.append({}, key, { type: 'run.status', runId, payload: { from, to }, at: 1 });
    for (const runId of ['r1', 'r2', 'r3', 'r4', 'r5']) {
      runs.create({ runId, ...key, input: runId, at: 1 });
    }
    status('r1', 'CREATED', 'QUEUED');
    status('r1', 'QUEUED', 'RUNNING');
    status('r2', 'CREATED', 'QUEUED');
    runs.finish('r3', { status: 'COMPLETED', reason: 'completed' }, 2);
    // r4 ended (cancelled) but its agent had not settled when the process died.
    status('r4', 'RUNNING', 'CANCELLED');
    eventLog.append({}, key, {
      type: 'run.cancelled',
      runId: 'r4',
      payload: { cause: 'cancel', escalated: false, reason: 'user.interrupt' },
      at: 1,
    });
    // r5 was recorded, never logged: the process died before it started.
    const before = eventLog.lastSeq({}, key);
    const clock = new SimulatedClock();
    clock.set(100);
    const crashed = await recoverCrashedRuns({ runs, eventLog, clock });
    expect(crashed).toEqual([
      { ...key, runId: 'r1', status: 'RUNNING' },
      { ...key, runId: 'r2', status: 'QUEUED' },
      { ...key, runId: 'r5', status: 'CREATED' },
    ]);
    const added = await eventLog.read({}, key, { after: before });
    const stopped = (s: string) => `the server process stopped while the run was ${s}`;
    expect(added.map((e) => [e.seq, e.runId, e.type, e.payload])).toEqual([
      [before + 1, 'r1', 'run.status', { from: 'RUNNING', to: 'FAILED' }],
      [before + 2, 'r1', 'run.failed', { error: stopped('RUNNING'), cause: 'crashed' }],
      [before + 3, 'r2', 'run.status', { from: 'QUEUED', to: 'FAILED' }],
      [before + 4, 'r2', 'run.failed', { error: stopped('QUEUED'), cause: 'crashed' }],
      [before + 5, 'r5', 'run.status', { from: 'CREATED', to: 'FAILED' }],
      [before + 6, 'r5', 'run.failed', { error: stopped('CREATED'), cause: 'crashed' }],
    ]);
    expect(runs.get('alice', 'r1')).toMatchObject({
      status: 'FAILED',
      endedAt: 100,
      outcome: { status: 'FAILED', cause: 'crashed', error: stopped('RUNNING') },
    });
    expect(runs.get('alice', 'r3')?.outcome).toEqual({ status: 'COMPLETED', reason: 'completed' });
    expect(runs.get('alice', 'r4')).toMatchObject({
      status: 'CANCELLED',
      outcome: { status: 'CANCELLED', cause: 'cancel', reason: 'user.interrupt', escalated: false },
    });
    expect(runs.listUnfinished()).toEqual([]);
    expect(await recoverCrashedRuns({ runs, eventLog, clock })).toEqual([]);
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
});

describe('parseServeArgs', () => {
  it('takes flags over environment variables, and both over the defaults', () => {
    expect(parseServeArgs([], {})).toEqual({
      host: undefined,
      port: undefined,
      dbPath: undefined,
      tokens: undefined,
      graceMs: undefined,
      heartbeatMs: undefined,
      maxStreamsPerOwner: undefined,
      chunkDelayMs: undefined,
      confirmTools: undefined,
      runTimeoutMs: undefined,
      openai: undefined,
    });
    const env = {
      RUNPLANE_PORT: '9000',
      RUNPLANE_TOKENS: 'env-token-1:alice',
      RUNPLANE_CONFIRM_TOOLS: 'none',
      OPENAI_BASE_URL: 'http://127.0.0.1:8000/v1',
      RUNPLANE_MODEL: 'qwen',
    };
    expect(parseServeArgs(['--port', '0', '--grace-ms', '250', '--db', 'x.db'], env)).toMatchObject(
      {
        port: 0,
        graceMs: 250,
        dbPath: 'x.db',
        tokens: 'env-token-1:alice',
        confirmTools: [],
        openai: { baseURL: 'http://127.0.0.1:8000/v1', model: 'qwen', apiKey: 'none' },
      },
    );
    expect(parseServeArgs(['--confirm-tools', 'calculator, clock'], {}).confirmTools).toEqual([
      'calculator',
      'clock',
    ]);
  });

  it('reads the data-lifecycle and per-owner flags', () => {
    const env = { RUNPLANE_RETENTION_DAYS: '30', RUNPLANE_RATE_LIMIT: '5' };
    expect(
      parseServeArgs(
        [
          '--max-sessions-per-owner',
          '10',
          '--max-running-runs-per-owner',
          '2',
          '--max-concurrent-runs',
          '4',
          '--max-unfinished-runs-per-owner',
          '50',
          '--rate-burst',
          '20',
          '--approval-timeout-ms',
          '60000',
          '--max-request-tokens',
          '8000',
          '--model-max-retries',
          '0',
          '--max-tool-result-tokens',
          '500',
          '--context-overflow',
          'drop',
        ],
        env,
      ),
    ).toMatchObject({
      retentionDays: 30,
      maxSessionsPerOwner: 10,
      maxRunningRunsPerOwner: 2,
      maxConcurrentRuns: 4,
      maxUnfinishedRunsPerOwner: 50,
      rateLimitPerSecond: 5,
      rateLimitBurst: 20,
      approvalTimeoutMs: 60_000,
      maxRequestTokens: 8_000,
      maxToolResultTokens: 500,
      contextOverflow: 'drop',
      modelMaxRetries: 0,
    });
    expect(parseServeArgs(['--rate-limit', '0'], {}).rateLimitPerSecond).toBe(0);
    expect(() => parseServeArgs(['--context-overflow', 'fold'], {})).toThrow(
      /`context-overflow` to be one of summary, drop, got "fold"/,
    );
    expect(() => parseServeArgs(['--retention-days', '0'], {})).toThrow(/`retention-days`/);
    expect(() => parseServeArgs(['--rate-limit', 'x'], {})).toThrow(/`rate-limit`/);
  });

  it('reads the cluster flags, only with a Redis URL', () => {
    expect(
      parseServeArgs(['--instance-id', 'a', '--lease-ttl-ms', '1000'], {
        RUNPLANE_REDIS_URL: 'redis://127.0.0.1:6380/0',
        RUNPLANE_KEY_PREFIX: 'staging:',
      }).redis,
    ).toEqual({
      url: 'redis://127.0.0.1:6380/0',
      instanceId: 'a',
      leaseTtlMs: 1_000,
      keyPrefix: 'staging:',
    });
    expect(parseServeArgs([], {}).redis).toBeUndefined();
    expect(
      parseServeArgs(['--redis', 'redis://h:1/0'], { RUNPLANE_FAILOVER_MAX_ATTEMPTS: '5' }).redis,
    ).toMatchObject({ failoverMaxAttempts: 5 });
    expect(
      parseServeArgs(['--redis', 'redis://h:1/0', '--failover-max-attempts', '1'], {}).redis,
    ).toMatchObject({ failoverMaxAttempts: 1 });
  });

  it.each<[string[], Record<string, string>, RegExp]>([
    [['--redis', 'http://127.0.0.1:6379'], {}, /`--redis` or RUNPLANE_REDIS_URL to be a redis:/],
    [['--redis', 'redis://127.0.0.1:6379/x'], {}, /redis:\/\/host:port\/<db number>/],
    // No host: refused, not taken as 127.0.0.1:6379 (as ioredis would); the password redacted.
    [['--redis', 'redis://'], {}, /redis:\/\/host:port\/<db number>/],
    [['--redis', 'redis://:S3cretPW@/0'], {}, /got "redis:\/\/:\*\*\*@\/0"/],
    [['--instance-id', 'a'], {}, /`--instance-id` only with `--redis`/],
    [['--failover-max-attempts', '2'], {}, /`--failover-max-attempts` only with `--redis`/],
    [
      ['--redis', 'redis://h:1', '--failover-max-attempts', '0'],
      {},
      /`failover-max-attempts` to be an integer from 1 to 100/,
    ],
    [
      ['--redis', 'redis://h:1'],
      { RUNPLANE_FAILOVER_MAX_ATTEMPTS: 'x' },
      /`failover-max-attempts` to be an integer from 1 to 100, got "x"/,
    ],
    // Empty is a bad number too (an unset variable in a script), never "use the default".
    [
      ['--redis', 'redis://h:1', '--failover-max-attempts', ''],
      {},
      /`failover-max-attempts` to be an integer from 1 to 100, got ""/,
    ],
    [
      ['--redis', 'redis://h:1'],
      { RUNPLANE_FAILOVER_MAX_ATTEMPTS: '' },
      /`failover-max-attempts` to be an integer from 1 to 100, got ""/,
    ],
    [['--port', ''], {}, /`port` to be an integer from 0 to 65535, got ""/],
    [[], { RUNPLANE_GRACE_MS: '' }, /`grace-ms` to be an integer from 0 to 3600000, got ""/],
    [
      ['--redis', 'redis://h:1', '--lease-ttl-ms', '10'],
      {},
      /`lease-ttl-ms` to be an integer from 30/,
    ],
    [['--port', '70000'], {}, /`port` to be an integer from 0 to 65535/],
    [[], { RUNPLANE_GRACE_MS: '-1' }, /`grace-ms`/],
    [['--heartbeat-ms', '0'], {}, /`heartbeat-ms`/],
    [['--max-streams', '0'], {}, /`max-streams`/],
    [[], { OPENAI_BASE_URL: 'http://x/v1' }, /RUNPLANE_MODEL/],
    [['--nope'], {}, /Unknown option '--nope'/],
    [['serve-extra'], {}, /Unexpected argument 'serve-extra'/],
    [
      [],
      { RUNPLANE_TOKENS: '' },
      /`--tokens` or RUNPLANE_TOKENS to list token:owner pairs, got an empty value/,
    ],
    [['--tokens', ' '], {}, /`--tokens` or RUNPLANE_TOKENS to list token:owner pairs/],
  ])('refuses %j %j', (args, env, message) => {
    expect(() => parseServeArgs(args, env)).toThrow(message);
  });
});
