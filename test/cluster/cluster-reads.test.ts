/**
 * Reads from any instance (docs/architecture.md, "Cluster on Redis"): three instances in one
 * process, each with its own runtime, against one private real Redis. A session held by A is
 * read on B and C from Redis alone (records, the holder's live state, the event Stream, the
 * owner's idempotency keys), and every answer equals the holder's own.
 */
import { describe, expect, it } from 'vitest';
import { toDeletedSessionsKey } from '../../src/cluster/owner-keys.js';
import type { RunplaneEvent, SessionKey } from '../../src/events/event-log.js';
import { HttpError } from '../../src/server/http-error.js';
import { skipRedis } from '../redis/redis-server.js';
import { pollUntil, useCluster, type ClusterScene } from './cluster-helpers.js';
import {
  cancelCommand,
  createCommand,
  messageCommand,
  runIdOf,
  useClusterNodes,
  type ClusterNode,
  type NodeOptions,
} from './cluster-nodes.js';

const key: SessionKey = { ownerId: 'alice', sessionId: 's1' };

/** Every read of the session `node` answers, for comparison across instances. */
async function readsOn(node: ClusterNode, runIds: readonly string[], ownerId = 'alice') {
  const session = await node.access.findSession(ownerId, key.sessionId);
  return {
    session,
    list: await node.access.listSessions(ownerId, { limit: 10 }),
    view: session === undefined ? undefined : await node.access.viewSession(session),
    runs: await Promise.all(runIds.map((runId) => node.access.getRun(ownerId, runId))),
    lastSeq: await node.access.events.lastSeq({}, { ...key, ownerId }),
    events: await node.access.events.read({}, { ...key, ownerId }),
  };
}

/** Follows the session on `node` after `after` until it has seen `until`; then stops. */
async function followOn(node: ClusterNode, after: number, until: number) {
  const controller = new AbortController();
  const seen: RunplaneEvent[] = [];
  for await (const event of node.access.events.follow({ signal: controller.signal }, key, {
    after,
  })) {
    seen.push(event);
    if (event.seq >= until) controller.abort();
  }
  return seen;
}

