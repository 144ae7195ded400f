/**
 * The failover policy `resume`'s attempts (README "Cluster", docs/architecture.md §9c "Moving a
 * lease"), on cluster nodes in one process against a real private Redis: a run whose holders
 * keep dying is resumed under its id, attempt after attempt, each from the last recorded safe
 * point and each announced by `run.resumed {attempt}`, until `maxAttempts`; then it is marked
 * FAILED `owner_lost` with its attempts. A pending cancel still wins, and a session with
 * `failover: 'mark'` (the default) marks at once.
 */
import { describe, expect, it } from 'vitest';
import { maxResumeStateBytes } from '../../src/cluster/failover-resume.js';
import type { SessionKey } from '../../src/events/event-log.js';
import type { Agent } from '../../src/run/agent.js';
import { skipRedis } from '../redis/redis-server.js';
import { pollUntil, useCluster, type ClusterScene } from './cluster-helpers.js';
import {
  cancelCommand,
  createCommand,
  messageCommand,
  runIdOf,
  useClusterNodes,
  type ClusterNode,
} from './cluster-nodes.js';

const key: SessionKey = { ownerId: 'alice', sessionId: 's1' };
const ttlMs = 60_000; // leases expire only when the test makes them

/** The session's Stream as `[type, runId, payload]`. */
async function logOf(scene: ClusterScene) {
  const entries = (await scene.admin.xrange(scene.keys.events, '-', '+')) as Array<
    [string, string[]]
  >;
  return entries.map(([, fields]) => {
    const event = JSON.parse(fields[1]!) as {
      type: string;
      runId?: string;
      payload?: Record<string, unknown>;
    };
    return { type: event.type, runId: event.runId, payload: event.payload ?? {} };
  });
}

/** Kills `node` (its lease is left to expire, as after `kill -9`) and expires the lease now. */
async function kill(scene: ClusterScene, node: ClusterNode) {
  await node.cluster.flushed(key).catch(() => undefined);
  await node.die();
  await scene.admin.pexpire(scene.keys.lease, 1);
  await pollUntil(
    async () => (await scene.admin.exists(scene.keys.lease)) === 0,
    'the lease to expire',
  );
}

/**
 * Kills `a` mid-run, sends the next message to `b`: the run of `a` is marked FAILED `owner_lost`
 * (never resumed) and `b` runs only the new message.
 */
async function expectMarkedAfterLoss(
  scene: ClusterScene,
  a: ClusterNode,
  b: ClusterNode,
  runId: string,
) {
  await kill(scene, a);
  await b.access.execute(messageCommand(key, 'm1'));
  await b.cluster.flushed(key);
  const own = (await logOf(scene)).filter((e) => e.runId === runId);
  expect(own.some((e) => e.type === 'run.resumed')).toBe(false);
  expect(own.find((e) => e.type === 'run.failed')?.payload).toMatchObject({
    cause: 'owner_lost',
  });
  expect(b.started).toEqual(['m1']);
}

/** Waits until Redis holds a recorded safe point of `runId` whose state names `text`. */
const safePointRecorded = (scene: ClusterScene, runId: string, step: number) =>
  pollUntil(async () => {
    const json = await scene.admin.hget(scene.keys.run(runId), 'resumeState');
    const value = json === null ? null : (JSON.parse(json) as { state: { step: number } } | null);
    return value?.state.step === step;
  }, `a safe point of ${runId} at step ${step}`);

