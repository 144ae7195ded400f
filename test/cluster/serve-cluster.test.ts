/**
 * `runplane serve --redis` as a cluster of real processes (docs/architecture.md §9c "Cluster on
 * Redis"): three instances over one private `redis-server`, a 1 s lease, the slow demo model.
 * A run started on one instance is followed on another and cancelled from a third; a stream
 * resumed elsewhere with `Last-Event-ID` gets exactly the rest; and the holder of a session is
 * killed, frozen or cut off Redis mid-run: another instance takes the lease with a newer fence
 * (read from Redis), ends the run FAILED `owner_lost`, runs the queue, and nothing the old holder
 * does afterwards reaches the log.
 */
import { describe, expect, it } from 'vitest';
import { skipRedis } from '../redis/redis-server.js';
import { client } from '../server/process-helpers.js';
import {
  checkStream,
  createSession,
  interruptRun,
  sendMessages,
  useServeCluster,
  waitFor,
  waitForLine,
  waitForRunEnd,
  type ServeCluster,
  type ServeNode,
  type StoredEvent,
} from './serve-cluster.js';

/** A long demo reply: about 90 words at the cluster's pace per word. */
const LONG = 'tell me about runplane';
/** A short run: the calculator, then one sentence. */
const SHORT = 'what is 2 + 3?';

const isTerminal = (event: { type: string }) =>
  event.type === 'run.completed' || event.type === 'run.failed' || event.type === 'run.cancelled';

/** The stored events of `runId` after its first terminal event (none: nothing late). */
const eventsAfterEnd = (events: readonly StoredEvent[], runId: string): StoredEvent[] => {
  const own = events.filter((e) => e.runId === runId);
  const end = own.findIndex(isTerminal);
  return end < 0 ? [] : own.slice(end + 1);
};

/** Three working instances of the file's cluster (each reaches Redis through its own proxy). */
async function threeNodes(world: ServeCluster) {
  const [a, b, c] = await world.ready(3);
  if (a === undefined || b === undefined || c === undefined) throw new Error('not started');
  return { a, b, c };
}

/** A session created on `holder` with one long run streaming there, followed on `watcher`. */
async function streamingRun(holder: ServeNode, watcher: ServeNode, texts = [LONG]) {
  const sessionId = await createSession(holder);
  const follower = await watcher.follow(sessionId, { after: 0 });
  const results = await sendMessages(holder, sessionId, texts);
  const runIds = results.map((r) => r.run_id);
  const runId = runIds[0] ?? '';
  await follower.until(
    (e) => e.type === 'agent.message_delta' && e.run_id === runId,
    `a delta of ${runId}`,
  );
  return { sessionId, follower, runIds, runId };
}

/** Waits until Redis shows a holder other than `old.instanceId` with a fence above `old.fence`. */
const newerLease = (world: ServeCluster, sessionId: string, old: { fence: number }) =>
  waitFor(async () => {
    const lease = await world.lease(sessionId);
    return lease !== undefined && lease.fence > old.fence ? lease : undefined;
  }, `a fence above ${old.fence} on session ${sessionId}`);

/**
 * What every failover test checks once the old holder is back (or gone): the Stream is whole,
 * the old run ended FAILED `owner_lost` as every instance reads it, and the old run logged
 * nothing after its end.
 */
async function expectCleanTakeover(
  world: ServeCluster,
  readers: readonly ServeNode[],
  sessionId: string,
  runId: string,
) {
  expect(await checkStream(world, sessionId)).toEqual([]);
  const stored = await world.storedEvents(sessionId);
  expect(eventsAfterEnd(stored, runId)).toEqual([]);
  expect(stored.find((e) => e.runId === runId && e.type === 'run.failed')?.payload).toMatchObject({
    cause: 'owner_lost',
  });
  for (const node of readers) {
    const record = await node.api('GET', `/api/runs/${runId}`);
    expect(record.body, `run ${runId} read on ${node.id}`).toMatchObject({
      status: 'FAILED',
      outcome: { status: 'FAILED', cause: 'owner_lost' },
    });
  }
}

/**
 * The old holder `readers[0]` back after a pause or a cut: it says it lost the session, a
 * message sent to it is routed to the new holder and runs, the lease stays the new holder's
 * (`after`), and the takeover is clean.
 */
