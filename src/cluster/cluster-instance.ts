/**
 * One runplane instance of a cluster on Redis (docs/architecture.md, "Cluster on Redis"): its
 * session leases, the outboxes of the sessions it holds with their shipper, and the event log
 * that reads the Streams. `cluster-session-access.ts` takes commands to it; a later phase wires
 * both into `runplane serve`.
 *
 * The rule it keeps: one writer per session. An instance writes a session only while it holds
 * the session's lease; every batch carries the lease's fence and Redis refuses a stale one. When
 * the instance learns it lost a session (a renew refused, its local deadline passed, a batch
 * refused, the outbox overflowed), it stops the session's outbox, forgets its mirror and calls
 * `onLost` once.
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import type { Clock } from '../clock.js';
import { StaleFenceError, type RunplaneError } from '../errors.js';
import { toSessionKeyString, type EventLog, type SessionKey } from '../events/event-log.js';
import { resolveClusterOptions, type ClusterInstanceOptions } from './cluster-options.js';
import { toInstanceChannel, toSessionKeys, type SessionKeys } from './keys.js';
import { createOutbox, type RecordOp } from './outbox.js';
import { createRedisEventLog, type SessionMirror } from './redis-event-log.js';
import { defineClusterScripts } from './scripts.js';
import { createSessionLeases, type LeaseGrant } from './session-lease.js';
import { createShipper } from './shipper.js';
import { createTailWatcher } from './tail-watcher.js';

/**
 * @internal A holder-side mirror of one kind of session record (runs, session meta): loaded from
 * Redis when the instance takes a session's lease, before `acquire` answers, and forgotten when
 * the instance stops holding it (released or lost).
 */
export interface RecordMirror {
  /** Loads the session's records; a rejection fails the `acquire` (the lease is given back). */
  load(key: SessionKey, keys: SessionKeys): Promise<void>;
  /** Drops what the mirror holds of the session. */
  forget(key: SessionKey): void;
}

/** @internal One instance of a cluster. */
export interface ClusterInstance {
  readonly instanceId: string;
  /** The command connection (as given in the options; the record stores and readers share it). */
  readonly redis: Redis;
  /** The clock of leases and timers (as given in the options, or the monotonic default). */
  readonly clock: Clock;
  /** The Redis keys of a session under this instance's prefix. */
  keysOf(key: SessionKey): SessionKeys;
  /** The pub/sub channel of an instance (this one by default) under this instance's prefix. */
  channelOf(instanceId?: string): string;
  /** The prefix of every key of this cluster. */
  readonly keyPrefix: string;
  /**
   * Adds a record mirror: loaded on every later acquire, forgotten with every released or lost
   * session. Add mirrors before the first acquire.
   */
  addMirror(mirror: RecordMirror): void;
  /** The lease value (`<instanceId>:<fence>`) and fence this instance holds the session under. */
  leaseOf(key: SessionKey): { readonly value: string; readonly fence: number } | undefined;
  /** The event log: writes for sessions held here, reads for any session. */
  readonly eventLog: EventLog;
  /**
   * Takes the session's lease when nobody holds it, and loads the session's mirror (its stored
   * `seq` and run ids) before answering.
   */
  acquire(key: SessionKey): Promise<LeaseGrant>;
  /** The fence this instance holds the session under, or `undefined`. */
  fenceOf(key: SessionKey): number | undefined;
  /** The sessions this instance holds now (loaded, not lost or released). */
  heldSessions(): SessionKey[];
  /**
   * Queues a change to the session's records, shipped in order with its events.
   *
   * @throws {@link StaleFenceError} (`STALE_FENCE`) when the session is not held here
   * @throws `OutboxFullError` (`OUTBOX_FULL`) past the outbox's bound (the session is then lost)
   */
  write(key: SessionKey, op: RecordOp): void;
  /**
   * Opens a group of writes of a held session that reach Redis in one batch, all or none, once
   * the returned function closes it (see `Outbox.openGroup`; close it within a few microtasks).
   *
   * @throws {@link StaleFenceError} (`STALE_FENCE`) when the session is not held here
   */
  openGroup(key: SessionKey): () => void;
  /**
   * Resolves once every write queued so far for the session is in Redis.
   *
   * @throws {@link StaleFenceError} (`STALE_FENCE`, rejected) when the session is or gets lost
   */
  flushed(key: SessionKey): Promise<void>;
  /**
   * Holds back every release of the session until `write` settles: a write this holder still
   * owes the session once it is queued (the answer of a command applied from the command Stream
   * that answers later, `session.delete`). A release meanwhile would stop the outbox first and
   * the write would be refused (its sender would wait out its whole timeout).
   */
  owe(key: SessionKey, write: Promise<unknown>): void;
  /**
   * Waits for the writes owed to the session (see `owe`), ships what is queued, then gives the
   * lease back (compare-and-delete).
   *
   * @returns whether the lease was still this instance's in Redis
   */
  release(key: SessionKey): Promise<boolean>;
  /** Renews every held lease now (the timer does so every TTL/3). */
  renew(): Promise<void>;
  /**
   * Calls `listener` after every renew round that reached Redis (each TTL/3, and each
   * `renew()`): the beat of backstops such as the command Stream's re-read.
   *
   * @returns a function that removes the listener
   */
  onRenewed(listener: () => void): () => void;
  /** Stops timers and the subscriber connection; held leases expire in Redis. */
  close(): Promise<void>;
}

