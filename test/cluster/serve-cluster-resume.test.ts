/**
 * The failover policy `resume` with real `runplane serve --redis` processes (README "Cluster",
 * docs/architecture.md §9c "Moving a lease"): a session created with `failover: 'resume'`,
 * its holder killed (`kill -9`) or drained (SIGTERM) mid-reply. Another instance logs
 * `run.resumed {attempt: 2}`, the run completes under the same run id, the client following
 * on a third instance sees every `seq` once and in order, and the history holds the user's
 * message once, the cut reply, and the rest. Every wait polls Redis, the log or the stream.
 */
import { describe, expect, it } from 'vitest';
import { skipRedis } from '../redis/redis-server.js';
import {
  checkStream,
  createSession,
  sendMessages,
  useServeCluster,
  waitFor,
  waitForLine,
  waitForRunEnd,
  type ServeCluster,
  type ServeNode,
} from './serve-cluster.js';
import type { Follower } from './sse-follower.js';

/** A long demo reply: several sentences, a safe point after each. */
const LONG = 'tell me about runplane';

async function threeNodes(world: ServeCluster) {
  const [a, b, c] = await world.ready(3);
  if (a === undefined || b === undefined || c === undefined) throw new Error('not started');
  return { a, b, c };
}

/** The run's recorded safe point in Redis, once its holder wrote one. */
const recordedSafePoint = (world: ServeCluster, sessionId: string, runId: string) =>
  waitFor(async () => {
    const json = await world.admin.hget(world.keys(sessionId).run(runId), 'resumeState');
    const value = json === null ? null : (JSON.parse(json) as { kind: string } | null);
    return value ?? undefined;
  }, `a safe point of ${runId} in Redis`);

/** A `resume` session on `holder` with one long run streaming there, followed on `watcher`. */
async function resumableRun(world: ServeCluster, holder: ServeNode, watcher: ServeNode) {
  const sessionId = await createSession(holder, { failover: 'resume' });
  // Read from Redis on an instance that does not hold the session.
  const view = await watcher.api('GET', `/api/sessions/${sessionId}`);
  expect(view.body).toMatchObject({ failover: 'resume' });
  const follower = await watcher.follow(sessionId, { after: 0 });
  const [sent] = await sendMessages(holder, sessionId, [LONG]);
  const runId = sent?.run_id ?? '';
  await recordedSafePoint(world, sessionId, runId);
  return { sessionId, follower, runId };
}

/**
 * What both tests check once the run has completed: one `run.resumed {attempt: 2}`, one
 * start and one end of the run in the log, the stream whole and seen once by the follower, the
 * record COMPLETED on every instance, and the history: the user's message once, the cut
 * reply (`stop: 'cancelled'`), then the rest.
 */
async function expectResumedRun(
  world: ServeCluster,
  readers: readonly ServeNode[],
  follower: Follower,
  sessionId: string,
  runId: string,
) {
  const end = await follower.until(
    (e) => e.type === 'run.completed' && e.run_id === runId,
    'the resumed run completing',
    world.leaseTtlMs + 30_000,
  );
  expect(await checkStream(world, sessionId)).toEqual([]);
  const stored = await world.storedEvents(sessionId);
  const own = stored.filter((e) => e.runId === runId);
  const resumed = own.filter((e) => e.type === 'run.resumed');
  expect(resumed.map((e) => e.payload.attempt)).toEqual([2]);
  expect(resumed[0]?.payload.safe_point).toBe('afterChatModel');
  // The log equals the state: one path CREATED → QUEUED → RUNNING → COMPLETED, one start.
  expect(
    own
      .filter((e) => e.type === 'run.status')
      .map((e) => `${String(e.payload.from)}>${String(e.payload.to)}`),
  ).toEqual(['CREATED>QUEUED', 'QUEUED>RUNNING', 'RUNNING>COMPLETED']);
  expect(own.filter((e) => e.type === 'session.run_started')).toHaveLength(1);
  expect(own.filter((e) => e.type === 'run.completed')).toHaveLength(1);
  expect(own.some((e) => e.type === 'run.failed' || e.type === 'run.cancelled')).toBe(false);
  // The follower saw every seq once, in order, up to the end.
  const seen = follower.events.filter((e) => e.seq <= end.seq).map((e) => e.seq);
  expect(seen).toEqual(stored.filter((e) => e.seq <= end.seq).map((e) => e.seq));
  const replies: unknown[] = [];
  for (const node of readers) {
    const ended = await waitForRunEnd(node, runId);
    expect(ended.status, `run ${runId} read on ${node.id}`).toBe('COMPLETED');
    replies.push(ended.outcome?.reply);
  }
  const history = (await world.admin.lrange(world.keys(sessionId).history, 0, -1)).map(
    (json) => JSON.parse(json) as { role: string; content: string; stop?: string },
  );
  expect(history.filter((m) => m.role === 'user').map((m) => m.content)).toEqual([LONG]);
  expect(history.map((m) => `${m.role}${m.stop === undefined ? '' : `:${m.stop}`}`)).toEqual([
    'user',
    'assistant:cancelled',
    'assistant',
  ]);
  // The cut reply and the rest make the whole reply, each word once.
  const [, cut, rest] = history;
  const whole = `${cut?.content ?? ''}${rest?.content ?? ''}`;
  expect(whole).toMatch(/^You said: "tell me about runplane"\. /);
  expect(whole).toMatch(/to see the tools at work\.$/);
  expect(whole.match(/You said/g)).toHaveLength(1);
  // One run, one reply: the run's outcome is the whole reply, read on every instance.
  expect(replies).toEqual(readers.map(() => whole));
  // The run's words logged up to `safe_point_seq` are the cut reply, so a reader that drops
  // those logged after it (the resumed attempt streams them again) reads the whole reply, each
  // word once (README "Cluster").
  const cutAt = resumed[0]?.payload.safe_point_seq as number;
  const resumedSeq = resumed[0]?.seq ?? 0;
  const words = (keep: (seq: number) => boolean) =>
    own
      .filter((e) => e.type === 'agent.message_delta' && keep(e.seq))
      .map((e) => String(e.payload.delta))
      .join('');
  expect(cutAt).toBeLessThan(resumedSeq);
  expect(words((seq) => seq <= cutAt)).toBe(cut?.content);
  expect(words((seq) => seq <= cutAt || seq > resumedSeq)).toBe(whole);
  return { resumedEvent: resumed[0]! };
}

