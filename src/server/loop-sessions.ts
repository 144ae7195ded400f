/**
 * Loop sessions: a session with `mode: "loop"` is driven by a TurnLoop (docs/architecture.md,
 * "Loop sessions"; Eino's TurnLoop behind AgentScope's session API). A `user.message` is an
 * item: logged first (durable when the POST answers), then pushed; the messages that arrive
 * while a turn runs are consumed together by the next turn; `preempt` cancels the current turn
 * at its next safe point, escalating after the session's `grace_ms`. On shutdown the loops stop
 * gracefully and checkpoint. On start only the loops that may owe an answer (the session's
 * `loop_owes` mark: a message was logged and its loop has not settled since) are rebuilt from
 * their log and checkpoint, at once; a settled session's loop is built on its next message.
 * No HTTP here: `session-events.ts` calls {@link LoopSessions.push}.
 *
 * @module
 */
import { nanoid } from 'nanoid';
import { CancelMode } from '../../machines/cancel-request.js';
import { ShuttingDownError, TurnCancelledError } from '../errors.js';
import type { SessionKey } from '../events/event-log.js';
import type { Agent } from '../run/agent.js';
import type { Runtime } from '../runtime/create-runtime.js';
import type { CheckpointStore } from '../stores/checkpoint-store.js';
import type { RunRecords } from '../stores/run-records.js';
import type { SessionRecords } from '../stores/session-records.js';
import { createTurnLoop } from '../turn-loop/create-turn-loop.js';
import type { GenInputResult, TurnLoop, TurnLoopExit } from '../turn-loop/turn-loop-types.js';
import { loopItemsOf, loopLogTypes, type LoopItem } from './loop-session-log.js';
import { toRecordOutcome } from './session-events.js';

/** What the loop sessions need. */
export interface LoopSessionsOptions {
  readonly runtime: Runtime;
  /**
   * The agent of every turn: its input is the turn's messages, joined by a blank line; a turn
   * resumed from a mid-turn checkpoint gets `{ resume: state }`, the state its cut run passed to
   * its last `ctx.safePoint(kind, state)` (the ReAct agent understands it).
   */
  readonly agent: Agent<never, unknown>;
  /** Where turns' runs are recorded (created when the turn starts, finished when it settles). */
  readonly runs: RunRecords;
  /** Where sessions are kept: the loop sessions to resume on start, and whether each may owe. */
  readonly sessions: SessionRecords;
  /** Where loops checkpoint on shutdown; none: a loop's state does not outlive the process. */
  readonly store?: CheckpointStore | undefined;
  /** How long a loop with nothing to do stays in memory, in ms. @default 60000 */
  readonly idleMs?: number;
  /** Receives failures nobody waits for (a store write after the answer, a loop defect). */
  readonly reportError: (error: unknown) => void;
}

/** The loop sessions of one service. */
export interface LoopSessions {
  /**
   * Logs a `user.message` with a new item id, then pushes the item into the session's loop
   * (started if needed).
   *
   * @param key - the session
   * @param message - the text, whether it preempts, and the session's grace (the preempt's
   *   escalation deadline), in ms
   * @returns the item id
   * @throws `RunplaneError` (`STORE_FAILED`) when the log append fails (nothing is pushed)
   */
  push(key: SessionKey, message: { text: string; preempt: boolean; graceMs: number }): string;
  /**
   * Starts the loop of every loop session that has work left: messages no finished turn
   * answered (rebuilt from the log, e.g. after `kill -9`) or a checkpoint (after a shutdown).
   * Only sessions marked as possibly owing are read (`SessionRecords.listLoops({ owing: true })`,
   * listed when the loop sessions are created); a message to one of them before its turn comes
   * rebuilds it first. A session found owing nothing is unmarked.
   *
   * @returns the number of loops started
   */
  resumeAll(): Promise<number>;
  /**
   * Stops every loop gracefully: each turn is cancelled at its next safe point (immediately
   * after `graceMs`), and loops that leave items checkpoint them. Logs `session.loop_stopped`.
   */
  stopAll(options: { graceMs: number }): Promise<void>;
  /** Stops a deleted session's loop at once (no checkpoint) and deletes its checkpoint. */
  remove(key: SessionKey): Promise<void>;
  /**
   * @internal A cluster's new lease holder: rebuilds the session's loop from its log and
   * checkpoint, as `resumeAll` does at start, if either says it owes an answer.
   *
   * @returns whether a loop started
   * @throws what the log or checkpoint read threw (the session stays to be rebuilt on its next message)
   */
  resume(key: SessionKey): Promise<boolean>;
  /**
   * @internal A cluster instance that lost the session's lease: stops its loop at once, writing
   * nothing (no checkpoint, no log line: the next holder resumes from what Redis holds).
   */
  abandon(key: SessionKey): Promise<void>;
  /** Whether the session's loop is in memory (or being rebuilt). */
  has(key: SessionKey): boolean;
  /** How many messages of a session wait for a turn to take them (logged, not yet consumed). */
  waitingItems(key: SessionKey): number;
  /** How many loops are in memory. */
  readonly size: number;
}

