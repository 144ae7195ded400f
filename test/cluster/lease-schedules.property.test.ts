/**
 * A fast-check model of multi-instance schedules: three instances (leases, outboxes, shipper) in
 * one process against one real private Redis, two sessions, random steps: acquire, renew, a
 * pause that lets a lease expire (the holder keeps believing it holds), the holder's local
 * deadline, writes (also two instances at once) and release. After every step the real Redis is
 * compared with a small model written from docs/architecture.md, "Cluster on Redis":
 * - one writer per session: only the holder of the latest fence gets writes in;
 * - fences only grow, and the lease names the model's holder;
 * - stale writes are refused: the Stream is exactly the accepted writes, in order, ids 1…n with
 *   no gap, and the fences in it never go down;
 * - what each instance believes it holds is what the model says (a belief can be stale, never
 *   newer than Redis's fence).
 *
 * A lease's expiry is Redis's own: the step shortens its TTL to 1 ms and polls until the key is
 * gone, so a schedule costs round trips, not TTLs. Instance clocks are simulated: renews happen
 * when a step says so, and the deadline step moves one instance's clock past its TTL.
 */
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import type { ClusterInstance } from '../../src/cluster/cluster-instance.js';
import { toSessionKeys } from '../../src/cluster/keys.js';
import type { SessionKey } from '../../src/events/event-log.js';
import { skipRedis } from '../redis/redis-server.js';
import { pollUntil, useCluster } from './cluster-helpers.js';

const instanceCount = 3;
const sessions: SessionKey[] = [
  { ownerId: 'alice', sessionId: 's1' },
  { ownerId: 'bob', sessionId: 's1' },
];
const ttlMs = 60_000; // leases expire only when a step makes them

type Step =
  | { kind: 'acquire'; i: number; s: number }
  | { kind: 'renew'; i: number }
  | { kind: 'expire'; s: number }
  | { kind: 'deadline'; i: number }
  | { kind: 'write'; i: number; s: number; n: number }
  | { kind: 'writeBoth'; i: number; j: number; s: number }
  | { kind: 'release'; i: number; s: number };

const inst = fc.integer({ min: 0, max: instanceCount - 1 });
const sess = fc.integer({ min: 0, max: sessions.length - 1 });
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('acquire' as const), i: inst, s: sess }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('renew' as const), i: inst }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('expire' as const), s: sess }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('deadline' as const), i: inst }) },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('write' as const),
      i: inst,
      s: sess,
      n: fc.integer({ min: 1, max: 4 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('writeBoth' as const), i: inst, j: inst, s: sess }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('release' as const), i: inst, s: sess }) },
);

/** The model: what Redis must hold, and what each instance must believe. */
interface Model {
  /** Per session: the last fence granted. */
  fence: number[];
  /** Per session: the lease in Redis, as `<instance>:<fence>`, or null. */
  lease: Array<string | null>;
  /** Per session: the accepted writes in Stream order, as `<instance>:<fence>:<n>`. */
  accepted: string[][];
  /** Per instance, per session: the fence it believes it holds. */
  believes: Array<Array<number | undefined>>;
}

