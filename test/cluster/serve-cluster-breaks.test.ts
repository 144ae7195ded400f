/**
 * Defects found by breaking `runplane serve --redis` from outside (issue 20), each fixed: real serve
 * processes on a real private Redis, driven over HTTP. Each test waits on a response or on a
 * polled condition with a bound, never on a guessed duration.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { usePrivateRedis, skipRedis } from '../redis/redis-server.js';
import { client, spawnServer, type ServerProcess } from '../server/process-helpers.js';

const token = 'brk-token-0001';

describe.skipIf(skipRedis)('runplane serve --redis, broken from outside', () => {
  const redis = usePrivateRedis();
  const started: ServerProcess[] = [];
  let prefixes = 0;
  afterEach(() => {
    for (const server of started.splice(0)) server.child.kill('SIGKILL');
  });
  let admin: Redis | undefined;
  afterAll(async () => {
    await admin?.quit();
  });
  const boot = async (instanceId: string, prefix: string) => {
    const server = await spawnServer([
      '--redis',
      redis().url,
      '--key-prefix',
      prefix,
      '--instance-id',
      instanceId,
      '--tokens',
      `${token}:alice`,
      '--lease-ttl-ms',
      '2000',
      '--chunk-delay-ms',
      '100',
      '--rate-limit',
      '0',
    ]);
    started.push(server);
    return server;
  };

  it('a command forwarded by an instance named "c" is applied (its id is not read as the field c)', async () => {
    const prefix = `brk${++prefixes}:`;
    const holder = client((await boot('a', prefix)).url, token);
    const sender = client((await boot('c', prefix)).url, token);
    const created = await holder('POST', '/api/sessions', {});
    const sessionId = String(created.body.session_id);
    // Held on a (it created the session): the cancel goes through the command Stream from c.
    const answer = await sender('POST', `/api/sessions/${sessionId}/events`, {
      events: [{ type: 'user.interrupt', payload: { run_id: 'no-such-run' } }],
    });
    // Before the fix: 500 {"code":"internal","message":"a command in the command Stream is not JSON"}:
    // the entry is `r <id> i c c <json>`, and readCommands finds the field `c` at the value `c`.
    expect(answer).toEqual({
      status: 200,
      body: { results: [{ type: 'user.interrupt', result: 'not_found', run_id: 'no-such-run' }] },
    });
  });

  it('while a draining holder hands a session on, its waiting runs never show as CREATED nor the session as idle', async () => {
    const prefix = `brk${++prefixes}:`;
    const first = await boot('a', prefix);
    const other = client((await boot('b', prefix)).url, token);
    const holder = client(first.url, token);
    const sessionId = String((await holder('POST', '/api/sessions', {})).body.session_id);
    const runIds: string[] = [];
    for (const text of ['one', 'two', 'three']) {
      const sent = await holder('POST', `/api/sessions/${sessionId}/events`, {
        events: [{ type: 'user.message', payload: { text } }],
      });
      runIds.push(String((sent.body.results as Array<Record<string, unknown>>)[0]?.run_id));
    }
    first.child.kill('SIGTERM');
    const seen: string[] = [];
    const startedAt = performance.now();
    // Until b runs the second run (it takes the session once a's lease is released).
    for (;;) {
      const view = await other('GET', `/api/sessions/${sessionId}`);
      const run = await other('GET', `/api/runs/${runIds[1]}`);
      seen.push(`session ${String(view.body.status)}, run ${String(run.body.status)}`);
      if (run.body.status === 'RUNNING') break;
      if (performance.now() - startedAt > 30_000) throw new Error(`never ran: ${seen.join('; ')}`);
    }
    // Before the fix: "session idle, run CREATED" for about a second (the drain's cancel here emptied
    // the live state, and a run's record was never QUEUED).
    expect(seen.filter((line) => line.includes('idle') || line.includes('CREATED'))).toEqual([]);
  });
  it('a deleted session leaves no key but its fence once purged (no write lands after the purge)', async () => {
    const prefix = `brk${++prefixes}:`;
    const urlA = (await boot('a', prefix)).url;
    const urlB = (await boot('b', prefix)).url;
    const a = client(urlA, token);
    admin ??= new Redis(redis().url);
    const redisAdmin = admin;
    const ids: string[] = [];
    for (let index = 0; index < 6; index++) {
      const sessionId = String((await a('POST', '/api/sessions', {})).body.session_id);
      // Held on a; deleted on a (local) or on b (through the command Stream).
      const deleted = await fetch(`${index % 2 === 0 ? urlA : urlB}/api/sessions/${sessionId}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${token}` },
      });
      expect(deleted.status).toBe(204);
      ids.push(sessionId);
    }
    const keysOf = async (sessionId: string) =>
      (await redisAdmin.keys(`${prefix}{s:5:alice/21:${sessionId}}*`))
        .map((key) => key.slice(key.indexOf('}') + 1))
        .sort();
    const left = async () => {
      const found: Record<string, string[]> = {};
      for (const sessionId of ids) found[sessionId] = await keysOf(sessionId);
      return found;
    };
    // Quiet: no session listed live or deleted, none leased. (A session the watch takes again
    // is listed until it is released; after that nothing writes its keys.)
    const quiet = async () => {
      for (const sessionId of ids) {
        const member = JSON.stringify(['alice', sessionId]);
        if ((await redisAdmin.zscore(`${prefix}live-sessions`, member)) !== null) return false;
        if ((await redisAdmin.zscore(`${prefix}deleted-sessions`, member)) !== null) return false;
        if ((await redisAdmin.exists(`${prefix}{s:5:alice/21:${sessionId}}:lease`)) === 1) {
          return false;
        }
      }
      return true;
    };
    const startedAt = performance.now();
    while (!(await quiet())) {
      if (performance.now() - startedAt > 30_000)
        throw new Error(`never quiet: ${JSON.stringify(await left())}`);
    }
    const found = await left();
    // Before the fix: most keep `:meta` (only its `live` field) and `:batch`, in no set, so no sweep
    // finds them again: the delete's release (serve-cluster.ts) leaves the session in
    // `live-sessions`, so after the purge a watch takes it again, writes its live state
    // (catchUp), finds nothing to drive and releases and unlists it.
    expect(found).toEqual(Object.fromEntries(ids.map((sessionId) => [sessionId, [':fence']])));
  });
  it('a message sent to a healthy instance while the holder drains is not refused with shutting_down', async () => {
    const prefix = `brk${++prefixes}:`;
    const first = await boot('a', prefix);
    const holder = client(first.url, token);
    const other = client((await boot('b', prefix)).url, token);
    const sessionId = String((await holder('POST', '/api/sessions', {})).body.session_id);
    const message = (text: string) => ({ events: [{ type: 'user.message', payload: { text } }] });
    expect((await holder('POST', `/api/sessions/${sessionId}/events`, message('one'))).status).toBe(
      200,
    );
    first.child.kill('SIGTERM');
    const startedAt = performance.now();
    while (!first.output().includes('SIGTERM, shutting down')) {
      if (performance.now() - startedAt > 10_000) throw new Error('a never began its drain');
      await new Promise((resolve) => setTimeout(resolve, 10)); // paces the polls; decides nothing
    }
    // a still holds the session (its running run is being interrupted): b forwards the message.
    const sent = await other('POST', `/api/sessions/${sessionId}/events`, message('two'));
    // Before the fix: 503 {"code":"shutting_down","message":"the service is shutting down and takes no
    // new work"}: the draining holder applies the command and its service's refusal is b's
    // answer, for about a second (until a releases the lease), on an instance that is not
    // shutting down.
    expect(sent.body.error).toBeUndefined();
    expect(sent.status).toBe(200);
  });
  it('a session deleted after its holder died mid-run is purged once its lease is given back, not at the next hourly sweep', async () => {
    const prefix = `brk${++prefixes}:`;
    const first = await boot('a', prefix);
    const holder = client(first.url, token);
    const urlB = (await boot('b', prefix)).url;
    admin ??= new Redis(redis().url);
    const redisAdmin = admin;
    const sessionId = String((await holder('POST', '/api/sessions', {})).body.session_id);
    const message = { events: [{ type: 'user.message', payload: { text: 'one' } }] };
    expect((await holder('POST', `/api/sessions/${sessionId}/events`, message)).status).toBe(200);
    first.child.kill('SIGKILL');
    await first.exited;
    // b takes the session (its run is marked owner_lost), deletes it, answers, gives it back.
    const deleted = await fetch(`${urlB}/api/sessions/${sessionId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(deleted.status).toBe(204);
    const member = JSON.stringify(['alice', sessionId]);
    const startedAt = performance.now();
    while ((await redisAdmin.zscore(`${prefix}deleted-sessions`, member)) !== null) {
      // Before the fix: never within the bound (the delete's sweep kick runs while b still holds the
      // lease, so its step is busy; the next sweep is an hour later): events, history and run
      // records stay in Redis meanwhile.
      if (performance.now() - startedAt > 20_000) {
        throw new Error(
          `still unpurged after 20 s: ${(await redisAdmin.keys(`${prefix}{s:5:alice/21:${sessionId}}*`)).length} keys`,
        );
      }
    }
  });

  it('a session unlisted while its holder runs a run is listed again within a beat, so a kill -9 of the holder still moves it', async () => {
    const prefix = `brk${++prefixes}:`;
    const first = await boot('a', prefix);
    const holder = client(first.url, token);
    const other = client((await boot('b', prefix)).url, token);
    admin ??= new Redis(redis().url);
    const redisAdmin = admin;
    const sessionId = String((await holder('POST', '/api/sessions', {})).body.session_id);
    const sent = await holder('POST', `/api/sessions/${sessionId}/events`, {
      events: [{ type: 'user.message', payload: { text: 'one' } }],
    });
    const runId = String((sent.body.results as Array<Record<string, unknown>>)[0]?.run_id);
    const listKey = `${prefix}live-sessions`;
    const member = JSON.stringify(['alice', sessionId]);
    const until = async (what: string, check: () => Promise<boolean>) => {
      const startedAt = performance.now();
      while (!(await check())) {
        if (performance.now() - startedAt > 20_000) throw new Error(`not within 20 s: ${what}`);
      }
    };
    await until('listed', async () => (await redisAdmin.zscore(listKey, member)) !== null);
    // Unlisted behind the holder's back (as a releaser's late ZREM once did, by hand).
    await redisAdmin.zrem(listKey, member);
    // Before the fix: never (the holder listed a session once per hold).
    await until('listed again', async () => (await redisAdmin.zscore(listKey, member)) !== null);
    first.child.kill('SIGKILL');
    await first.exited;
    await until('the run marked by b', async () => {
      const run = await other('GET', `/api/runs/${runId}`);
      return run.body.status === 'FAILED';
    });
    expect((await other('GET', `/api/runs/${runId}`)).body).toMatchObject({
      status: 'FAILED',
      outcome: { status: 'FAILED', cause: 'owner_lost' },
    });
  });
});