interface LoopHost {
  readonly key: SessionKey;
  readonly loop: TurnLoop<LoopItem>;
  /** Set when the service stopped the loop itself (shutdown, delete): no restart. */
  stopping: boolean;
  readonly exited: Promise<void>;
}

const keyOf = ({ ownerId, sessionId }: SessionKey) => JSON.stringify([ownerId, sessionId]);
/** The checkpoint id of a session's loop. */
const checkpointIdOf = ({ ownerId, sessionId }: SessionKey) =>
  `loop:${JSON.stringify([ownerId, sessionId])}`;
const uncancellable = new AbortController().signal;

/** Keeps the first item of each id, in order; the rest are duplicates. */
function uniqueItems(items: readonly LoopItem[], skip: ReadonlySet<string>): LoopItem[] {
  const seen = new Set(skip);
  const unique: LoopItem[] = [];
  for (const item of items) {
    if (seen.has(item.itemId)) continue;
    seen.add(item.itemId);
    unique.push(item);
  }
  return unique;
}

const textOf = (items: readonly LoopItem[]) => items.map((item) => item.text).join('\n\n');

/**
 * Creates the loop sessions of a service.
 *
 * @param options - {@link LoopSessionsOptions}
 * @returns the {@link LoopSessions}
 */
export function createLoopSessions(options: LoopSessionsOptions): LoopSessions {
  const { runtime, runs, store, reportError } = options;
  const agent = options.agent as Agent<unknown, unknown>;
  const idleMs = options.idleMs ?? 60_000;
  const hosts = new Map<string, LoopHost>();
  /** The ids of each session's messages no turn has taken yet (what bounds a loop's buffer). */
  const waiting = new Map<string, Set<string>>();
  const hold = (key: SessionKey, items: readonly LoopItem[]) => {
    let ids = waiting.get(keyOf(key));
    if (ids === undefined) waiting.set(keyOf(key), (ids = new Set()));
    for (const item of items) ids.add(item.itemId);
  };
  const taken = (key: SessionKey, items: readonly LoopItem[]) => {
    const ids = waiting.get(keyOf(key));
    for (const item of items) ids?.delete(item.itemId);
    if (ids?.size === 0) waiting.delete(keyOf(key));
  };
  /**
   * Sessions whose loop restarts (its old checkpoint being deleted) or is being rebuilt from its
   * log: the items sent meanwhile.
   */
  const restarting = new Map<string, LoopItem[]>();
  /**
   * Sessions that may owe an answer, found when the service is built (before it takes
   * requests), whose loop is not rebuilt yet.
   */
  const unrebuilt = new Map<string, SessionKey>(
    options.sessions.listLoops({ owing: true }).map((key) => [keyOf(key), key]),
  );
  /** Sessions this process has marked as possibly owing (so a message writes the mark once). */
  const owing = new Set<string>();
  /** Marks whether a session's loop may owe an answer; an unmarking that fails is reported. */
  const markOwes = (key: SessionKey, owes: boolean) => {
    if (owes) {
      if (owing.has(keyOf(key))) return;
      options.sessions.markLoopOwes(key.ownerId, key.sessionId, true);
      owing.add(keyOf(key));
      return;
    }
    owing.delete(keyOf(key));
    try {
      options.sessions.markLoopOwes(key.ownerId, key.sessionId, false);
    } catch (error) {
      reportError(error); // it stays marked: the next start reads its log once more
    }
  };

  /** Records a turn's run and its outcome; the loop goes on whatever the run's end. */
  const followTurn = async (key: SessionKey, runId: string, consumed: readonly LoopItem[]) => {
    taken(key, consumed);
    const run = runtime.runs.find(key.ownerId, key.sessionId, runId);
    try {
      runs.create({ runId, ...key, input: textOf(consumed), at: runtime.clock.now() });
    } catch (error) {
      reportError(error);
    }
    if (run === undefined) return undefined;
    const outcome = await run.termination;
    try {
      runs.finish(runId, toRecordOutcome(outcome), runtime.clock.now());
    } catch (error) {
      reportError(error);
    }
    // A failed turn is in the log (`run.failed`); the session's next message gets a new turn.
    return undefined;
  };

  const start = (key: SessionKey, items: readonly LoopItem[], done: ReadonlySet<string>) => {
    hold(key, items);
    const loop = createTurnLoop<LoopItem, unknown>({
      runtime,
      ...key,
      itemIdOf: (item) => item.itemId,
      genInput(offered): GenInputResult<LoopItem> {
        // Items answered before a restart, or offered twice (log and checkpoint), are dropped.
        const consumed = uniqueItems(offered, done);
        return { input: textOf(consumed), consumed };
      },
      genResume({ interrupted, unhandled, newItems, agentState }): GenInputResult<LoopItem> {
        const consumed = uniqueItems(interrupted, done);
        const taken = new Set([...done, ...consumed.map((item) => item.itemId)]);
        return {
          input: agentState === undefined ? textOf(consumed) : { resume: agentState },
          consumed,
          remaining: uniqueItems([...unhandled, ...newItems], taken),
        };
      },
      prepareAgent: () => agent,
      onAgentEvents: (turn) => followTurn(key, turn.runId, turn.consumed),
      ...(store === undefined ? {} : { store, checkpointId: checkpointIdOf(key) }),
    });
    for (const item of items) loop.push(item);
    loop.run();
    // Out of memory once idle; a later message starts it again. No cause: a shutdown's wins.
    loop.stop({ idleForMs: idleMs });
    const host: LoopHost = {
      key,
      loop,
      stopping: false,
      exited: loop.wait().then((exit) => onExit(key, host, exit)),
    };
    hosts.set(keyOf(key), host);
    return host;
  };

  /** A loop ended: by the service's stop, idle, or a turn cancelled from outside. */
  const onExit = async (key: SessionKey, host: LoopHost, exit: TurnLoopExit<LoopItem>) => {
    const id = keyOf(key);
    if (hosts.get(id) === host) hosts.delete(id);
    if (host.stopping) return;
    const cancelled = exit.exitReason instanceof TurnCancelledError;
    if (exit.exitReason !== undefined && !cancelled) reportError(exit.exitReason);
    // The runtime stops: no turn can start; what is owed stays in the log for the next start.
    if (exit.exitReason instanceof ShuttingDownError) return;
    // Items sent while the loop exited were refused (late): they go on, after the unhandled.
    const left = [...exit.unhandledItems, ...exit.takeLateItems()];
    if (exit.exitReason === undefined || store === undefined) {
      if (left.length > 0) start(key, left, new Set());
      // Settled (idle) with nothing left: the next start need not read this session.
      else if (exit.exitReason === undefined) markOwes(key, false);
      return;
    }
    // A turn cancelled from outside (`user.interrupt`) ends Eino's loop: its items are answered
    // (the user stopped it) and a checkpoint it resumed is used up; the rest go on in a new
    // loop, which must not load that checkpoint.
    restarting.set(id, left);
    try {
      await store.delete({ signal: uncancellable }, checkpointIdOf(key));
    } catch (error) {
      reportError(error);
    }
    const items = restarting.get(id);
    restarting.delete(id);
    if (items !== undefined && items.length > 0) start(key, items, new Set());
    else if (items !== undefined) markOwes(key, false);
  };

  const stopHost = async (key: SessionKey, host: LoopHost, graceMs: number) => {
    host.stopping = true;
    host.loop.stop({ mode: 'graceful', graceMs, cause: 'shutdown', initiator: 'shutdown' });
    const exit = await host.loop.wait();
    await host.exited;
    const interrupted = exit.interruptedItems.map((item) => item.itemId);
    const unhandled = [...exit.unhandledItems, ...exit.takeLateItems()].map((i) => i.itemId);
    if (interrupted.length === 0 && unhandled.length === 0) {
      if (exit.exitReason === undefined) markOwes(key, false);
      return;
    }
    try {
      appendLoopStopped(key, exit, interrupted, unhandled);
    } catch (error) {
      // Reported: without this line the next start counts the cut turn as answered.
      reportError(error);
    }
  };

  const appendLoopStopped = (
    key: SessionKey,
    exit: TurnLoopExit<LoopItem>,
    interrupted: string[],
    unhandled: string[],
  ) => {
    runtime.eventLog.append({}, key, {
      type: 'session.loop_stopped',
      payload: {
        cause: 'shutdown',
        interrupted_item_ids: interrupted,
        unhandled_item_ids: unhandled,
        checkpoint:
          exit.checkpointError !== undefined
            ? 'failed'
            : exit.checkpointAttempted
              ? 'saved'
              : 'none',
      },
      at: runtime.clock.now(),
    });
  };

  /**
   * Rebuilds a session's loop from its log and checkpoint, if either says it owes an answer;
   * messages sent meanwhile wait in `restarting`. @returns whether a loop started
   */
  const rebuild = async (key: SessionKey): Promise<boolean> => {
    const id = keyOf(key);
    unrebuilt.delete(id);
    restarting.set(id, []);
    let found: { pending: LoopItem[]; done: Set<string>; checkpointed: boolean };
    try {
      const events = await runtime.eventLog.read({}, key, { types: loopLogTypes });
      const checkpoint =
        store === undefined
          ? undefined
          : await store.get({ signal: uncancellable }, checkpointIdOf(key));
      found = { ...loopItemsOf(events), checkpointed: checkpoint !== undefined };
    } catch (error) {
      // Not rebuilt: the session stays marked and is tried again on its next message; the
      // messages sent meanwhile are in its log, read then.
      if (restarting.delete(id)) unrebuilt.set(id, key);
      throw error;
    }
    const meanwhile = restarting.get(id);
    restarting.delete(id);
    if (meanwhile === undefined) return false; // deleted meanwhile
    const { done, checkpointed } = found;
    // The log read may or may not hold the messages sent meanwhile: each is offered once.
    const pending = uniqueItems([...found.pending, ...meanwhile], done);
    if (pending.length === 0 && !checkpointed) {
      markOwes(key, false);
      return false;
    }
    owing.add(id);
    start(key, pending, done);
    return true;
  };

  return {
    push(key, { text, preempt, graceMs }) {
      const itemId = `item_${nanoid()}`;
      // Marked first, then logged: a message the log holds is never behind an unmarked session.
      markOwes(key, true);
      // Logged first: the message is durable before anything runs it.
      runtime.eventLog.append({}, key, {
        type: 'user.message',
        payload: { item_id: itemId, text, preempt },
        at: runtime.clock.now(),
      });
      const item: LoopItem = { itemId, text };
      hold(key, [item]);
      // A session that may owe from before the start, not rebuilt yet: rebuilt now, from a log
      // that already holds this message.
      if (unrebuilt.has(keyOf(key))) {
        rebuild(key).catch(reportError);
        return itemId;
      }
      const queued = restarting.get(keyOf(key));
      if (queued !== undefined) {
        queued.push(item); // no turn runs: nothing to preempt
        return itemId;
      }
      const host = hosts.get(keyOf(key));
      if (host === undefined) {
        start(key, [item], new Set());
        return itemId;
      }
      // Refused only while the loop exits: it is then a late item, and `onExit` carries it on.
      host.loop.push(
        item,
        preempt ? { preempt: CancelMode.AnySafePoint, preemptTimeoutMs: graceMs } : {},
      );
      return itemId;
    },

    async resumeAll() {
      let started = 0;
      for (const key of [...unrebuilt.values()]) {
        if (!unrebuilt.has(keyOf(key))) continue; // a message rebuilt it first
        try {
          if (await rebuild(key)) started++;
        } catch (error) {
          reportError(error);
        }
      }
      return started;
    },

    async stopAll({ graceMs }) {
      await Promise.all([...hosts.values()].map((host) => stopHost(host.key, host, graceMs)));
    },

    async remove(key) {
      restarting.delete(keyOf(key));
      unrebuilt.delete(keyOf(key));
      waiting.delete(keyOf(key));
      const host = hosts.get(keyOf(key));
      if (host !== undefined) {
        host.stopping = true;
        host.loop.stop({ mode: 'immediate', cause: 'deleted', skipCheckpoint: true });
        await host.exited;
      }
      await store?.delete({ signal: uncancellable }, checkpointIdOf(key));
    },

    async resume(key) {
      if (hosts.has(keyOf(key)) || restarting.has(keyOf(key))) return false;
      return rebuild(key);
    },

    async abandon(key) {
      const id = keyOf(key);
      restarting.delete(id);
      unrebuilt.delete(id);
      waiting.delete(id);
      owing.delete(id);
      const host = hosts.get(id);
      if (host === undefined) return;
      host.stopping = true;
      host.loop.stop({ mode: 'immediate', cause: 'owner_lost', skipCheckpoint: true });
      await host.exited;
    },

    has: (key) => hosts.has(keyOf(key)) || restarting.has(keyOf(key)),

    waitingItems(key) {
      return waiting.get(keyOf(key))?.size ?? 0;
    },

    get size() {
      return hosts.size;
    },
  };
}
