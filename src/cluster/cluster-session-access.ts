/**
 * The {@link SessionAccess} of a cluster instance (docs/architecture.md, "Cluster on Redis"):
 * reads and idempotency keys from Redis, so any instance answers for any session
 * (`cluster-reads.ts`), and commands taken to the one writer of their session, the holder of
 * its lease, whose runtime's live state of the session goes to Redis (`live-state.ts`).
 *
 * `execute(command)` on this instance:
 * - **held here** → the local access applies it; the answer waits until the batch carrying its
 *   effect is acknowledged by Redis (a 2xx means durable);
 * - **held by nobody** → this instance takes the lease (`onAcquired` rebuilds the session, then
 *   the command Stream past the applied cursor is applied) and applies it as above;
 * - **held elsewhere** → appended to the session's command Stream (bounded), the holder nudged
 *   over pub/sub, and the answer awaited (bounded; see `command-waiters.ts`).
 *
 * The holder applies the Stream in order past its applied cursor, through the local access (the
 * same code as a local request), when nudged and, as the backstop of a lost nudge, on every
 * renew round. Each entry is applied in a write group: its effect, the cursor past it and its
 * answer reach Redis in one fenced batch, all or none.
 *
 * **Exactly once.** A command is applied once in the durable history: the cursor moves only in
 * the batch that carries the command's effect, and only the lease holder's batches are accepted.
 * A holder that dies (or is fenced) after applying a command in memory but before that batch
 * landed left neither its effect nor its answer in Redis; the next holder reads the cursor after
 * taking the lease (so no batch of the old fence can land after) and applies the command again,
 * for the first time durably; its sender gets that answer. One exception: `session.delete`
 * answers once the session's runs have settled, so its answer follows in a later batch than its
 * cursor (a release of the session here, the delete's own or the watch's, waits for it:
 * `ClusterInstance.owe`); a holder lost between the two leaves the sender with
 * `COMMAND_TIMEOUT` (the delete is durable; the answer is lost).
 *
 * @module
 * @internal
 */
import { nanoid } from 'nanoid';
import type { Redis } from 'ioredis';
import { StaleFenceError } from '../errors.js';
import { toSessionKeyString, type SessionKey } from '../events/event-log.js';
import { HttpError } from '../server/http-error.js';
import type { SessionAccess, SessionCommand } from '../server/session-access.js';
import {
  resolveClusterSessionAccessOptions,
  type ClusterSessionAccessOptions,
} from './cluster-access-options.js';
import {
  fromAnswerJson,
  holderOf,
  parseInstanceMessage,
  readCommands,
  toAnswerJson,
  toAnswerOp,
  toCommandNudgeHead,
  toNudgedCommand,
  type CommandEntry,
  type NudgedEntry,
} from './command-stream.js';
import { createClusterReads } from './cluster-reads.js';
import { sharedSubscription } from './redis-subscriber.js';
import { traceCommand, traceNow } from './command-trace.js';
import { createCommandWaiters } from './command-waiters.js';
import { createHolderHints } from './holder-hints.js';
import { publishLiveState, writeLiveState } from './live-state.js';
import { createOwnerIndex } from './redis-owner-index.js';
import type { LeaseGrant } from './session-lease.js';
import { defineClusterScripts } from './scripts.js';

/** @internal A cluster's session access; `close()` ends its subscription and waits. */
export interface ClusterSessionAccess extends SessionAccess {
  /**
   * Resolves once this instance listens on its channel (commands may be sent before); after a
   * failed SUBSCRIBE, each read tries again.
   */
  readonly ready: Promise<void>;
  /**
   * Takes the session's lease when nobody holds it and catches the session up (`onAcquired`,
   * then its command Stream), as a command to it would.
   *
   * @returns whether this instance holds the session now
   */
  hold(key: SessionKey): Promise<boolean>;
  /**
   * Stops taking leases (a drain): a command for a session not held here is refused with 503
   * `shutting_down` (the client retries on another instance); commands other instances send to
   * the sessions held here wait in their Streams for the next holder.
   */
  drain(): void;
  /** Ends the subscriber connection and the waits (`SHUTTING_DOWN`); leases are the cluster's. */
  close(): Promise<void>;
}

/** What the holder keeps of a session whose command Stream it applies. */
interface HeldSession {
  readonly key: SessionKey;
  /** The fence it holds the session under: a new fence is a new `HeldSession`. */
  readonly fence: number;
  /** The id of the last entry applied (in memory ahead of Redis); undefined until caught up. */
  cursor: string | undefined;
  /** Settles once `onAcquired` ran and the Stream was applied. */
  ready: Promise<void>;
  /**
   * Whether `onAcquired` has rebuilt the session here: until then this instance's runtime knows
   * nothing of its runs, and reads come from Redis (the last holder's live state).
   */
  rebuilt: boolean;
  /** The pump applying the Stream now, if one runs. */
  pumping: Promise<void> | undefined;
  /** A nudge came while the pump ran: read again. */
  again: boolean;
}