describe.skipIf(skipRedis)('runplane serve --redis: failover resume', () => {
  const { cluster } = useServeCluster({ leaseTtlMs: 1_000, chunkDelayMs: 25, perFile: true });

  it('kill -9 of the holder mid-reply: another instance resumes the run (attempt 2) under its id, and it completes', async () => {
    const world = cluster();
    const { a, b, c } = await threeNodes(world);
    const { sessionId, follower, runId } = await resumableRun(world, a, c);
    expect((await world.lease(sessionId))?.instanceId).toBe(a.id);

    const killedAt = performance.now();
    await a.kill();
    const resumedSeen = await follower.until(
      (e) => e.type === 'run.resumed' && e.run_id === runId,
      'run.resumed elsewhere',
      world.leaseTtlMs + 15_000,
    );
    console.info(
      `kill -9 → run.resumed on the follower: ${Math.round(resumedSeen.arrivedAt - killedAt)} ms`,
    );
    expect(resumedSeen.payload).toMatchObject({ attempt: 2 });
    expect([b.id, c.id]).toContain((await world.lease(sessionId))?.instanceId);
    await expectResumedRun(world, [b, c], follower, sessionId, runId);
    follower.close();
  });

  it('SIGTERM (drain) of the holder mid-reply: the run is cut at a safe point and resumed elsewhere', async () => {
    const world = cluster();
    const { a, b, c } = await threeNodes(world);
    const { sessionId, follower, runId } = await resumableRun(world, a, c);
    expect((await world.lease(sessionId))?.instanceId).toBe(a.id);

    const signalledAt = performance.now();
    a.process.child.kill('SIGTERM');
    const resumedSeen = await follower.until(
      (e) => e.type === 'run.resumed' && e.run_id === runId,
      'run.resumed elsewhere',
      world.leaseTtlMs + 15_000,
    );
    console.info(
      `SIGTERM → run.resumed on the follower: ${Math.round(resumedSeen.arrivedAt - signalledAt)} ms`,
    );
    expect(resumedSeen.payload).toMatchObject({ attempt: 2 });
    expect((await a.process.exited).code).toBe(0);
    // The cut run's refused writes are not reported as errors: it was handed on.
    expect(a.process.errors()).toBe('');
    expect([b.id, c.id]).toContain((await world.lease(sessionId))?.instanceId);
    await expectResumedRun(world, [b, c], follower, sessionId, runId);
    follower.close();
  });

  it('SIGSTOP of the holder until another resumed the run, then SIGCONT: the old attempt writes nothing more', async () => {
    const world = cluster();
    const { a, b, c } = await threeNodes(world);
    const { sessionId, follower, runId } = await resumableRun(world, a, c);
    const before = (await world.lease(sessionId)) ?? { instanceId: '', fence: 0 };
    expect(before.instanceId).toBe(a.id);

    a.pause();
    await waitFor(async () => (a.state() === 'T' ? true : undefined), 'A stopped');
    // No request: the watch of B or C takes the session once A's lease has expired.
    const resumedSeen = await follower.until(
      (e) => e.type === 'run.resumed' && e.run_id === runId,
      'run.resumed elsewhere',
      world.leaseTtlMs + 15_000,
    );
    expect(resumedSeen.payload).toMatchObject({ attempt: 2 });
    const after = (await world.lease(sessionId)) ?? { instanceId: '', fence: 0 };
    expect(after.fence).toBeGreaterThan(before.fence);
    expect([b.id, c.id]).toContain(after.instanceId);

    // A wakes with its timers overdue (its agent's next word, its renew): it gives the session up.
    a.resume();
    await waitForLine(a, new RegExp(`lost session ${world.ownerId}/${sessionId} `));
    await expectResumedRun(world, [a, b, c], follower, sessionId, runId);
    // The old attempt's messages stop at the resume: nothing it streamed lands after it.
    const stored = await world.storedEvents(sessionId);
    const at = stored.findIndex((e) => e.type === 'run.resumed' && e.runId === runId);
    const oldMessages = new Set(
      stored
        .slice(0, at)
        .flatMap((e) => (e.type === 'agent.message_delta' ? [e.payload.message_id] : [])),
    );
    expect(oldMessages.size).toBeGreaterThan(0);
    expect(stored.slice(at).filter((e) => oldMessages.has(e.payload.message_id))).toEqual([]);
    expect(await world.lease(sessionId)).toMatchObject({ fence: after.fence });
    follower.close();
  });
});