/**
 * @internal Creates a cluster instance on `options.redis`.
 *
 * @throws `InvalidArgumentError` (`INVALID_ARGUMENT`) for a bad option (see {@link ClusterInstanceOptions})
 */
export function createClusterInstance(options: ClusterInstanceOptions): ClusterInstance {
  const resolved = resolveClusterOptions(options);
  const scripts = defineClusterScripts(resolved.redis);
  const mirrors = new Map<string, SessionMirror>();
  /** Releases in progress, by session key string. */
  const releasing = new Map<string, Promise<boolean>>();
  /** Writes owed to a session (`owe`), by session key string; each leaves once settled. */
  const owed = new Map<string, Set<Promise<unknown>>>();
  const recordMirrors: RecordMirror[] = [];
  const watcher = createTailWatcher(resolved);

  /** Forgets a session this instance held under `fence`, once; tells `onLost` when asked. */
  const lose = (key: SessionKey, fence: number, error: RunplaneError, tell: boolean) => {
    const k = toSessionKeyString(key);
    const mirror = mirrors.get(k);
    if (mirror === undefined || mirror.outbox.fence !== fence) return;
    mirrors.delete(k);
    mirror.outbox.stop(error);
    for (const records of recordMirrors) records.forget(key);
    // Still held here (the outbox overflowed, or Redis refused a batch): hand the lease back, so
    // that another instance need not wait for it to expire (compare-and-delete: a no-op when
    // Redis already moved on).
    if (leases.held(key)?.fence === fence) void leases.release(key).catch(() => undefined);
    if (tell) options.onLost?.(mirror.key, error);
  };

  const renewListeners = new Set<() => void>();
  const leases = createSessionLeases(
    resolved,
    scripts,
    (lease, error) => {
      const mirror = mirrors.get(toSessionKeyString(lease.key));
      if (mirror !== undefined) lose(lease.key, lease.fence, error, true);
      else options.onLost?.(lease.key, error);
    },
    () => {
      for (const listener of [...renewListeners]) listener();
    },
  );
  const shipper = createShipper(
    resolved,
    scripts,
    (outbox, seq) => watcher.nudge(outbox.keys.tailChannel, seq),
    (outbox, error) => lose(outbox.key, outbox.fence, error, true),
  );

  const mirrorOf = (key: SessionKey) => mirrors.get(toSessionKeyString(key));
  const heldMirror = (key: SessionKey): SessionMirror => {
    const mirror = mirrorOf(key);
    if (mirror === undefined) throw new StaleFenceError(key.ownerId, key.sessionId, 0, 'not_held');
    return mirror;
  };

  /** Loads the mirror of a session just acquired: its stored `seq` and its run ids. */
  const load = async (key: SessionKey): Promise<void> => {
    const lease = leases.held(key);
    if (lease === undefined) return;
    const [[seqError, seq], [runsError, runIds]] = ((await resolved.redis
      .pipeline()
      .get(lease.keys.seq)
      .smembers(lease.keys.eventRuns)
      .exec()) ?? [
      [new Error('no reply'), null],
      [null, []],
    ]) as [[Error | null, string | null], [Error | null, string[]]];
    if (seqError !== null) throw seqError;
    if (runsError !== null) throw runsError;
    if (leases.held(key) !== lease) return; // lost while loading
    const outbox = createOutbox(
      lease,
      Number(seq ?? 0),
      { maxEntries: resolved.maxOutboxEntries, maxBytes: resolved.maxOutboxBytes },
      (box) => shipper.schedule(box),
      (box, error) => lose(box.key, box.fence, error, true),
    );
    for (const records of recordMirrors) await records.load(lease.key, lease.keys);
    if (leases.held(key) !== lease) {
      for (const records of recordMirrors) records.forget(key);
      return; // lost while loading
    }
    mirrors.set(toSessionKeyString(key), {
      key: lease.key,
      outbox,
      lastSeq: outbox.ackedSeq,
      runIds: new Set(runIds),
    });
  };

  return {
    instanceId: resolved.instanceId,
    redis: resolved.redis,
    clock: resolved.clock,
    keysOf: (key) => toSessionKeys(key, resolved.keyPrefix),
    channelOf: (instanceId = resolved.instanceId) =>
      toInstanceChannel(instanceId, resolved.keyPrefix),
    keyPrefix: resolved.keyPrefix,
    addMirror: (mirror) => void recordMirrors.push(mirror),
    leaseOf(key) {
      const lease = mirrorOf(key) === undefined ? undefined : leases.held(key);
      return lease === undefined ? undefined : { value: lease.value, fence: lease.fence };
    },
    eventLog: createRedisEventLog(resolved, watcher, mirrorOf),

    async acquire(key) {
      // A release of the session in progress here ends first: an `acquired` answered during it
      // would name a lease whose outbox the release is about to stop.
      await releasing.get(toSessionKeyString(key))?.catch(() => undefined);
      const grant = await leases.acquire(key);
      if (grant.acquired && mirrorOf(key) === undefined) {
        try {
          await load(key);
        } catch (error) {
          for (const records of recordMirrors) records.forget(key);
          await leases.release(key).catch(() => undefined);
          throw error;
        }
      }
      return grant;
    },

    fenceOf: (key) => mirrorOf(key)?.outbox.fence,

    heldSessions: () => [...mirrors.values()].map((mirror) => mirror.key),

    write(key, op) {
      heldMirror(key).outbox.enqueueOp(op);
    },

    openGroup: (key) => heldMirror(key).outbox.openGroup(),

    async flushed(key) {
      await heldMirror(key).outbox.flushed();
    },

    owe(key, write) {
      const k = toSessionKeyString(key);
      const writes = owed.get(k) ?? new Set<Promise<unknown>>();
      owed.set(k, writes);
      const settled = write.then(
        () => undefined,
        () => undefined,
      );
      writes.add(settled);
      void settled.then(() => {
        writes.delete(settled);
        if (writes.size === 0 && owed.get(k) === writes) owed.delete(k);
      });
    },

    release(key) {
      const k = toSessionKeyString(key);
      const running = releasing.get(k);
      if (running !== undefined) return running;
      const released = (async () => {
        // A write owed meanwhile (a later command's answer) is waited for as well.
        for (let writes = owed.get(k); writes !== undefined; writes = owed.get(k)) {
          await Promise.all(writes);
        }
        const mirror = mirrorOf(key);
        if (mirror !== undefined) {
          // Until nothing is left to ship: a write queued while a batch was on its way counts.
          while (mirror.outbox.pending > 0 && mirror.outbox.stopped === undefined) {
            await mirror.outbox.flushed().catch(() => undefined);
          }
          const { fence } = mirror.outbox;
          if (mirrors.get(k) === mirror) {
            mirrors.delete(k);
            for (const records of recordMirrors) records.forget(key);
            mirror.outbox.stop(
              new StaleFenceError(key.ownerId, key.sessionId, fence, 'not_held', 'released'),
            );
          }
        }
        return leases.release(key);
      })().finally(() => releasing.delete(k));
      releasing.set(k, released);
      return released;
    },

    renew: () => leases.renew(),

    onRenewed(listener) {
      renewListeners.add(listener);
      return () => renewListeners.delete(listener);
    },

    async close() {
      leases.close();
      shipper.close();
      await watcher.close();
    },
  };
}
