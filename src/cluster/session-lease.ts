/**
 * Session leases with fencing (docs/architecture.md, "Cluster on Redis"): one instance at a time
 * holds a session. A grant is one script (`SET NX PX` and an `INCR`ed fence); every held lease
 * is renewed each TTL/3 in one pipelined round trip, only while it still names this holder; a
 * release is compare-and-delete. The holder also keeps a local deadline on a monotonic clock and
 * gives the session up by itself when no renew succeeded in time, without waiting for Redis
 * (a paused or cut-off holder must not keep driving a session another instance may hold).
 *
 * The fencing token follows Kleppmann's condition for TTL locks (a token issued on every grant,
 * checked by the resource); here the resource is Redis itself, in the scripts that write.
 *
 * @module
 * @internal
 */
import { StaleFenceError, type LeaseLossReason } from '../errors.js';
import { toSessionKeyString, type SessionKey } from '../events/event-log.js';
import type { ResolvedClusterOptions } from './cluster-options.js';
import { toSessionKeys, type SessionKeys } from './keys.js';
import type { ClusterScripts } from './scripts.js';

/** @internal What an acquire got: the lease and its fence, or the current holder's value. */
export type LeaseGrant =
  | { readonly acquired: true; readonly fence: number }
  | { readonly acquired: false; readonly holder: string };

/** @internal One lease this instance holds. */
export interface HeldLease {
  readonly key: SessionKey;
  readonly keys: SessionKeys;
  readonly fence: number;
  /** `<instanceId>:<fence>`, the lease key's value. */
  readonly value: string;
  /** The clock time by which a renew must have succeeded. */
  deadline: number;
}

/** @internal The leases of one instance. */
export interface SessionLeases {
  /**
   * Takes the session's lease when nobody holds it. Taking one this instance holds answers its
   * fence again.
   */
  acquire(key: SessionKey): Promise<LeaseGrant>;
  /** The lease this instance holds on `key`, if any. */
  held(key: SessionKey): HeldLease | undefined;
  /** Stops holding `key` here, without a word to Redis and without `onLost`. @returns the lease it held */
  abandon(key: SessionKey): HeldLease | undefined;
  /** Gives the lease back (compare-and-delete). @returns whether Redis still had it under this fence */
  release(key: SessionKey): Promise<boolean>;
  /** Runs one renew round now (the timer runs one every TTL/3); one round at a time. */
  renew(): Promise<void>;
  /** Stops the timers; the leases then expire in Redis unless released. */
  close(): void;
}

/**
 * @internal Creates the lease table of one instance.
 *
 * @param options - resolved cluster options (TTL, margin, clock)
 * @param scripts - the scripts on the command connection
 * @param onLost - called once per lease this instance loses on its own notice: a renew that
 *   Redis refused (`renew_refused`) or a deadline that passed (`deadline_passed`)
 * @param onRenewed - called after each renew round that reached Redis (timer or `renew()`)
 */
