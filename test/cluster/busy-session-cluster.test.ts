/**
 * The busy-session rule across instances: every row of the one table (`busy-session-table.ts`,
 * which the session machine passes on one runtime) runs against a cluster of three instances in
 * one process on a private real Redis. A holds the session (its runs `a` and `q` were sent
 * there), the new run `n` is sent on B, and what happened is read on C, from Redis: one rule,
 * decided once, by the holder's session machine (docs/architecture.md, "Cluster on Redis").
 */
import { describe, expect, it } from 'vitest';
import type { SessionKey } from '../../src/events/event-log.js';
import { toHttpError } from '../../src/server/http-error.js';
import type { SessionStrategy } from '../../src/server/schemas.js';
import { createScriptedAgent } from '../../src/testing/index.js';
import { skipRedis } from '../redis/redis-server.js';
import { busySessionTable } from '../session/busy-session-table.js';
import { pollUntil, useCluster } from './cluster-helpers.js';
import { createCommand, runIdOf, useClusterNodes, type ClusterNode } from './cluster-nodes.js';

const key: SessionKey = { ownerId: 'alice', sessionId: 's' };
const other: SessionKey = { ownerId: 'alice', sessionId: 'other' };

describe.skipIf(skipRedis)('the busy-session rule, one table, across instances', () => {
  const cluster = useCluster();
  const node = useClusterNodes();

  for (const row of busySessionTable) {
    it(`${row.before} + ${row.strategy} sent on another instance: new run ${row.newRun}, line [${row.queue.join(', ')}]`, async () => {
      const scene = cluster.scene(key);
      const agent = createScriptedAgent<string>();
      const a = node(scene, 'A', {
        agent,
        maxConcurrentRuns: row.before === 'waiting for a slot' ? 1 : undefined,
      });
      const b = node(scene, 'B');
      const c = node(scene, 'C');
      /** Run id → the row's name of the run. */
      const names = new Map<string, string>();
      const ids = new Map<string, string>();
      const send = async (via: ClusterNode, name: string, strategy: SessionStrategy, at = key) => {
        const answer = (await via.access.execute({
          type: 'session.apply_events',
          ...at,
          events: [{ type: 'user.message', payload: { text: name, strategy } }],
        })) as { results: Array<Record<string, unknown>> };
        names.set(runIdOf(answer), name);
        ids.set(name, runIdOf(answer));
        return answer;
      };
      await a.access.execute(createCommand(key));
      if (row.before === 'waiting for a slot') {
        await a.access.execute(createCommand(other));
        await send(a, 'holder', 'enqueue', other);
      }
      if (row.before === 'active') await send(a, 'a', 'enqueue');
      if (row.before !== 'idle') await send(a, 'q', 'enqueue');
      expect(a.cluster.fenceOf(key)).toBeDefined(); // A holds the session; B and C do not
      expect(b.cluster.fenceOf(key)).toBeUndefined();

      let refused: unknown;
      let answer: { results: Array<Record<string, unknown>> } | undefined;
      try {
        answer = await send(b, 'n', row.strategy);
      } catch (error) {
        refused = error;
      }
      if (row.newRun === 'refused') {
        expect(toHttpError(refused)).toMatchObject({ code: 'session_busy', status: 409 });
      } else {
        expect(refused).toBeUndefined();
        expect(answer?.results[0]).toMatchObject({ result: 'accepted', status: row.newRun });
      }

      // The line as C reads it from Redis (the holder's live state), in the machine's order.
      const record = await c.access.findSession(key.ownerId, key.sessionId);
      const line = async () =>
        (await c.access.viewSession(record!)).queued_run_ids.map((id) => names.get(id));
      await pollUntil(
        async () => JSON.stringify(await line()) === JSON.stringify(row.queue),
        `line [${row.queue.join(', ')}] on C`,
      );

      const statusOnC = async (name: string) =>
        (await c.access.getRun(key.ownerId, ids.get(name)!))?.status;
      if (row.active !== undefined) {
        const ctx = agent.context(ids.get('a')!);
        expect(await statusOnC('a')).toBe('RUNNING');
        expect(ctx?.interruptRequested).toBe(row.active === 'interrupted');
        if (row.active === 'cancelling at a safe point') {
          agent.safePoint(ids.get('a')!, 'afterToolCalls');
          await pollUntil(async () => (await statusOnC('a')) === 'CANCELLED', 'a cancelled');
          const ended = await c.access.getRun(key.ownerId, ids.get('a')!);
          expect(ended?.outcome).toMatchObject({ status: 'CANCELLED', cause: 'preempt' });
        } else {
          expect(ctx?.signal.aborted).toBe(false);
        }
      }
      if (row.queued === 'waits') expect(await statusOnC('q')).toBe('QUEUED');
      if (row.queued === 'cancelled (preempt)') {
        await pollUntil(async () => (await statusOnC('q')) === 'CANCELLED', 'q cancelled');
        const ended = await c.access.getRun(key.ownerId, ids.get('q')!);
        expect(ended?.outcome).toMatchObject({ status: 'CANCELLED', cause: 'preempt' });
      }
    });
  }
});
