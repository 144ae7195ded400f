/**
 * `runplane serve --redis` with Redis out of reach (README "Cluster"): a request that needs
 * Redis answers 503 `store_unavailable` with `Retry-After` (it was 500 `internal`), `/healthz`
 * says so, and the instance recovers by itself once Redis answers again. A real serve process
 * reaches a real private Redis through the in-test TCP proxy, which the test cuts and heals;
 * every wait polls the instance over HTTP.
 */
import { describe, expect, it } from 'vitest';
import { skipRedis } from '../redis/redis-server.js';
import { createSession, useServeCluster, waitFor, type ServeNode } from './serve-cluster.js';

/** One request with the cluster's token: status, `Retry-After` and the JSON body. */
async function request(world: { token: string }, node: ServeNode, path: string, body?: unknown) {
  const response = await fetch(`${node.url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${world.token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    body: (await response.json()) as Record<string, unknown>,
  };
}

const unavailable = {
  status: 503,
  retryAfter: '2',
  body: { error: { code: 'store_unavailable', message: expect.any(String) as unknown } },
};

describe.skipIf(skipRedis)('runplane serve --redis with Redis out of reach', () => {
  const { cluster } = useServeCluster();

  it('answers 503 store_unavailable with Retry-After while Redis refuses, says so on /healthz, and recovers', async () => {
    const world = cluster();
    const node = await world.start({ id: 'a', viaProxy: true });
    const sessionId = await createSession(node);
    expect(await request(world, node, '/healthz')).toMatchObject({ status: 200 });
    const message = { events: [{ type: 'user.message', payload: { text: 'what is 2 + 3?' } }] };

    node.proxy!.reset(); // connections reset, new ones refused: Redis is down for this instance
    // A read of the session needs Redis; the first may still ride the old connection.
    const refused = await waitFor(async () => {
      const read = await request(world, node, `/api/sessions/${sessionId}`);
      return read.status === 200 ? undefined : read;
    }, 'a read refused');
    expect(refused).toMatchObject(unavailable);
    expect(await request(world, node, '/api/sessions', {})).toMatchObject(unavailable);
    expect(await request(world, node, `/api/sessions/${sessionId}/events`, message)).toMatchObject(
      unavailable,
    );
    expect(await request(world, node, '/healthz')).toMatchObject({
      ...unavailable,
      body: { status: 'store_unavailable', error: { code: 'store_unavailable' } },
    });
    expect(node.process.child.exitCode).toBeNull(); // no crash

    node.proxy!.heal();
    await waitFor(
      async () => ((await request(world, node, '/healthz')).status === 200 ? true : undefined),
      '/healthz ok again',
    );
    const sent = await waitFor(async () => {
      const answer = await request(world, node, `/api/sessions/${sessionId}/events`, message);
      return answer.status === 200 ? answer : undefined;
    }, 'a message accepted again');
    expect(sent.body).toMatchObject({ results: [{ type: 'user.message', result: 'accepted' }] });
    expect(await request(world, node, '/api/sessions', {})).toMatchObject({ status: 201 });
  });

  it('says so on /healthz while Redis does not answer at all (a partition), and recovers', async () => {
    const world = cluster();
    const node = await world.start({ id: 'a', viaProxy: true });
    expect(await request(world, node, '/healthz')).toMatchObject({ status: 200 });
    node.proxy!.blackhole();
    expect(await request(world, node, '/healthz')).toMatchObject({
      ...unavailable,
      body: {
        status: 'store_unavailable',
        error: { code: 'store_unavailable', message: expect.stringContaining('PING') as unknown },
      },
    });
    node.proxy!.heal();
    await waitFor(
      async () => ((await request(world, node, '/healthz')).status === 200 ? true : undefined),
      '/healthz ok again',
    );
  });
});
