/**
 * The bound on a cluster instance's shutdown when Redis does not answer (README "Cluster"): a
 * frozen Redis (`SIGSTOP`, a stalled host) keeps its TCP connections open and answers nothing,
 * so the shutdown's last writes (the shipper's batches, a final checkpoint, the lease releases)
 * would wait for it. Past the grace and {@link shutdownStoreWaitMs} more, an instance whose
 * Redis fails a `PING` stops waiting and leaves its sessions to failover, as `kill -9` would;
 * a shutdown still making progress with a Redis that answers is never cut.
 *
 * @module
 * @internal
 */
import type { StoreHealth } from '../server/store-health.js';

/**
 * @internal How long a shutdown waits for Redis past its grace, in ms, before it asks Redis
 * (a `PING` bounded by 1 s) whether it is worth waiting more: two command timeouts
 * (`redisCommandTimeoutMs`) and a little.
 */
export const shutdownStoreWaitMs = 5_000;

/** How often a shutdown past its bound asks Redis again while Redis answers, in ms. */
const recheckEveryMs = 1_000;

/**
 * @internal `work` (a shutdown), or what `onAbandon` makes of the problem once `afterMs` have
 * passed, `work` has not settled and `health.check()` says Redis cannot be reached. While Redis
 * answers, `work` is waited for (asked again every second).
 *
 * @param options - `afterMs`: when to ask Redis first, in ms from now; `health`: the instance's
 *   store health; `onAbandon`: called once with the reason, its value resolves the result
 * @returns the first of `work` and the abandon; `work`'s rejection rejects it
 */
export function boundByStoreWait<T>(
  work: Promise<T>,
  options: {
    readonly afterMs: number;
    readonly health: StoreHealth;
    readonly onAbandon: (problem: string) => T;
  },
): Promise<T> {
  let settled = false;
  let timer: NodeJS.Timeout | undefined;
  const done = work.finally(() => {
    settled = true;
    clearTimeout(timer);
  });
  const abandoned = new Promise<T>((resolve) => {
    const probe = () => {
      options.health.check().then(
        (problem) => {
          if (settled) return;
          if (problem === undefined) timer = setTimeout(probe, recheckEveryMs);
          else resolve(options.onAbandon(problem));
        },
        (error: unknown) => {
          if (!settled) resolve(options.onAbandon(String(error)));
        },
      );
    };
    timer = setTimeout(probe, options.afterMs);
  });
  return Promise.race([done, abandoned]);
}

/**
 * @internal The log line of a shutdown that stopped waiting for Redis: what is left undone,
 * and who does it instead.
 *
 * @param held - how many sessions the instance held when its shutdown began
 * @param leaseTtlMs - the cluster's lease TTL, in ms
 * @param problem - why Redis is deemed unreachable (the health probe's answer)
 */
export function describeAbandonedShutdown(
  held: number,
  leaseTtlMs: number,
  problem: string,
): string {
  return (
    `runplane serve: Redis did not answer during the shutdown (${problem}); not waiting longer: ` +
    `the ${held} session(s) held here when the shutdown began are left to failover (each lease expires within ` +
    `${leaseTtlMs} ms, then another instance takes the session: a running run ` +
    'is marked owner_lost, or resumed from its last safe point), and the writes not yet in ' +
    'Redis (events since the last shipped batch, final checkpoints, lease releases) are ' +
    'dropped; accepted messages and waiting runs were in Redis before they were answered'
  );
}