/** Resolves on the next macrotask: by then, an answer that needs no I/O has settled. */
const nextMacrotask = () =>
  new Promise<undefined>((resolve) => setImmediate(() => resolve(undefined)));

/**
 * @internal Creates the session access of a cluster instance.
 *
 * @param options - {@link ClusterSessionAccessOptions}
 * @throws `InvalidArgumentError` (`INVALID_ARGUMENT`) for a bad option
 */
export function createClusterSessionAccess(
  options: ClusterSessionAccessOptions,
): ClusterSessionAccess {
  const resolved = resolveClusterSessionAccessOptions(options);
  const { cluster, local, runtime, reportError } = resolved;
  const redis: Redis = cluster.redis;
  const scripts = defineClusterScripts(redis);
  const held = new Map<string, HeldSession>();
  const elsewhere = createHolderHints(cluster.clock);
  let draining = false;

  /** The session's state while this instance still holds it under the same fence. */
  const heldSession = (key: SessionKey): HeldSession | undefined => {
    const k = toSessionKeyString(key);
    const session = held.get(k);
    if (session !== undefined && session.fence !== cluster.fenceOf(key)) held.delete(k);
    return held.get(k);
  };

  const reportUnlessLost = (error: unknown) => {
    if (!(error instanceof StaleFenceError)) reportError(error);
  };

  /** Applies one entry in a write group: its effect, the cursor past it, and its answer. */
  const applyEntry = async (session: HeldSession, entry: CommandEntry) => {
    const { key } = session;
    const close = cluster.openGroup(key);
    try {
      const { command } = entry;
      const pending =
        command instanceof HttpError
          ? Promise.resolve(toAnswerJson({ ok: false, error: command }))
          : local.execute(command).then(
              (answer) => toAnswerJson({ ok: true, answer }),
              (error: unknown) => {
                if (!(error instanceof HttpError)) reportUnlessLost(error);
                return toAnswerJson({ ok: false, error });
              },
            );
      cluster.write(key, { op: 'commands.applied', id: entry.id });
      session.cursor = entry.id;
      if (entry.requestId === '') return;
      const answer = (json: string) =>
        cluster.write(
          key,
          toAnswerOp(
            entry.requestId,
            json,
            resolved.answerTtlMs,
            cluster.channelOf(entry.instanceId),
          ),
        );
      const json = await Promise.race([pending, nextMacrotask()]);
      traceCommand(entry.requestId, 'a.executed');
      if (json !== undefined) answer(json);
      // Still waiting (a delete waits for its runs): the answer follows in a later batch, and
      // no release of the session (the delete's own, or the watch's) may come before it.
      else cluster.owe(key, pending.then(answer).catch(reportUnlessLost));
    } finally {
      close();
    }
  };

  /**
   * Applies the session's command Stream past its cursor, in order, until it is empty. `nudged`:
   * the entry a nudge carried; when it directly follows the cursor (its `previousId` is the
   * cursor) and no pump runs, it is applied without reading the Stream first (the same entry,
   * in the same order: nothing lies between).
   */
  const pump = (key: SessionKey, nudged?: NudgedEntry): Promise<void> => {
    // A draining instance applies no more commands: they wait in the Stream for the next
    // holder, which answers them (a `user.message` would only be refused here).
    if (draining) return Promise.resolve();
    const session = heldSession(key);
    if (session === undefined || session.cursor === undefined) return Promise.resolve();
    if (session.pumping !== undefined) {
      traceCommand(`s:${key.sessionId}`, 'a.pump_busy');
      session.again = true;
      return session.pumping;
    }
    const keys = cluster.keysOf(key);
    let first =
      nudged !== undefined && nudged.previousId === session.cursor
        ? [toNudgedCommand(nudged, key)]
        : undefined;
    const run = async () => {
      do {
        session.again = false;
        for (;;) {
          if (heldSession(key) !== session) return;
          const readAt = traceNow();
          const entries =
            first ??
            (await readCommands(redis, keys, key, session.cursor!, resolved.readBatchSize));
          first = undefined;
          for (const entry of entries) {
            traceCommand(entry.requestId, 'a.read_start', readAt);
            traceCommand(entry.requestId, 'a.read');
          }
          for (const entry of entries) {
            if (heldSession(key) !== session) return;
            await applyEntry(session, entry);
          }
          if (entries.length > 0) {
            await cluster.flushed(key);
            for (const entry of entries) traceCommand(entry.requestId, 'a.flushed');
            // Answers of this instance's own commands (it took the lease meanwhile).
            for (const entry of entries) waiters.fetch(entry.requestId);
          }
          if (entries.length < resolved.readBatchSize) break;
        }
      } while (session.again);
    };
    session.pumping = run()
      .catch(reportUnlessLost)
      .finally(() => (session.pumping = undefined));
    return session.pumping;
  };

  /** Reads the applied cursor of a session just taken, after `onAcquired`, and applies the Stream. */
  const catchUp = async (session: HeldSession) => {
    await resolved.onAcquired(session.key);
    session.rebuilt = true;
    writeLiveState(cluster, runtime, session.key); // the last holder's may be stale
    session.cursor = (await redis.get(cluster.keysOf(session.key).commandsApplied)) ?? '0-0';
    await pump(session.key);
  };

  /** Takes the lease when nobody holds it; once held here, the session is caught up. */
  const ensureHeld = async (key: SessionKey): Promise<LeaseGrant> => {
    if (draining && cluster.fenceOf(key) === undefined) {
      throw new HttpError(
        'shutting_down',
        `this instance is draining; session ${JSON.stringify(key.sessionId)} is served by the others`,
      );
    }
    const grant = await cluster.acquire(key);
    if (!grant.acquired) {
      elsewhere.note(key);
      return grant;
    }
    elsewhere.forget(key);
    let session = heldSession(key);
    if (session === undefined) {
      const created: HeldSession = {
        key,
        fence: grant.fence,
        cursor: undefined,
        ready: Promise.resolve(),
        rebuilt: false,
        pumping: undefined,
        again: false,
      };
      created.ready = catchUp(created).catch(async (error: unknown) => {
        held.delete(toSessionKeyString(key));
        await cluster.release(key).catch(() => undefined);
        throw error;
      });
      held.set(toSessionKeyString(key), created);
      session = created;
    }
    await session.ready;
    return grant;
  };

  const takeOver = (key: SessionKey) =>
    void ensureHeld(key).catch((error: unknown) => {
      if (!draining) reportUnlessLost(error); // a draining instance leaves it to the others
    });

  const waiters = createCommandWaiters(resolved, takeOver, (key) => void pump(key));

  const subscriber = redis.duplicate();
  subscriber.on('error', () => undefined); // it reconnects and resubscribes; the polls cover the gap
  subscriber.on('message', (_channel: string, text: string) => {
    const message = parseInstanceMessage(text);
    if (message?.t === 'a') {
      traceCommand(message.r, 'b.answer_nudged');
      waiters.fetch(message.r, message.answer);
    } else if (message?.t === 'c') {
      traceCommand(`s:${message.s}`, 'a.nudged');
      void pump({ ownerId: message.o, sessionId: message.s }, message.entry);
    }
  });
  // Awaited by every command. A failed SUBSCRIBE (one flushed by ioredis's
  // maxRetriesPerRequest while Redis was down) is tried again by the next command: kept, it
  // failed every command of the instance until a restart, Redis back or not.
  const subscribed = sharedSubscription(() => subscriber, cluster.channelOf());
  void subscribed();

  // The backstop: each renew round re-reads the Stream of every session held here.
  const stopBackstop = cluster.onRenewed(() => {
    for (const session of [...held.values()]) void pump(session.key);
  });
  const stopLiveState = publishLiveState(cluster, runtime, reportError);
  const reads = createClusterReads(
    cluster,
    local,
    resolved.defaultApprovalTimeoutMs,
    (key) => heldSession(key)?.rebuilt === true,
  );
  const ownerIndex = createOwnerIndex(redis, cluster.keyPrefix);

  /** Reserves the new session's slot of its owner's quota, cluster-wide (see `redis-owner-index.ts`). */
  const reserve = async ({ ownerId, sessionId }: SessionCommand) => {
    const quota = {
      max: resolved.maxSessionsPerOwner,
      at: resolved.now(),
      holdMs: resolved.sessionReservationMs,
    };
    if ((await ownerIndex.reserve(ownerId, sessionId, quota)) === 'full') {
      throw new HttpError(
        'too_many_sessions',
        `expected at most ${resolved.maxSessionsPerOwner} sessions per owner; delete one first`,
      );
    }
  };

  /**
   * Applies a command here and answers once its effect is durable. A fenced empty write goes
   * with it: an answer that changed nothing (a cancel of a run that ended, say) is then proven
   * by Redis too, so a holder that lost the lease without knowing it yet (woken from a pause
   * before its deadline timer ran, or with a clock slower than Redis's) answers 503
   * `session_moved`, never from stale memory.
   */
  const applyHere = async (key: SessionKey, command: SessionCommand) => {
    let answer: unknown;
    let refusal: { error: unknown } | undefined;
    try {
      answer = await local.execute(command);
    } catch (error) {
      refusal = { error };
    }
    // Rides in the effect's batch, if any. Not after a delete: its effect always writes, and
    // its lease is being given back.
    if (command.type !== 'session.delete') cluster.write(key, { op: 'meta.set', fields: {} });
    await cluster.flushed(key); // a refusal may follow effects (the results before it)
    if (refusal !== undefined) throw refusal.error;
    return answer;
  };

  /** Appends a command to the holder's Stream, nudges the holder, and waits for the answer. */
  const send = async (key: SessionKey, json: string, startedAt: number) => {
    const keys = cluster.keysOf(key);
    const requestId = nanoid();
    traceCommand(requestId, 'b.execute', startedAt);
    traceCommand(requestId, 'b.held');
    const answer = waiters.wait(key, requestId);
    let reply: [string, string | number, string?];
    try {
      reply = (await scripts.addCommand(
        keys.commands,
        keys.lease,
        resolved.maxPendingCommands,
        requestId,
        cluster.instanceId,
        json,
        resolved.nudgeHolders ? cluster.channelOf('') : '',
        toCommandNudgeHead(key, { requestId, instanceId: cluster.instanceId, json }),
      )) as typeof reply;
    } catch (error) {
      waiters.abandon(requestId, error);
      return answer;
    }
    traceCommand(requestId, 'b.added');
    if (reply[0] === 'full') {
      waiters.abandon(
        requestId,
        new HttpError(
          'session_queue_full',
          `expected at most ${resolved.maxPendingCommands} commands waiting for the instance that holds session ${JSON.stringify(key.sessionId)}; retry later`,
        ),
      );
      return answer;
    }
    // The script nudged the holder when another instance holds the session.
    const holder = reply[2] ?? '';
    if (holder === '') {
      elsewhere.forget(key);
      takeOver(key); // the holder's lease ended meanwhile
    } else if (holderOf(holder) === cluster.instanceId) {
      elsewhere.forget(key);
      void pump(key);
    } else elsewhere.note(key);
    return answer;
  };

  const execute = async (command: SessionCommand): Promise<unknown> => {
    const startedAt = traceNow();
    const json = JSON.stringify(command);
    if (Buffer.byteLength(json, 'utf8') > resolved.maxCommandBytes) {
      throw new HttpError(
        'payload_too_large',
        `expected a command of at most ${resolved.maxCommandBytes} bytes of JSON, got ${Buffer.byteLength(json, 'utf8')}`,
      );
    }
    await subscribed();
    const key: SessionKey = { ownerId: command.ownerId, sessionId: command.sessionId };
    const creates = command.type === 'session.create';
    if (creates) await reserve(command);
    const deleted =
      command.type === 'session.delete'
        ? await reads.findSession(command.ownerId, command.sessionId)
        : undefined;
    let answer: unknown;
    try {
      // Seen held by another instance a moment ago: straight to its Stream (see holder-hints.ts).
      const grant =
        !draining && cluster.fenceOf(key) === undefined && elsewhere.isElsewhere(key)
          ? ({ acquired: false, holder: '' } as const)
          : await ensureHeld(key);
      answer = grant.acquired
        ? await applyHere(key, command)
        : fromAnswerJson(await send(key, json, startedAt));
    } catch (error) {
      // Refused (the id was taken, say): the slot goes back. Unknown (a timeout): it expires.
      if (creates && error instanceof HttpError) {
        await ownerIndex.release(key.ownerId, key.sessionId).catch(() => undefined);
      }
      throw error;
    }
    // Indexing a creation drops its reservation. The command is applied whatever happens here:
    // a lost index write is repaired when the session's lease is next taken.
    await reads.indexAnswer(command, answer, deleted).catch(reportError);
    return answer;
  };

  return {
    findSession: reads.findSession,
    listSessions: reads.listSessions,
    viewSession: reads.viewSession,
    getRun: reads.getRun,
    events: reads.events,
    idempotencyKeys: reads.idempotencyKeys,
    execute: execute as SessionAccess['execute'],
    get ready() {
      return subscribed();
    },
    hold: async (key) => (await ensureHeld(key)).acquired,
    drain() {
      draining = true;
    },
    async close() {
      stopBackstop();
      stopLiveState();
      waiters.close();
      await subscriber.quit().catch(() => subscriber.disconnect());
    },
  };
}