async function expectLossThenRouting(
  world: ServeCluster,
  readers: readonly [ServeNode, ...ServeNode[]],
  sessionId: string,
  runId: string,
  after: { instanceId: string; fence: number },
) {
  const [old] = readers;
  await waitForLine(old, new RegExp(`lost session ${world.ownerId}/${sessionId} `));
  const [late] = await sendMessages(old, sessionId, ['what is 1 + 1?']);
  expect(late?.result).toBe('accepted');
  expect((await waitForRunEnd(old, late?.run_id ?? '')).status).toBe('COMPLETED');
  expect(await world.lease(sessionId)).toMatchObject({
    instanceId: after.instanceId,
    fence: after.fence,
  });
  await expectCleanTakeover(world, readers, sessionId, runId);
}

describe.skipIf(skipRedis)('runplane serve --redis: three instances', () => {
  const { cluster } = useServeCluster({ leaseTtlMs: 1_000, chunkDelayMs: 25, perFile: true });

  it('a run posted on A, followed on C, is cancelled from B: accepted, only that run ends', async () => {
    const world = cluster();
    const { a, b, c } = await threeNodes(world);
    expect(a.process.output()).toContain(
      `runplane serve: cluster instance ${a.id} on redis://127.0.0.1:${a.proxy?.port}/0 (lease ttl 1000 ms)`,
    );
    const { sessionId, follower, runIds } = await streamingRun(a, c, [LONG, SHORT]);
    const [running = '', queued = ''] = runIds;
    const lease = await world.lease(sessionId);
    expect(lease?.instanceId).toBe(a.id);

    expect(await interruptRun(b, sessionId, running)).toMatchObject({
      status: 200,
      result: 'accepted',
    });
    const cancelled = await follower.until(
      (e) => e.type === 'run.cancelled' && e.run_id === running,
      'the cancel on C',
    );
    expect(cancelled.payload).toMatchObject({ initiator: 'user' });
    // The queued run is not touched: it starts and completes on the holder.
    await follower.until((e) => e.type === 'run.completed' && e.run_id === queued, 'the next run');
    expect((await waitForRunEnd(c, running)).status).toBe('CANCELLED');
    expect(await waitForRunEnd(b, queued)).toMatchObject({
      status: 'COMPLETED',
      outcome: { reply: '2 + 3 = 5.' },
    });
    // A stale cancel from a third instance finds the run over and touches nothing.
    expect(await interruptRun(c, sessionId, running)).toMatchObject({ result: 'ended' });
    expect(await interruptRun(a, sessionId, queued)).toMatchObject({ result: 'ended' });

    expect(await checkStream(world, sessionId)).toEqual([]);
    const stored = await world.storedEvents(sessionId);
    expect(eventsAfterEnd(stored, running)).toEqual([]);
    expect(stored.filter((e) => e.type === 'run.cancelled').map((e) => e.runId)).toEqual([running]);
    // What C streamed is the log, in order, from 1.
    expect(follower.events.map((e) => e.seq)).toEqual(
      stored.slice(0, follower.events.length).map((e) => e.seq),
    );
    expect(follower.events.map((e) => e.seq)[0]).toBe(1);
    // Nothing moved: the holder is still A, on its first fence.
    expect(await world.lease(sessionId)).toMatchObject({ instanceId: a.id, fence: lease?.fence });
    follower.close();
  });

  it('a stream resumed on another instance with Last-Event-ID gets exactly the rest', async () => {
    const world = cluster();
    const { a, b, c } = await threeNodes(world);
    const { sessionId, follower, runId } = await streamingRun(a, b);
    await follower.until(
      (e) => e.type === 'agent.message_delta' && e.seq >= 12,
      'a dozen events on B',
    );
    follower.close();
    const lastEventId = follower.lastEventId() ?? '';
    const firstPart = follower.events.map((e) => e.seq);
    // Resumed on C mid-run: the rest is still being written while it is read.
    const resumed = await c.follow(sessionId, { lastEventId });
    const end = await resumed.until(
      (e) => e.type === 'run.completed' && e.run_id === runId,
      'the end on C',
    );
    const page = await a.api('GET', `/api/sessions/${sessionId}/events?limit=1000`);
    const logged = (page.body.events as Array<{ seq: number; id: string }>).filter(
      (e) => e.seq <= end.seq,
    );
    const seen = [...follower.events, ...resumed.events].filter((e) => e.seq <= end.seq);
    expect(resumed.events[0]?.seq).toBe(Number(lastEventId) + 1);
    expect(seen.map((e) => [e.seq, e.id])).toEqual(logged.map((e) => [e.seq, e.id]));
    expect(firstPart.at(-1)).toBe(Number(lastEventId));
    resumed.close();
  });

  it('kill -9 of the holder mid-run: another instance ends the run FAILED owner_lost within TTL + 5 s, and the queued run runs', async () => {
    const world = cluster();
    const { a, b, c } = await threeNodes(world);
    const { sessionId, follower, runIds } = await streamingRun(a, c, [LONG, SHORT]);
    const [running = '', queued = ''] = runIds;
    const before = await world.lease(sessionId);
    expect(before?.instanceId).toBe(a.id);

    const killedAt = performance.now();
    await a.kill();
    // Nothing but reads touches the session from here: the takeover is the instances' own.
    const failed = await follower.until(
      (e) => e.type === 'run.failed' && e.run_id === running,
      'the run marked elsewhere',
      world.leaseTtlMs + 15_000,
    );
    const failoverMs = failed.arrivedAt - killedAt;
    expect(failed.payload).toMatchObject({ cause: 'owner_lost' });
    expect(failoverMs).toBeLessThanOrEqual(world.leaseTtlMs + 5_000);
    const after = await newerLease(world, sessionId, before ?? { fence: 0 });
    expect([b.id, c.id]).toContain(after.instanceId);

    await follower.until(
      (e) => e.type === 'run.completed' && e.run_id === queued,
      'the queued run',
    );
    expect(await waitForRunEnd(b, queued)).toMatchObject({
      status: 'COMPLETED',
      outcome: { reply: '2 + 3 = 5.' },
    });
    await expectCleanTakeover(world, [b, c], sessionId, running);
    follower.close();
  });

  it('SIGSTOP of the holder until Redis shows a newer fence, then SIGCONT: its late writes are refused', async () => {
    const world = cluster();
    const { a, b, c } = await threeNodes(world);
    const { sessionId, follower, runId } = await streamingRun(a, c);
    const before = (await world.lease(sessionId)) ?? { instanceId: '', fence: 0 };
    expect(before.instanceId).toBe(a.id);

    a.pause();
    await waitFor(async () => (a.state() === 'T' ? true : undefined), 'A stopped');
    // A message on B: B's command waits for the holder, which is frozen, then takes the lease.
    const sent = sendMessages(b, sessionId, [SHORT]);
    const after = await newerLease(world, sessionId, before);
    expect(after.instanceId).not.toBe(a.id);
    const [next] = await sent;
    expect(next?.result).toBe('accepted');
    await follower.until((e) => e.type === 'run.failed' && e.run_id === runId, 'the run marked');
    await follower.until(
      (e) => e.type === 'run.completed' && e.run_id === next?.run_id,
      'the message sent on B',
    );

    a.resume();
    // A wakes with its timers overdue (the agent's next word, the renew) and gives the session up.
    await expectLossThenRouting(world, [a, b, c], sessionId, runId, after);
    follower.close();
  });

  it('the holder cut off Redis by a proxy: another takes over, and what the proxy held back is refused at heal', async () => {
    const world = cluster();
    const { a, b, c } = await threeNodes(world);
    const { sessionId, follower, runId } = await streamingRun(a, c);
    const before = (await world.lease(sessionId)) ?? { instanceId: '', fence: 0 };
    expect(before.instanceId).toBe(a.id);

    a.proxy?.blackhole();
    const sent = sendMessages(b, sessionId, [SHORT]);
    const after = await newerLease(world, sessionId, before);
    expect(after.instanceId).not.toBe(a.id);
    const [next] = await sent;
    await follower.until((e) => e.type === 'run.failed' && e.run_id === runId, 'the run marked');
    await follower.until(
      (e) => e.type === 'run.completed' && e.run_id === next?.run_id,
      'the message sent on B',
    );

    // Healed, A's held renews and batches reach Redis late, and a message sent to A is routed
    // to the new holder.
    a.proxy?.heal();
    await expectLossThenRouting(world, [a, b, c], sessionId, runId, after);
    follower.close();
  });

  it('without --tokens, every instance serves the one dev token it finds in Redis', async () => {
    const world = cluster();
    const [d1, d2] = await Promise.all([
      world.start({ id: 'dev-1', tokens: false }),
      world.start({ id: 'dev-2', tokens: false }),
    ]);
    const tokenOf = (node: ServeNode) =>
      /dev token \(owner "dev"\): (\S+)/.exec(node.process.output())?.[1];
    const token = tokenOf(d1);
    expect(token).toMatch(/^rp_dev_/);
    expect(tokenOf(d2)).toBe(token);
    const created = await client(d1.url, token ?? '')('POST', '/api/sessions', {});
    expect(created.status).toBe(201);
    const read = await client(d2.url, token ?? '')(
      'GET',
      `/api/sessions/${created.body.session_id as string}`,
    );
    expect(read).toMatchObject({ status: 200, body: { session_id: created.body.session_id } });
    await Promise.all([d1.kill(), d2.kill()]);
  });
});
