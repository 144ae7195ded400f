/**
 * A hostile client with a valid token, against `runplane serve` in a child process on a real
 * socket: what it sends must not exhaust the server's memory (issue 14).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
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
  // RSS is read from /proc: Linux only (as CI).
  it.runIf(process.platform === 'linux')(
    'cannot exhaust a 256 MB heap through the event log tail: 30 sessions × 64 hints of 100 KB',
    async () => {
      dir = mkdtempSync(join(tmpdir(), 'runplane-hostile-'));
      server = await spawnServer(
        ['--db', join(dir, 'runplane.db'), '--tokens', `${TOKEN}:mallory`],
        { nodeArgs: ['--max-old-space-size=256'] },
      );
      const pid = server.child.pid;
      const rss = () =>
        Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) *
        1024;
      const call = client(server.url, TOKEN);
      // The attack of issue 14: 30 sessions × 8 batches × 8 hints of 100,000 characters. A tail
      // of 64 events per session pinned 6.4 MB each; the server died past ~31 sessions.
      const hint = { type: 'user.supplement', payload: { text: 'x'.repeat(100_000) } };
      const batch = { events: Array.from({ length: 8 }, () => hint) };
      let started = 0;
      let done = 0;
      let rssAfter10 = 0;
      const attacker = async () => {
        while (started < 30) {
          started++;
          const created = await call('POST', '/api/sessions', {});
          expect(created.status).toBe(201);
          const id = created.body.session_id as string;
          for (let i = 0; i < 8; i++) {
            expect((await call('POST', `/api/sessions/${id}/events`, batch)).status).toBe(200);
          }
          if (++done === 10) rssAfter10 = rss();
        }
      };
      await Promise.all([attacker(), attacker(), attacker(), attacker()]);
      // Bounded: the 20 sessions after the tenth (12.8 MB of tails before the fix) leave the
      // resident set where it was, give or take the heap's garbage.
      expect(rss() - rssAfter10).toBeLessThan(48 * 1024 * 1024);
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
    },
    120_000,
  );
});