export function createSessionLeases(
  options: ResolvedClusterOptions,
  scripts: ClusterScripts,
  onLost: (lease: HeldLease, error: StaleFenceError) => void,
  onRenewed: () => void = () => undefined,
): SessionLeases {
  const { clock, redis, instanceId, leaseTtlMs, leaseMarginMs, renewEveryMs } = options;
  const leases = new Map<string, HeldLease>();
  /** Acquires under way, by session: a second call waits for the first instead of racing it. */
  const acquiring = new Map<string, Promise<LeaseGrant>>();
  let renewTimer: unknown;
  let deadlineTimer: unknown;
  let renewing: Promise<void> | undefined;
  let closed = false;

  const lose = (lease: HeldLease, reason: LeaseLossReason) => {
    const k = toSessionKeyString(lease.key);
    if (leases.get(k) !== lease) return;
    leases.delete(k);
    onLost(lease, new StaleFenceError(lease.key.ownerId, lease.key.sessionId, lease.fence, reason));
  };

  /** Arms one timer at the earliest deadline of the held leases. */
  const armDeadline = () => {
    if (deadlineTimer !== undefined) clock.clearTimeout(deadlineTimer);
    deadlineTimer = undefined;
    if (closed || leases.size === 0) return;
    let earliest = Number.POSITIVE_INFINITY;
    for (const lease of leases.values()) earliest = Math.min(earliest, lease.deadline);
    deadlineTimer = clock.setTimeout(
      () => {
        deadlineTimer = undefined;
        const now = clock.now();
        for (const lease of [...leases.values()]) {
          if (lease.deadline <= now) lose(lease, 'deadline_passed');
        }
        armDeadline();
      },
      Math.max(0, earliest - clock.now()),
    );
  };

  const armRenew = () => {
    if (renewTimer !== undefined || closed || leases.size === 0) return;
    renewTimer = clock.setTimeout(() => {
      renewTimer = undefined;
      void renewRound().finally(armRenew);
    }, renewEveryMs);
  };

  const renewOnce = async () => {
    const round = [...leases.values()];
    if (round.length === 0) return;
    const sentAt = clock.now();
    const pipeline = redis.pipeline();
    const calls = scripts.queue(pipeline);
    for (const lease of round) calls.renew(lease.keys.lease, lease.value, leaseTtlMs);
    let results: Array<[Error | null, unknown]> | null;
    try {
      results = await pipeline.exec();
    } catch {
      return; // Redis unreachable: the deadline decides
    }
    round.forEach((lease, i) => {
      const [error, reply] = results?.[i] ?? [null, undefined];
      if (error !== null) return;
      if (reply === 1)
        lease.deadline = Math.max(lease.deadline, sentAt + leaseTtlMs - leaseMarginMs);
      else lose(lease, 'renew_refused');
    });
    armDeadline();
    onRenewed();
  };

  const renewRound = (): Promise<void> => {
    renewing ??= renewOnce().finally(() => (renewing = undefined));
    return renewing;
  };

  const grant = async (key: SessionKey, k: string): Promise<LeaseGrant> => {
    const keys = toSessionKeys(key, options.keyPrefix);
    const sentAt = clock.now();
    const reply = (await scripts.acquire(keys.lease, keys.fence, instanceId, leaseTtlMs)) as [
      number,
      number | string,
    ];
    if (reply[0] !== 1) return { acquired: false, holder: String(reply[1]) };
    const fence = Number(reply[1]);
    const lease: HeldLease = {
      key: Object.freeze({ ownerId: key.ownerId, sessionId: key.sessionId }),
      keys,
      fence,
      value: `${instanceId}:${fence}`,
      deadline: sentAt + leaseTtlMs - leaseMarginMs,
    };
    leases.set(k, lease);
    armDeadline();
    armRenew();
    return { acquired: true, fence };
  };

  return {
    acquire(key) {
      const k = toSessionKeyString(key);
      const mine = leases.get(k);
      // Past its deadline, a lease is lost now, not when the overdue timer runs: a holder woken
      // from a pause (SIGSTOP, a long GC) may take a request before its timers.
      if (mine !== undefined && mine.deadline <= clock.now()) lose(mine, 'deadline_passed');
      else if (mine !== undefined) return Promise.resolve({ acquired: true, fence: mine.fence });
      let pending = acquiring.get(k);
      if (pending === undefined) {
        pending = grant(key, k).finally(() => acquiring.delete(k));
        acquiring.set(k, pending);
      }
      return pending;
    },

    held: (key) => leases.get(toSessionKeyString(key)),

    abandon(key) {
      const k = toSessionKeyString(key);
      const lease = leases.get(k);
      leases.delete(k);
      armDeadline();
      return lease;
    },

    async release(key) {
      const lease = this.abandon(key);
      if (lease === undefined) return false;
      return (await scripts.release(lease.keys.lease, lease.value)) === 1;
    },

    renew: renewRound,

    close() {
      closed = true;
      if (renewTimer !== undefined) clock.clearTimeout(renewTimer);
      if (deadlineTimer !== undefined) clock.clearTimeout(deadlineTimer);
      renewTimer = undefined;
      deadlineTimer = undefined;
    },
  };
}