describe.skipIf(skipRedis)('failover resume: attempts (cluster nodes, real Redis)', () => {
  const cluster = useCluster();
  const makeNode = useClusterNodes();

  const nodesOf = (scene: ClusterScene, names: string[], failoverMaxAttempts?: number) =>
    names.map((name) =>
      makeNode(scene, name, {
        failover: 'resume',
        ...(failoverMaxAttempts === undefined ? {} : { failoverMaxAttempts }),
        instance: { leaseTtlMs: ttlMs },
      }),
    );

  it('a run whose holders keep dying is resumed under its id until maxAttempts (3), then FAILED owner_lost with its attempts', async () => {
    const scene = cluster.scene(key);
    const nodes = nodesOf(scene, ['A', 'B', 'C', 'D']);
    const [a, b, c, d] = nodes as [ClusterNode, ClusterNode, ClusterNode, ClusterNode];
    await Promise.all(nodes.map((n) => n.access.ready));
    await a.access.execute(createCommand(key, 'resume'));
    const runId = runIdOf(await a.access.execute(messageCommand(key, 'm0')));
    await safePointRecorded(scene, runId, 1);

    // Each next holder takes the session with a message: the lost run resumes first.
    await kill(scene, a);
    await b.access.execute(messageCommand(key, 'm1'));
    expect(b.started).toEqual(['resume:m0:1']);
    await safePointRecorded(scene, runId, 2);
    await kill(scene, b);
    await c.access.execute(messageCommand(key, 'm2'));
    expect(c.started).toEqual(['resume:m0:2']);
    await safePointRecorded(scene, runId, 3);
    await kill(scene, c);
    await d.access.execute(messageCommand(key, 'm3'));
    await d.cluster.flushed(key);

    const log = await logOf(scene);
    const own = log.filter((e) => e.runId === runId);
    expect(own.filter((e) => e.type === 'run.resumed').map((e) => e.payload.attempt)).toEqual([
      2, 3,
    ]);
    expect(own.find((e) => e.type === 'run.failed')?.payload).toMatchObject({
      cause: 'owner_lost',
      attempts: 3,
    });
    // One path through the run machine, whatever the attempts: no second start.
    expect(own.filter((e) => e.type === 'run.status').map((e) => e.payload.to)).toEqual([
      'QUEUED',
      'RUNNING',
      'FAILED',
    ]);
    // D did not start it again; the first message queued on B runs there now.
    expect(d.started).toEqual(['m1']);
    expect(JSON.parse((await scene.admin.hget(scene.keys.run(runId), 'attempt')) ?? '0')).toBe(3);
  });

  it('a pending cancel wins over resume (CANCELLED), and a mark session marks at once', async () => {
    const scene = cluster.scene(key);
    const nodes = nodesOf(scene, ['A', 'B']);
    const [a, b] = nodes as [ClusterNode, ClusterNode];
    await Promise.all(nodes.map((n) => n.access.ready));
    await a.access.execute(createCommand(key, 'resume'));
    const runId = runIdOf(await a.access.execute(messageCommand(key, 'm0')));
    await safePointRecorded(scene, runId, 1);
    // A cancel accepted but not yet applied by the run: recorded on the run, then A dies.
    await scene.admin.hset(
      scene.keys.run(runId),
      'cancelRequest',
      JSON.stringify({ reason: 'stop', at: 1 }),
    );
    await kill(scene, a);
    await b.access.execute(messageCommand(key, 'm1'));
    await b.cluster.flushed(key);
    const own = (await logOf(scene)).filter((e) => e.runId === runId);
    expect(own.some((e) => e.type === 'run.resumed')).toBe(false);
    expect(own.find((e) => e.type === 'run.cancelled')?.payload).toMatchObject({
      reason: 'stop',
      owner_lost: true,
    });
    expect(b.started).toEqual(['m1']);
  });

  it('with failover mark (the default) the run is marked at once, its safe point unrecorded', async () => {
    const scene = cluster.scene(key);
    const nodes = nodesOf(scene, ['A', 'B']);
    const [a, b] = nodes as [ClusterNode, ClusterNode];
    await Promise.all(nodes.map((n) => n.access.ready));
    await a.access.execute(createCommand(key));
    const runId = runIdOf(await a.access.execute(messageCommand(key, 'm0')));
    await a.cluster.flushed(key);
    expect(await scene.admin.hget(scene.keys.run(runId), 'resumeState')).toBeNull();
    await kill(scene, a);
    const answer = await b.access.execute(cancelCommand(key, runId));
    expect(answer.results[0]).toMatchObject({ result: 'ended' });
    const own = (await logOf(scene)).filter((e) => e.runId === runId);
    expect(own.find((e) => e.type === 'run.failed')?.payload).toEqual({
      error: expect.any(String) as string,
      cause: 'owner_lost',
    });
    expect(b.started).toEqual([]);
  });

  it('a safe-point state over the cap (256 KiB) clears the recorded one: the run is marked, and the log says so once', async () => {
    const scene = cluster.scene(key);
    const lines: string[] = [];
    let bigReported = () => undefined as void;
    const reported = new Promise<void>((resolve) => (bigReported = resolve));
    // A small state, then two over the cap, then it waits until cancelled.
    const agent: Agent<string, unknown> = {
      execute: (_input, ctx) =>
        new Promise((_resolve, reject) => {
          ctx.safePoint('afterChatModel', { step: 1, text: 'small' });
          const big = { step: 2, text: 'x'.repeat(maxResumeStateBytes) };
          ctx.safePoint('afterChatModel', big);
          ctx.safePoint('afterToolCalls', { ...big, step: 3 });
          bigReported();
          ctx.signal.addEventListener('abort', () => reject(new Error('cancelled')), {
            once: true,
          });
        }),
    };
    const a = makeNode(scene, 'A', {
      failover: 'resume',
      agent,
      log: (line) => lines.push(line),
      instance: { leaseTtlMs: ttlMs },
    });
    const b = makeNode(scene, 'B', { failover: 'resume', instance: { leaseTtlMs: ttlMs } });
    await Promise.all([a.access.ready, b.access.ready]);
    await a.access.execute(createCommand(key, 'resume'));
    const runId = runIdOf(await a.access.execute(messageCommand(key, 'm0')));
    await reported;
    await a.cluster.flushed(key);
    expect(await scene.admin.hget(scene.keys.run(runId), 'resumeState')).toBe('null');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(`run ${runId}: its safe-point state is \\d+ bytes, over the 262144-byte cap`),
    );
    await expectMarkedAfterLoss(scene, a, b, runId);
  });

  it('a run lost after it saved its turn to the history is marked, not redone (its state was cleared first)', async () => {
    const scene = cluster.scene(key);
    let saved = () => undefined as void;
    const historySaved = new Promise<void>((resolve) => (saved = resolve));
    // Reaches a safe point, saves its turn (as the ReAct agent does at its end), then is lost
    // before its terminal events.
    const agent: Agent<string, unknown> = {
      execute: async (input, ctx) => {
        ctx.safePoint('afterChatModel', { step: 1, text: input });
        await ctx.history.append([
          { role: 'user', content: input },
          { role: 'assistant', id: 'm1', content: 'done' },
        ]);
        saved();
        return new Promise((_resolve, reject) =>
          ctx.signal.addEventListener('abort', () => reject(new Error('cancelled')), {
            once: true,
          }),
        );
      },
    };
    const a = makeNode(scene, 'A', { failover: 'resume', agent, instance: { leaseTtlMs: ttlMs } });
    const b = makeNode(scene, 'B', { failover: 'resume', instance: { leaseTtlMs: ttlMs } });
    await Promise.all([a.access.ready, b.access.ready]);
    await a.access.execute(createCommand(key, 'resume'));
    const runId = runIdOf(await a.access.execute(messageCommand(key, 'm0')));
    await historySaved;
    await a.cluster.flushed(key);
    expect(await scene.admin.hget(scene.keys.run(runId), 'resumeState')).toBe('null');
    await expectMarkedAfterLoss(scene, a, b, runId);
  });
});
