/**
 * One `runplane serve` per database, with real processes: a second one on the same SQLite file
 * refuses to start with a clear message; after `kill -9` of the first, a new one starts (the
 * lock died with its process). Also a session deleted over a real socket: its data leaves the
 * file through the sweep.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { client, streamUntil, useServerProcesses } from './process-helpers.js';

const TOKEN = 'lock-token-1';
const { boot, scratch } = useServerProcesses(TOKEN);

describe('one server per database', () => {
  // Starts several `runplane` processes (each compiles the sources with tsx: seconds on a
  // loaded host).
  it(
    'refuses a second server on the same file; after kill -9 of the first, a new one starts',
    { timeout: 120_000 },
    async () => {
      const dir = scratch('runplane-lock-');
      const dbPath = join(dir, 'runplane.db');
      const first = await boot(dbPath);
      expect(first.output()).toContain(`locked for this process: ${dbPath}.lock`);

      const refused = await boot(dbPath).then(
        () => 'started',
        (error: unknown) => String(error),
      );
      expect(refused).toMatch(/serve exited \(1\) before listening/);
      expect(refused).toContain(
        `runplane serve: STORE_FAILED: the database ${dbPath} is in use by another runplane serve`,
      );
      // The first one was not disturbed.
      const api = client(first.url, TOKEN);
      expect((await api('POST', '/api/sessions', {})).status).toBe(201);

      first.child.kill('SIGKILL');
      expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
      const second = await boot(dbPath);
      const sessions = await client(second.url, TOKEN)('GET', '/api/sessions');
      expect((sessions.body.sessions as unknown[]).length).toBe(1);
      second.child.kill('SIGTERM');
      expect((await second.exited).code).toBe(0);
      // A clean stop released the lock too.
      const third = await boot(dbPath);
      third.child.kill('SIGTERM');
      expect((await third.exited).code).toBe(0);
    },
  );

  // Starts several `runplane` processes (each compiles the sources with tsx: seconds on a
  // loaded host).
  it(
    'DELETE over a real socket: 204, then 404; the sweep removes its rows from the file',
    { timeout: 120_000 },
    async () => {
      const dir = scratch('runplane-delete-');
      const dbPath = join(dir, 'runplane.db');
      const server = await boot(dbPath, ['--chunk-delay-ms', '200']);
      const api = client(server.url, TOKEN);
      const id = (await api('POST', '/api/sessions', {})).body.session_id as string;
      const kept = (await api('POST', '/api/sessions', {})).body.session_id as string;
      await api('POST', `/api/sessions/${id}/events`, {
        events: [{ type: 'user.message', payload: { text: 'tell me a long story' } }],
      });
      await streamUntil(server.url, TOKEN, id, (e) => e.type === 'agent.message_delta');
      const deleted = await fetch(`${server.url}/api/sessions/${id}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(deleted.status).toBe(204);
      expect((await api('GET', `/api/sessions/${id}`)).status).toBe(404);
      const listed = (await api('GET', '/api/sessions')).body.sessions as Array<{
        session_id: string;
      }>;
      expect(listed.map((s) => s.session_id)).toEqual([kept]);

      // Read the file beside the server (WAL: a reader never blocks it) until the sweep is done.
      const reader = new Database(dbPath, { readonly: true });
      try {
        const rows = () =>
          (
            reader
              .prepare(
                `SELECT (SELECT COUNT(*) FROM runplane_events WHERE session_id = ?)
                    + (SELECT COUNT(*) FROM runplane_runs WHERE session_id = ?)
                    + (SELECT COUNT(*) FROM runplane_sessions WHERE session_id = ?) AS n`,
              )
              .get(id, id, id) as { n: number }
          ).n;
        // Each check is a request to the server first: the sweep runs between requests.
        for (let i = 0; i < 1_000 && rows() > 0; i++) await api('GET', '/api/sessions');
        expect(rows()).toBe(0);
      } finally {
        reader.close();
      }
      server.child.kill('SIGTERM');
      expect((await server.exited).code).toBe(0);
    },
  );
});
