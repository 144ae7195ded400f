/**
 * Loop sessions across real restarts: `runplane serve` as a child process on a temp SQLite
 * file, stopped with SIGTERM (the loop checkpoints mid-turn, the next process resumes the turn
 * through genResume from the ReAct agent's safe-point state) and with SIGKILL (the turn in flight
 * is marked crashed, its batch and every later message go to the next turn, rebuilt from the
 * log). Every wait is for a line of output, a response or an event, never for time.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { client, streamUntil, useServerProcesses, type ServerProcess } from './process-helpers.js';

const TOKEN = 'loop-restart-token';
const { boot, scratch } = useServerProcesses(TOKEN);

interface LoggedEvent {
  seq: number;
  type: string;
  run_id: string | null;
  payload: Record<string, unknown>;
}

const logOf = async (server: ServerProcess, id: string): Promise<LoggedEvent[]> =>
  (await client(server.url, TOKEN)('GET', `/api/sessions/${id}/events?limit=1000`)).body
    .events as LoggedEvent[];

/** Sends messages to a loop session; returns their item ids. */
const send = async (server: ServerProcess, id: string, ...texts: string[]) => {
  const sent = await client(server.url, TOKEN)('POST', `/api/sessions/${id}/events`, {
    events: texts.map((text) => ({ type: 'user.message', payload: { text } })),
  });
  expect(sent.status).toBe(200);
  return (sent.body.results as Array<{ item_id: string }>).map((r) => r.item_id);
};

/** The item ids each completed turn answered, in log order. */
const answered = (log: readonly LoggedEvent[]) => {
  const items = new Map<string, unknown>();
  for (const e of log) {
    if (e.type === 'session.run_started' && e.run_id !== null)
      items.set(e.run_id, e.payload.item_ids);
  }
  return log.filter((e) => e.type === 'run.completed').map((e) => items.get(e.run_id ?? ''));
};

const newLoopSession = async (server: ServerProcess) =>
  (await client(server.url, TOKEN)('POST', '/api/sessions', { mode: 'loop' })).body
    .session_id as string;

describe('loop sessions across restarts', () => {
  it('SIGTERM stops the turn at a safe point and checkpoints; the restart resumes it mid-turn', async () => {
    const dir = scratch('runplane-loop-term-');
    const dbPath = join(dir, 'runplane.db');
    const first = await boot(dbPath, ['--chunk-delay-ms', '100']);
    const id = await newLoopSession(first);
    const [story] = await send(first, id, 'tell me a long story');
    await streamUntil(first.url, TOKEN, id, (e) => e.type === 'agent.message_delta');
    const [later] = await send(first, id, 'and then?');

    first.child.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: 0, signal: null });

    const second = await boot(dbPath, ['--chunk-delay-ms', '0']);
    expect(second.output()).toContain('resumed 1 loop session(s)');
    let completed = 0;
    const log = await streamUntil(
      second.url,
      TOKEN,
      id,
      (e) => e.type === 'run.completed' && ++completed === 2,
    );
    const cut = log.find((e) => e.type === 'run.cancelled');
    // The turn ended at a safe point (between sentences), not by escalation.
    expect(cut?.payload).toMatchObject({ escalated: false, initiator: 'shutdown' });
    expect(log.find((e) => e.type === 'session.loop_stopped')?.payload).toEqual({
      cause: 'shutdown',
      interrupted_item_ids: [story],
      unhandled_item_ids: [later],
      checkpoint: 'saved',
    });
    // Each message answered once: the resumed turn, then the one sent while it ran.
    expect(answered(log)).toEqual([[story], [later]]);
    // The resumed turn continued the reply the cut one had begun, not started it again.
    const cutRun = cut?.run_id;
    const partial = log
      .filter((e) => e.type === 'agent.message_delta' && e.run_id === cutRun)
      .map((e) => e.payload.delta)
      .join('');
    const resumedRun = log.filter((e) => e.type === 'session.run_started').at(-2)?.run_id;
    const rest = log.find((e) => e.type === 'agent.message' && e.run_id === resumedRun)?.payload
      .content as string;
    expect(partial.startsWith('You said: "tell me a long story".')).toBe(true);
    expect(rest.startsWith('You said')).toBe(false);
    expect(`${partial}${rest}`).toContain('to see the tools at work.');

    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
  }, 60_000);

  it('kill -9 mid-turn: the turn is crashed, its batch and every later message go to the next turn', async () => {
    const dir = scratch('runplane-loop-kill-');
    const dbPath = join(dir, 'runplane.db');
    const first = await boot(dbPath, ['--chunk-delay-ms', '200']);
    const id = await newLoopSession(first);
    const [a] = await send(first, id, 'tell me a long story');
    const startedTurn = await streamUntil(
      first.url,
      TOKEN,
      id,
      (e) => e.type === 'agent.message_delta',
    );
    const crashedRun = startedTurn.find((e) => e.type === 'session.run_started')?.run_id;
    const [b, c] = await send(first, id, 'what is 6*7?', 'and 2+2?');

    first.child.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });

    const second = await boot(dbPath, ['--chunk-delay-ms', '0']);
    expect(second.output()).toContain('recovered 1 run(s)');
    expect(second.output()).toContain('resumed 1 loop session(s)');
    const log = await streamUntil(second.url, TOKEN, id, (e) => e.type === 'run.completed');
    expect(
      log.find((e) => e.type === 'run.failed' && e.run_id === crashedRun)?.payload,
    ).toMatchObject({
      cause: 'crashed',
    });
    expect(answered(log)).toEqual([[a, b, c]]);
    const record = await client(second.url, TOKEN)('GET', `/api/runs/${crashedRun ?? ''}`);
    expect(record.body).toMatchObject({ status: 'FAILED', outcome: { cause: 'crashed' } });
    // Nothing more is owed: a third start resumes no loop.
    second.child.kill('SIGTERM');
    await second.exited;
    const third = await boot(dbPath, ['--chunk-delay-ms', '0']);
    expect(third.output()).not.toContain('resumed');
    expect(answered(await logOf(third, id))).toEqual([[a, b, c]]);
  }, 60_000);
});
