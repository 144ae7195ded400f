/**
 * A frozen Redis (README "Cluster"): the private `redis-server` is `SIGSTOP`ped mid-run, so its
 * TCP connections stay open and nothing answers. A request that needs Redis is answered 503
 * `store_unavailable` (with `Retry-After`) instead of waiting for Redis, and a `SIGTERM`ed
 * `runplane serve --redis` exits within its grace plus a bounded Redis wait instead of never.
 * Real processes; every wait is on an answer or on the process's exit, each under a generous
 * cap that only turns a hang into a failure.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { skipRedis } from '../redis/redis-server.js';
import { useServeCluster, waitFor } from './serve-cluster.js';

/** Rejects naming `what` when `promise` has not settled within `capMs` (a hang, not a timing). */
function withCap<T>(promise: Promise<T>, capMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const cap = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still waiting after ${capMs} ms`)), capMs);
  });
  return Promise.race([promise, cap]).finally(() => clearTimeout(timer));
}

describe.skipIf(skipRedis)('runplane serve --redis with Redis frozen (SIGSTOP)', () => {
  const { cluster } = useServeCluster({ leaseTtlMs: 30_000, chunkDelayMs: 100 });
  afterEach(() => {
    cluster().redis.process.kill('SIGCONT');
  });

  it('a request answers 503 store_unavailable with Retry-After, and SIGTERM ends the process', async () => {
    const scene = cluster();
    const node = await scene.start({ id: 'a' });
    const created = await node.api('POST', '/api/sessions', {});
    const sessionId = String(created.body.session_id);
    const sent = await node.api('POST', `/api/sessions/${sessionId}/events`, {
      events: [{ type: 'user.message', payload: { text: 'tell me a story' } }],
    });
    expect(sent.status).toBe(200);
    // The run has shipped output: its session is held and written to when Redis freezes (and
    // still held at the SIGTERM: the lease TTL outlasts the test).
    await waitFor(async () => {
      const events = await scene.storedEvents(sessionId);
      return events.some((event) => event.type === 'agent.message_delta') ? true : undefined;
    }, 'the run to ship a delta');

    scene.redis.process.kill('SIGSTOP');
    // Before the fix this waited until Redis answered again (here: until the cap).
    const answer = await withCap(
      fetch(`${node.url}/api/sessions/${sessionId}`, {
        headers: { authorization: `Bearer ${scene.token}` },
      }),
      20_000,
      'GET of the session with Redis frozen',
    );
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('2');
    expect(((await answer.json()) as { error: { code: string } }).error.code).toBe(
      'store_unavailable',
    );

    // Before the fix the shutdown never ended (its releases and QUIT waited for Redis); with
    // only the command timeout it ended once the lease deadline passed (30 s here, past the
    // cap). Now: the grace (500 ms), 5 s more, a failed 1 s PING, then exit 1.
    node.process.child.kill('SIGTERM');
    const exited = await withCap(node.process.exited, 20_000, 'the SIGTERMed instance to exit');
    expect(exited).toEqual({ code: 1, signal: null });
    const output = node.process.output();
    // What is left undone is named: the session goes to failover, unshipped writes are dropped.
    expect(output).toMatch(
      /Redis did not answer during the shutdown \(Redis did not answer a PING within 1000 ms\); not waiting longer: the 1 session\(s\) held here when the shutdown began are left to failover/,
    );
    expect(output).toMatch(/writes not yet in Redis .* are dropped/);
    expect(output).toMatch(
      /runplane serve: stopped \(Redis did not answer; sessions left to failover\)/,
    );
  }, 60_000);
});
