/**
 * `runplane serve` as a real process: killed with SIGKILL mid-run and started again on the
 * same SQLite file (the run is marked crashed, the log is intact, seq continues), and stopped
 * with SIGTERM / SIGINT (graceful, exit code 0 when drained).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { client, spawnServer, streamUntil, useServerProcesses } from './process-helpers.js';

const TOKEN = 'restart-token-1';
const { boot, scratch } = useServerProcesses(TOKEN);

describe('runplane serve as a process', () => {
  it('after kill -9 mid-run: the run is FAILED (crashed), the log is intact, seq continues', async () => {
    const dir = scratch('runplane-restart-');
    const dbPath = join(dir, 'nested', 'runplane.db');
    // A slow human pace: the run is still streaming when the process is killed.
    const first = await boot(dbPath, ['--chunk-delay-ms', '200']);
    expect(existsSync(dbPath)).toBe(true);
    const api = client(first.url, TOKEN);
    const id = (await api('POST', '/api/sessions', {})).body.session_id as string;
    const sent = await api('POST', `/api/sessions/${id}/events`, {
      events: [
        { type: 'user.message', payload: { text: 'tell me a long story' } },
        { type: 'user.message', payload: { text: 'and another' } },
      ],
    });
    const [running, queued] = (sent.body.results as Array<{ run_id: string; status: string }>).map(
      (r) => [r.run_id, r.status],
    );
    expect([running?.[1], queued?.[1]]).toEqual(['RUNNING', 'QUEUED']);
    const runningId = running?.[0] ?? '';
    const queuedId = queued?.[0] ?? '';
    await streamUntil(first.url, TOKEN, id, (e) => e.type === 'agent.message_delta');
    const before = (await api('GET', `/api/sessions/${id}/events?limit=1000`)).body
      .events as Array<{ seq: number; id: string; type: string }>;
    expect(before.at(-1)?.type).toBe('agent.message_delta');

    first.child.kill('SIGKILL');
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });

    const second = await boot(dbPath, ['--chunk-delay-ms', '0']);
    expect(second.output()).toContain(
      'recovered 2 run(s) the previous process left unfinished: FAILED, cause crashed',
    );
    const api2 = client(second.url, TOKEN);
    for (const [runId, status] of [
      [runningId, 'RUNNING'],
      [queuedId, 'QUEUED'],
    ] as const) {
      const record = await api2('GET', `/api/runs/${runId}`);
      expect(record.body).toMatchObject({
        run_id: runId,
        status: 'FAILED',
        outcome: {
          status: 'FAILED',
          cause: 'crashed',
          error: `the server process stopped while the run was ${status}`,
        },
      });
    }
    const after = (await api2('GET', `/api/sessions/${id}/events?limit=1000`)).body
      .events as Array<{
      seq: number;
      id: string;
      type: string;
      run_id: string;
      payload: Record<string, unknown>;
    }>;
    expect(after.slice(0, before.length)).toEqual(before);
    // The process may have logged more of the reply between that read and the kill.
    let last = before.length;
    while (after[last]?.type === 'agent.message_delta' && after[last]?.run_id === runningId) last++;
    expect(after.slice(last).map((e) => [e.seq, e.run_id, e.type, e.payload])).toEqual([
      [last + 1, runningId, 'run.status', { from: 'RUNNING', to: 'FAILED' }],
      [
        last + 2,
        runningId,
        'run.failed',
        { error: 'the server process stopped while the run was RUNNING', cause: 'crashed' },
      ],
      [last + 3, queuedId, 'run.status', { from: 'QUEUED', to: 'FAILED' }],
      [
        last + 4,
        queuedId,
        'run.failed',
        { error: 'the server process stopped while the run was QUEUED', cause: 'crashed' },
      ],
    ]);
    // A stale stop for the crashed run: ended, not not_found (the log remembers it).
    const stale = await api2('POST', `/api/sessions/${id}/events`, {
      events: [{ type: 'user.interrupt', payload: { run_id: runningId } }],
    });
    expect(stale.body.results).toEqual([
      { type: 'user.interrupt', result: 'ended', run_id: runningId },
    ]);
    // The session goes on; its seq continues.
    const next = await api2('POST', `/api/sessions/${id}/events`, {
      events: [{ type: 'user.message', payload: { text: 'what is 6*7?' } }],
    });
    const nextId = (next.body.results as Array<{ run_id: string }>)[0]?.run_id;
    const tail = await streamUntil(
      second.url,
      TOKEN,
      id,
      (e) => e.type === 'run.completed' && e.run_id === nextId,
    );
    expect(tail.find((e) => e.run_id === nextId)?.seq).toBe(last + 5);
    expect(
      tail.filter((e) => e.type === 'agent.message' && e.run_id === nextId).at(-1)?.payload,
    ).toMatchObject({ content: '6*7 = 42.' });

    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });
    expect(second.output()).toContain('runplane serve: stopped (drained)');
  });

  it('SIGTERM while a run streams: interrupts it, drains, exits 0; SIGINT on an idle server exits 0', async () => {
    const dir = scratch('runplane-sigterm-');
    const dbPath = join(dir, 'runplane.db');
    const server = await boot(dbPath, ['--chunk-delay-ms', '200']);
    const api = client(server.url, TOKEN);
    const id = (await api('POST', '/api/sessions', {})).body.session_id as string;
    const sent = await api('POST', `/api/sessions/${id}/events`, {
      events: [{ type: 'user.message', payload: { text: 'a long answer please' } }],
    });
    const runId = (sent.body.results as Array<{ run_id: string }>)[0]?.run_id;
    await streamUntil(server.url, TOKEN, id, (e) => e.type === 'agent.message_delta');
    server.child.kill('SIGTERM');
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(server.output()).toContain('SIGTERM, shutting down');

    const again = await boot(dbPath);
    expect(again.output()).not.toContain('recovered');
    const record = await client(again.url, TOKEN)('GET', `/api/runs/${runId}`);
    expect(record.body).toMatchObject({
      status: 'COMPLETED',
      outcome: { status: 'COMPLETED', reason: 'interrupted' },
    });
    again.child.kill('SIGINT');
    expect(await again.exited).toEqual({ code: 0, signal: null });
  });

  it('refuses bad flags with exit code 2: the problem, then one line pointing to --help', async () => {
    // The problem is the last thing but one printed, not buried above the whole usage.
    const refused = await spawnServer(['--port', 'eighty']).then(
      () => undefined,
      (error: unknown) => (error instanceof Error ? error.message : ''),
    );
    expect(refused).toMatch(
      /exited \(2\)[\s\S]*\nrunplane serve: .*expected `port` to be an integer from 0 to 65535, got "eighty"\nsee `runplane --help` for every command, flag and environment variable\n$/,
    );
    expect(refused).not.toContain('--tokens');
    await expect(
      spawnServer(['--redis', 'redis://127.0.0.1:1/0', '--failover-max-attempts', '']),
    ).rejects.toThrow(
      /exited \(2\)[\s\S]*expected `failover-max-attempts` to be an integer from 1 to 100, got ""/,
    );
  });
});