describe.skipIf(skipRedis)('multi-instance lease schedules (fast-check, real Redis)', () => {
  const cluster = useCluster();

  it('keeps one writer per session, growing fences, and a gap-free Stream of exactly the accepted writes', async () => {
    const admin = cluster.admin();
    const connections: Redis[] = Array.from({ length: instanceCount }, () => cluster.connect());
    let runs = 0;
    let steps = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 40 }), async (schedule) => {
        runs++;
        const keyPrefix = cluster.freshPrefix();
        const keys = sessions.map((key) => toSessionKeys(key, keyPrefix));
        const clocks = connections.map(() => new SimulatedClock());
        const instances: ClusterInstance[] = connections.map((redis, i) =>
          cluster.instance({
            redis,
            instanceId: `i${i}`,
            keyPrefix,
            leaseTtlMs: ttlMs,
            clock: clocks[i],
          }),
        );
        const model: Model = {
          fence: sessions.map(() => 0),
          lease: sessions.map(() => null),
          accepted: sessions.map(() => []),
          believes: instances.map(() => sessions.map(() => undefined)),
        };
        let tag = 0;

        /** Appends `n` events on instance i; resolves with whether Redis took them. */
        const write = async (
          i: number,
          s: number,
          n: number,
        ): Promise<'accepted' | 'refused' | 'not_held'> => {
          const instance = instances[i]!;
          const fence = instance.fenceOf(sessions[s]!);
          const tags: string[] = [];
          try {
            for (let k = 0; k < n; k++) {
              const w = `i${i}:${fence}:${++tag}`;
              instance.eventLog.append({}, sessions[s]!, { type: 'w', at: tag, payload: { w } });
              tags.push(w);
            }
          } catch (error) {
            expect(error).toMatchObject({ code: 'STALE_FENCE', reason: 'not_held' });
            return 'not_held';
          }
          try {
            await instance.flushed(sessions[s]!);
            return 'accepted';
          } catch (error) {
            expect(error).toMatchObject({ code: 'STALE_FENCE', reason: 'write_refused' });
            return 'refused';
          } finally {
            written.set(`${i}/${s}`, tags);
          }
        };
        const written = new Map<string, string[]>();
        /** The model's answer to a write by i on s: taken only from the lease holder. */
        const modelWrite = (i: number, s: number, outcome: string) => {
          const belief = model.believes[i]![s];
          if (belief === undefined) return expect(outcome).toBe('not_held');
          if (model.lease[s] === `i${i}:${belief}`) {
            expect(outcome).toBe('accepted');
            model.accepted[s]!.push(...written.get(`${i}/${s}`)!);
          } else {
            expect(outcome).toBe('refused');
            model.believes[i]![s] = undefined;
          }
        };

        const check = async () => {
          steps++;
          for (const [s, k] of keys.entries()) {
            const [fence, lease, seq] = await admin.mget(k.fence, k.lease, k.seq);
            expect(Number(fence ?? 0)).toBe(model.fence[s]);
            expect(lease).toBe(model.lease[s]);
            const entries = (await admin.xrange(k.events, '-', '+')) as Array<[string, string[]]>;
            const ws = entries.map(
              ([, fields]) => (JSON.parse(fields[1]!) as { payload: { w: string } }).payload.w,
            );
            expect(ws).toEqual(model.accepted[s]);
            expect(entries.map(([id]) => id)).toEqual(ws.map((_, n) => `${n + 1}-0`));
            expect(Number(seq ?? 0)).toBe(ws.length);
            const fences = ws.map((w) => Number(w.split(':')[1]));
            expect(fences).toEqual([...fences].sort((x, y) => x - y));
            for (const [i, instance] of instances.entries()) {
              const belief = model.believes[i]![s];
              expect(instance.fenceOf(sessions[s]!)).toBe(belief);
              if (belief !== undefined) expect(belief).toBeLessThanOrEqual(model.fence[s]!);
            }
            // One writer: at most one instance believes in the lease Redis holds.
            const current = instances.filter(
              (_, i) => model.lease[s] === `i${i}:${model.believes[i]![s]}`,
            );
            expect(current.length).toBeLessThanOrEqual(1);
          }
        };

        for (const st of schedule) {
          switch (st.kind) {
            case 'acquire': {
              const grant = await instances[st.i]!.acquire(sessions[st.s]!);
              const belief = model.believes[st.i]![st.s];
              if (belief !== undefined) expect(grant).toEqual({ acquired: true, fence: belief });
              else if (model.lease[st.s] !== null) {
                expect(grant).toEqual({ acquired: false, holder: model.lease[st.s] });
              } else {
                const fence = ++model.fence[st.s]!;
                expect(grant).toEqual({ acquired: true, fence });
                model.lease[st.s] = `i${st.i}:${fence}`;
                model.believes[st.i]![st.s] = fence;
                expect(instances[st.i]!.eventLog.lastSeq({}, sessions[st.s]!)).toBe(
                  model.accepted[st.s]!.length,
                );
              }
              break;
            }
            case 'renew': {
              await instances[st.i]!.renew();
              model.believes[st.i] = model.believes[st.i]!.map((belief, s) =>
                belief !== undefined && model.lease[s] === `i${st.i}:${belief}`
                  ? belief
                  : undefined,
              );
              break;
            }
            case 'expire': {
              const lease = keys[st.s]!.lease;
              await admin.pexpire(lease, 1);
              await pollUntil(async () => (await admin.exists(lease)) === 0, 'the lease to expire');
              model.lease[st.s] = null;
              break;
            }
            case 'deadline': {
              clocks[st.i]!.increment(ttlMs); // no renew can succeed within it: the deadline fires
              await instances[st.i]!.renew(); // lets the renew the timer sent settle
              model.believes[st.i] = sessions.map(() => undefined);
              break;
            }
            case 'write':
              modelWrite(st.i, st.s, await write(st.i, st.s, st.n));
              break;
            case 'writeBoth': {
              if (st.i === st.j) break;
              const [first, second] = await Promise.all([
                write(st.i, st.s, 2),
                write(st.j, st.s, 2),
              ]);
              modelWrite(st.i, st.s, first);
              modelWrite(st.j, st.s, second);
              break;
            }
            case 'release': {
              const belief = model.believes[st.i]![st.s];
              const released = await instances[st.i]!.release(sessions[st.s]!);
              const mine = belief !== undefined && model.lease[st.s] === `i${st.i}:${belief}`;
              expect(released).toBe(mine);
              if (mine) model.lease[st.s] = null;
              model.believes[st.i]![st.s] = undefined;
              break;
            }
          }
          await check();
        }
        await Promise.all(instances.map((instance) => instance.close()));
      }),
      { numRuns: 100 },
    );
    console.info(`lease schedules: ${runs} runs, ${steps} steps checked against Redis`);
  });
});