describe.skipIf(skipRedis)('reads from any instance', () => {
  const cluster = useCluster();
  const node = useClusterNodes();
  const threeNodes = (scene: ClusterScene, options?: NodeOptions) =>
    ['A', 'B', 'C'].map((id) => node(scene, id, options)) as [
      ClusterNode,
      ClusterNode,
      ClusterNode,
    ];

  it('answers every read on B and C as the holder A does: session, list, view, runs, events', async () => {
    const scene = cluster.scene(key);
    const [a, b, c] = threeNodes(scene);
    await a.access.execute(createCommand(key));
    const first = runIdOf(await b.access.execute(messageCommand(key, 'ask:tu-1')));
    const second = runIdOf(await c.access.execute(messageCommand(key, 'second')));
    expect(b.cluster.fenceOf(key)).toBeUndefined();
    expect(c.cluster.fenceOf(key)).toBeUndefined();
    // The approval is asked once the agent runs on A: wait until B reads it from Redis.
    const pendingOnB = async () => {
      const session = await b.access.findSession('alice', 's1');
      return (await b.access.viewSession(session!)).pending_approvals.length === 1;
    };
    await pollUntil(pendingOnB, 'the approval in Redis');

    const onA = await readsOn(a, [first, second]);
    expect(onA.view).toMatchObject({
      status: 'running',
      active_run_id: first,
      queued_run_ids: [second],
      pending_approvals: [
        { tool_use_id: 'tu-1', name: 'clock', args: { tz: 'UTC' }, run_id: first },
      ],
      last_seq: onA.lastSeq,
    });
    expect(onA.runs.map((run) => run?.status)).toEqual(['RUNNING', 'QUEUED']);
    expect(onA.list.map((session) => session.sessionId)).toEqual(['s1']);
    expect(onA.events.at(-1)?.seq).toBe(onA.lastSeq);
    expect(await readsOn(b, [first, second])).toEqual(onA);
    expect(await readsOn(c, [first, second])).toEqual(onA);

    // Cancelled from C: the second run becomes active, the approval is withdrawn.
    const cancelled = await c.access.execute(cancelCommand(key, first));
    expect(cancelled.results[0]).toMatchObject({ result: 'accepted' });
    await pollUntil(
      async () => (await b.access.getRun('alice', first))?.status === 'CANCELLED',
      'the cancelled run in Redis',
    );
    const after = await readsOn(a, [first, second]);
    expect(after.view).toMatchObject({
      status: 'running',
      active_run_id: second,
      queued_run_ids: [],
      pending_approvals: [],
    });
    expect(after.runs.map((run) => run?.status)).toEqual(['CANCELLED', 'RUNNING']);
    expect(await readsOn(b, [first, second])).toEqual(after);
    expect(await readsOn(c, [first, second])).toEqual(after);
  });

  it('follows on C and resumes on B after the last seen event: no gap, no duplicate', async () => {
    const scene = cluster.scene(key);
    const [a, b, c] = threeNodes(scene);
    await a.access.execute(createCommand(key));
    await b.access.execute(messageCommand(key, 'm1'));
    const middle = await a.access.events.lastSeq({}, key);
    // C follows from the start, and stops (a client that disconnects) at `middle`.
    const head = await followOn(c, 0, middle);
    for (const event of head) {
      // Seen only once Redis held it.
      expect(event.seq).toBeLessThanOrEqual(Number(await scene.admin.get(scene.keys.seq)));
    }
    await c.access.execute(messageCommand(key, 'm2'));
    await b.access.execute(messageCommand(key, 'm3'));
    const end = await a.access.events.lastSeq({}, key);
    expect(end).toBeGreaterThan(middle);
    // Reconnects on B with Last-Event-ID = the last event C delivered.
    const tail = await followOn(b, head.at(-1)!.seq, end);
    const all = [...head, ...tail];
    expect(all.map((event) => event.seq)).toEqual(Array.from({ length: end }, (_, i) => i + 1));
    expect(all).toEqual(await a.access.events.read({}, key));
    expect(tail).toEqual(await c.access.events.read({}, key, { after: head.at(-1)!.seq }));
  });

  it('pages the owner list newest first, the same on every instance', async () => {
    const scene = cluster.scene(key);
    const nodes = threeNodes(scene);
    for (const [i, sender] of nodes.entries()) {
      await sender.access.execute(createCommand({ ownerId: 'alice', sessionId: `s${i + 1}` }));
      await sender.access.execute(createCommand({ ownerId: 'alice', sessionId: `t${i + 1}` }));
    }
    const records = await nodes[0].access.listSessions('alice', { limit: 100 });
    const expected = [...records].sort(
      (x, y) =>
        y.createdAt - x.createdAt ||
        (x.sessionId < y.sessionId ? 1 : x.sessionId > y.sessionId ? -1 : 0),
    );
    expect(records).toEqual(expected);
    expect(records.map((record) => record.sessionId).sort()).toEqual([
      's1',
      's2',
      's3',
      't1',
      't2',
      't3',
    ]);
    for (const reader of nodes) {
      const pages = [];
      let after: { createdAt: number; sessionId: string } | undefined;
      for (;;) {
        const page = await reader.access.listSessions('alice', { after, limit: 4 });
        pages.push(...page);
        if (page.length < 4) break;
        after = page.at(-1)!;
      }
      expect(pages).toEqual(records);
    }
  });

  it('finds a deleted session nowhere, and shows an unknown owner nothing', async () => {
    const scene = cluster.scene(key);
    const [a, b, c] = threeNodes(scene);
    await a.access.execute(createCommand(key));
    const runId = runIdOf(await b.access.execute(messageCommand(key, 'doomed')));
    const nothing = {
      session: undefined,
      list: [],
      view: undefined,
      runs: [undefined],
      lastSeq: 0,
      events: [],
    };
    for (const reader of [a, b, c]) {
      expect((await readsOn(reader, [runId])).runs[0]?.runId).toBe(runId);
      expect(await readsOn(reader, [runId], 'bob')).toEqual(nothing); // another owner: nothing
    }
    expect(await c.access.execute({ type: 'session.delete', ...key })).toBeNull();
    // Listed for the purge before the delete answered (no wait): any instance's sweep finds it.
    expect(await scene.admin.zrange(toDeletedSessionsKey(scene.keyPrefix), 0, -1)).toEqual([
      JSON.stringify([key.ownerId, key.sessionId]),
    ]);
    for (const reader of [a, b, c]) {
      const reads = await readsOn(reader, [runId]);
      expect(reads.session).toBeUndefined();
      expect(reads.list).toEqual([]);
      expect(reads.runs).toEqual([undefined]);
    }
  });

  it('shares idempotency keys: the same key sent to B and C answers the same', async () => {
    const scene = cluster.scene(key);
    const [b, c] = ['B', 'C'].map((id) => node(scene, id)) as [ClusterNode, ClusterNode];
    const request = {
      ownerId: 'alice',
      key: 'k1',
      fingerprint: 'POST /api/sessions {}',
      at: 1_000,
      ttlMs: 60_000,
      lockMs: 5_000,
      maxKeysPerOwner: 10,
    };
    expect(await b.access.idempotencyKeys.begin(request)).toEqual({ outcome: 'claimed' });
    expect(await c.access.idempotencyKeys.begin(request)).toEqual({
      outcome: 'in_progress',
      lockedUntil: 6_000,
    });
    const answer = { status: 201, body: '{"session_id":"s1"}', sessionId: 's1' };
    await b.access.idempotencyKeys.complete('alice', 'k1', answer);
    expect(await c.access.idempotencyKeys.begin(request)).toEqual({ outcome: 'answered', answer });
    expect(await b.access.idempotencyKeys.begin({ ...request, ownerId: 'bob' })).toEqual({
      outcome: 'claimed',
    });
    await c.access.idempotencyKeys.forgetSession('alice', 's1');
    expect(await b.access.idempotencyKeys.begin(request)).toEqual({ outcome: 'claimed' });
  });

  it('holds the per-owner session quota across instances, each create reserving its slot', async () => {
    const scene = cluster.scene(key);
    const quota = { access: { maxSessionsPerOwner: 2 } };
    const [a, b, c] = threeNodes(scene, quota);
    const create = (sender: ClusterNode, sessionId: string) =>
      sender.access.execute(createCommand({ ownerId: 'alice', sessionId })).then(
        () => 'created',
        (error: unknown) => (error instanceof HttpError ? error.toData().code : error),
      );
    expect(await create(a, 's1')).toBe('created');
    // Each instance holds one session at most: only Redis knows the owner has two.
    const racing = await Promise.all([create(b, 's2'), create(c, 's3')]);
    expect([...racing].sort()).toEqual(['created', 'too_many_sessions']);
    const winner = racing[0] === 'created' ? 's2' : 's3';
    expect(await create(a, 's4')).toBe('too_many_sessions');
    expect(
      await b.access.execute(createCommand({ ownerId: 'bob', sessionId: 's1' })),
    ).toMatchObject({ session_id: 's1' }); // another owner's quota
    await c.access.execute({ type: 'session.delete', ownerId: 'alice', sessionId: 's1' });
    expect(await create(c, winner)).toBe('internal'); // the id is taken: its slot goes back
    expect(await create(a, 's5')).toBe('created');
    expect(await create(b, 's6')).toBe('too_many_sessions');
    const listed = await c.access.listSessions('alice', { limit: 10 });
    expect(listed.map((session) => session.sessionId).sort()).toEqual([winner, 's5'].sort());
    expect(await scene.admin.hlen(`${scene.keyPrefix}{o:5:alice}:sessions-reserved`)).toBe(0);
  });

  it('reads a session on an instance that is still rebuilding it from Redis, not from its idle runtime', async () => {
    const scene = cluster.scene(key);
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const rebuilding: string[] = [];
    const a = node(scene, 'A', { instance: { leaseTtlMs: 60_000 } });
    const b = node(scene, 'B', {
      instance: { leaseTtlMs: 60_000 },
      access: {
        onAcquired: async (taken) => {
          rebuilding.push(taken.sessionId);
          await gate; // a rebuild that reads the records and the log before it requeues
        },
      },
    });
    await Promise.all([a.access.ready, b.access.ready]);
    await a.access.execute(createCommand(key));
    const active = runIdOf(await a.access.execute(messageCommand(key, 'one')));
    const queued = runIdOf(await a.access.execute(messageCommand(key, 'two')));
    await a.cluster.flushed(key);
    await a.die();
    await scene.admin.del(scene.keys.lease); // expired, as after kill -9
    const taking = b.access.hold(key);
    await pollUntil(() => Promise.resolve(rebuilding.length === 1), 'B rebuilding the session');
    expect(b.cluster.fenceOf(key)).toBeDefined(); // B holds the lease, its runtime is still idle
    const session = await b.access.findSession('alice', key.sessionId);
    // Before the fix: status idle, no run (B's own runtime answered as soon as it held the lease).
    expect(await b.access.viewSession(session!)).toMatchObject({
      status: 'running',
      active_run_id: active,
      queued_run_ids: [queued],
    });
    expect((await b.access.getRun('alice', queued))?.status).toBe('QUEUED');
    release();
    expect(await taking).toBe(true);
  });
});
