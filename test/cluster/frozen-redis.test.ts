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
  const { cluster } = useServeCluster({ leaseTtlMs: 10_000, chunkDelayMs: 100 });
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
    // still held at the SIGTERM: the lease TTL outlasts the GET below).
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

    // Before the fix the shutdown never ended (its releases and QUIT waited for Redis).
    node.process.child.kill('SIGTERM');
    const exited = await withCap(node.process.exited, 20_000, 'the SIGTERMed instance to exit');
    // It exited on its own (0 when its run ended within the grace, 1 otherwise), not killed.
    expect(exited.signal).toBeNull();
    const output = node.process.output();
    expect(output).toMatch(/runplane serve: stopped \(/);
    // Whatever was not written is named: the lease left to expire, or the shutdown given up.
    expect(output).toMatch(/lost session|could not release session|left to failover/);
  }, 60_000);
});
