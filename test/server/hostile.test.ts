/**
 * A hostile client with a valid token, against `runplane serve` in a child process on a real
 * socket: what it sends must not exhaust the server's memory (issue 14).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { client, spawnServer, type ServerProcess } from './process-helpers.js';

const TOKEN = 'hostile-token-1';
let server: ServerProcess | undefined;
let dir: string | undefined;
afterEach(async () => {
  if (server !== undefined && server.child.exitCode === null && server.child.signalCode === null) {
    server.child.kill('SIGKILL');
    await server.exited;
  }
  server = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('a hostile token holder', () => {
  it('cannot exhaust a 256 MB heap through the event log tail: 40 sessions × 64 hints of 100 KB', async () => {
    dir = mkdtempSync(join(tmpdir(), 'runplane-hostile-'));
    server = await spawnServer(['--db', join(dir, 'runplane.db'), '--tokens', `${TOKEN}:mallory`], {
      nodeArgs: ['--max-old-space-size=256'],
    });
    const call = client(server.url, TOKEN);
    // The attack of issue 14 (30 sessions × 8 batches × 8 hints of 100,000 characters), with 10
    // sessions more: a tail of 64 events per session pinned 6.4 MB each, past the heap at ~35.
    const hint = { type: 'user.supplement', payload: { text: 'x'.repeat(100_000) } };
    const batch = { events: Array.from({ length: 8 }, () => hint) };
    let started = 0;
    const attacker = async () => {
      while (started < 40) {
        started++;
        const created = await call('POST', '/api/sessions', {});
        expect(created.status).toBe(201);
        const id = created.body.session_id as string;
        for (let i = 0; i < 8; i++) {
          expect((await call('POST', `/api/sessions/${id}/events`, batch)).status).toBe(200);
        }
      }
    };
    await Promise.all([attacker(), attacker(), attacker(), attacker()]);
    // Alive and serving: a new session, and its log read back.
    const created = await call('POST', '/api/sessions', {});
    expect(created.status).toBe(201);
    const id = created.body.session_id as string;
    const sent = await call('POST', `/api/sessions/${id}/events`, {
      events: [{ type: 'user.supplement', payload: { text: 'still here' } }],
    });
    expect(sent.status).toBe(200);
    const read = await call('GET', `/api/sessions/${id}/events`);
    expect(read.body.last_seq).toBe(1);
    expect(server.child.exitCode).toBe(null);
  }, 120_000);
});
