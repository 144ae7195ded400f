/**
 * The TurnLoop machine's setup: its logic placeholders, guards and actions, which the chart in
 * `turn-loop.machine.ts` names (docs/architecture.md, "TurnLoop"). Nothing here runs on its own.
 *
 * @module
 */
import { assign, enqueueActions, fromCallback, fromPromise, sendTo, setup, stateIn } from 'xstate';
import type { EventObject } from 'xstate';
import { turnMachine } from './turn.machine.js';
import {
  mergeDrafts,
  mergeStop,
  preemptCancelRequest,
  stopCancelRequest,
  toPreemptDraft,
} from './turn-loop.requests.js';
import type {
  LoadedCheckpoint,
  LoopTimerInput,
  PreemptDraft,
  SaveCheckpointInput,
  TurnLoopContext,
  TurnLoopEvent,
  TurnLoopInput,
  TurnEnding,
  TurnInput,
  TurnRecord,
} from './turn-loop.types.js';

const hasWork = (context: TurnLoopContext): boolean =>
  context.resume !== undefined ||
  (context.needsPlanning && (context.buffer.length > 0 || context.requeued.length > 0));

/**
 * How a turn's ending leaves the loop (the rule `endTurn` applies): whether the loop's own
 * preempt or stop cancelled the run, whether the agent never ran (the turn is unplanned), and
 * whether the loop exits after it (an error, a suspension, a stop's cancel, or a cancel by
 * someone else). @internal
 */
export function turnEndingEffect(ending: TurnEnding, closed: boolean) {
  const cancelled = ending.status === 'CANCELLED' && ending.cancelledBy !== 'handler';
  const neverRan = cancelled && !ending.agentStarted;
  const exits =
    ending.error !== undefined ||
    ending.suspension !== undefined ||
    (cancelled && (closed || ending.cancelledBy !== 'preempt'));
  return { cancelled, neverRan, exits };
}

/** What the turn plans from: the record `startPlan` wrote. */
const turnInputOf = (turn: TurnRecord): TurnInput =>
  turn.kind === 'resume'
    ? {
        kind: 'resume',
        turnId: turn.turnId,
        interrupted: turn.resume?.interrupted ?? [],
        unhandled: turn.resume?.unhandled ?? [],
        newItems: turn.taken,
        agentState: turn.resume?.agentState,
        suspension: turn.resume?.suspension,
      }
    : {
        kind: 'input',
        turnId: turn.turnId,
        items: turn.taken,
        preemptedItems: turn.takenRequeued,
      };

/**
 * The fields that start planning the next turn: its record takes the buffer (and the requeued
 * items or the pending resume), which the loop empties. @internal
 */
export function planNextTurn(context: TurnLoopContext) {
  const turnSeq = context.turnSeq + 1;
  const turn: TurnRecord = {
    turnId: `turn-${turnSeq}`,
    kind: context.resume === undefined ? 'input' : 'resume',
    phase: 'planning',
    taken: context.buffer,
    takenRequeued: context.resume === undefined ? context.requeued : [],
    resume: context.resume,
    plan: undefined,
    runId: undefined,
    pendingPreempt: undefined,
    waitingAcks: [],
  };
  return {
    turnSeq,
    turn,
    buffer: [],
    requeued: context.resume === undefined ? [] : context.requeued,
    resume: undefined,
    needsPlanning: false,
  };
}

// ---- the machine --------------------------------------------------------------------------------

const loopSetup = setup({
  types: {
    context: {} as TurnLoopContext,
    events: {} as TurnLoopEvent,
    input: {} as TurnLoopInput,
  },
  actors: {
    /** Placeholder: reads and validates the checkpoint; `undefined` when there is none. */
    loadCheckpoint: fromPromise<LoadedCheckpoint | undefined>(() => Promise.resolve(undefined)),
    /**
     * The loop's turns (`turn.machine.ts`, bound by the runtime), one actor for all of them: on
     * `turn.begin` it plans a turn and starts its run, answering `turn.started` (with the plan),
     * `turn.skipped` (nothing consumed) or `turn.failed`; then `turn.ended` once the run has
     * settled and onAgentEvents returned.
     */
    turn: turnMachine,
    saveCheckpoint: fromPromise<void, SaveCheckpointInput>(() => Promise.resolve()),
    deleteCheckpoint: fromPromise<void>(() => Promise.resolve()),
    /** Placeholder: sends `event` back when the clock reaches `at`. */
    timer: fromCallback<EventObject, LoopTimerInput>(() => undefined),
    /** Placeholder: sends `loop.idle_due` after `idleForMs` of uninterrupted idleness. */
    idleClock: fromCallback<EventObject, { idleForMs: number }>(() => undefined),
  },
  actions: {
    /** Placeholder: the loop has left this turn; the runtime lets go of it (and of its run). */
    leaveTurn: (_, _turnId: string) => undefined,
    /** Placeholder: resolves the acks of these pushes. */
    settleAcks: (_, _pushIds: readonly number[]) => undefined,

    /**
     * Placeholder (an `assign` the runtime replaces): decides the push, writing `lastPush`:
     * `accepted` with its preempt, or the strategy's error, or `withdrawn`. The runtime finds the
     * push's strategy by `pushId` and calls it here, inside the push's own transition, with the
     * running turn; here a push keeps the preempt it was given. Once the buffer is closed,
     * `refusePush` turns `accepted` into `refused`.
     */
    decidePush: assign(({ event }) => {
      if (event.type !== 'loop.push') return {};
      return { lastPush: { pushId: event.pushId, preempt: event.preempt, outcome: 'accepted' } };
    }),

    recordStop: assign(({ context, event }) => {
      if (event.type !== 'loop.stop') return {};
      return { stop: mergeStop(context.stop, event.call, event.at) };
    }),

    /** The next turn's record: what it takes from the buffer (see {@link planNextTurn}). */
    startPlan: assign(({ context }) => planNextTurn(context)),

    /** The loop's turn actor begins the turn `startPlan` recorded (genInput or genResume first). */
    beginTurn: sendTo('turn', ({ context }) => ({
      type: 'turn.begin' as const,
      input: turnInputOf(context.turn as TurnRecord),
    })),

    /**
     * Puts everything the turn took back where it was, in push order, as if it had never been
     * planned: its taken items at the front of the buffer, its re-offered preempted items, its
     * pending resume. An applied plan (the run started) is taken back first: its `remaining`
     * items left the front of the buffer and its `dropped` ones the end of `dropped` (only pushes,
     * appended at the end, can have happened since).
     */
    unplanTurn: assign(({ context }) => {
      const turn = context.turn;
      if (turn === undefined) return {};
      let buffer = context.buffer;
      if (turn.plan !== undefined) {
        const { remaining, dropped } = turn.plan;
        context.dropped.splice(context.dropped.length - dropped.length, dropped.length);
        buffer = buffer.slice(remaining.length);
      }
      return {
        buffer: [...turn.taken, ...buffer],
        requeued: [...turn.takenRequeued, ...context.requeued],
        resume: turn.resume,
      };
    }),

    mergeCheckpoint: assign(({ context, event }) => {
      if (!('output' in event)) return {};
      const loaded = event.output as LoadedCheckpoint | undefined;
      if (loaded === undefined) return {};
      const turnSeq = Math.max(context.turnSeq, loaded.turnSeq);
      if (loaded.kind === 'between-turns') {
        return {
          checkpoint: { ...context.checkpoint, loaded: true },
          turnSeq,
          buffer: [...loaded.unhandled, ...context.buffer],
          needsPlanning: true,
        };
      }
      return {
        checkpoint: { ...context.checkpoint, loaded: true },
        turnSeq,
        resume: {
          interrupted: loaded.interrupted,
          unhandled: loaded.unhandled,
          agentState: loaded.agentState,
          suspension: loaded.suspension,
        },
      };
    }),

    failWith: assign(({ event }) => ({
      ending: {
        cause: 'error' as const,
        reason: 'error' in event ? event.error : event,
        interrupted: [],
        agentState: undefined,
      },
    })),

    /** A live checkpoint is being saved: the store holds one of this loop from now on. */
    markStored: assign(({ context }) => ({
      checkpoint: { ...context.checkpoint, loaded: true },
    })),

    /** The loaded checkpoint was deleted (an earlier failure to delete it is over). */
    forgetLoaded: assign(({ context }) => ({
      checkpoint: { ...context.checkpoint, loaded: false, error: undefined },
    })),

    stopEnding: assign(({ context }) => ({
      ending: context.ending ?? {
        cause: 'stop' as const,
        reason: undefined,
        interrupted: [],
        agentState: undefined,
      },
    })),

    /** Closes the buffer, then takes it: no accepted push can vanish. */
    closeAndCollect: assign(({ context }) => {
      const ending = context.ending ?? {
        cause: 'error' as const,
        reason: undefined,
        interrupted: [],
        agentState: undefined,
      };
      const resume = context.resume;
      const interrupted = resume?.interrupted ?? ending.interrupted;
      // A pending resume of a suspension keeps its request (not the answer: it was not used).
      const pending = resume?.suspension;
      const suspension =
        pending === undefined
          ? ending.suspension
          : { turnId: pending.turnId, runId: pending.runId, request: pending.request };
      return {
        closed: true,
        exit: {
          cause: ending.cause,
          reason: ending.reason,
          unhandled: [...(resume?.unhandled ?? []), ...context.requeued, ...context.buffer],
          interrupted,
          agentState: resume === undefined ? ending.agentState : resume.agentState,
          suspension,
          midTurn: resume !== undefined || interrupted.length > 0,
        },
        buffer: [],
        requeued: [],
        resume: undefined,
      };
    }),
  },
  guards: {
    closed: ({ context }) => context.closed,
    hasWork: ({ context }) => hasWork(context),
    isIdleStop: ({ event }) => event.type === 'loop.stop' && event.call.idleForMs !== undefined,
    loopIsWaiting: stateIn({ loop: 'waiting' }),
    loopExited: stateIn({ loop: 'exited' }),
    hasStore: ({ context }) => context.settings.hasStore,
    endsLoop: ({ context }) => context.ending !== undefined,
    /**
     * After this `turn.ended`, the loop plans its next turn at once: what `route` would decide
     * once `endTurn` has run (no exit, work pending), known before it for a turn whose agent ran
     * (its items are not unplanned). Saves the loop the `route` microstep between turns.
     */
    nextTurnFollows: ({ context, event }) => {
      const turn = context.turn;
      if (event.type !== 'turn.ended' || turn?.plan === undefined) return false;
      if (context.ending !== undefined || context.closed) return false;
      const { exits, neverRan } = turnEndingEffect(event.ending, context.closed);
      if (exits || neverRan) return false;
      const requeues =
        event.ending.cancelledBy === 'preempt' &&
        context.settings.requeuePreempted &&
        turn.plan.consumed.length > 0;
      return (
        context.resume !== undefined ||
        context.buffer.length > 0 ||
        context.requeued.length > 0 ||
        requeues
      );
    },
    /**
     * A turn consumed its items (it finished, was preempted, or its handler ended it) while the
     * loaded checkpoint is still stored: the checkpoint is used up (mid-turn: the resume ran;
     * between-turns: its items are being consumed, the rest are in the buffer), and left in the
     * store it would offer consumed items again after an error exit. A turn that ends the loop
     * (an error, a stop) leaves the store to the exit.
     */
    loadedCheckpointUsed: ({ context, event }) => {
      if (event.type !== 'turn.ended' || !context.checkpoint.loaded) return false;
      const { ending } = event;
      // A suspended turn's exit saves over the loaded checkpoint.
      if (ending.error !== undefined || ending.suspension !== undefined) return false;
      if (ending.status !== 'CANCELLED' || ending.cancelledBy === 'handler') return true;
      return ending.cancelledBy === 'preempt' && ending.agentStarted && !context.closed;
    },
    mustSave: ({ context }) =>
      context.ran &&
      context.settings.hasStore &&
      context.exit !== undefined &&
      context.exit.cause !== 'error' &&
      context.stop?.skipCheckpoint !== true &&
      (context.exit.unhandled.length > 0 || context.exit.midTurn),
    mustDelete: ({ context }) =>
      context.ran &&
      context.settings.hasStore &&
      context.exit !== undefined &&
      context.exit.cause !== 'error' &&
      context.checkpoint.loaded,
  },
});

/**
 * What releasing the current turn does (`releaseTurn`; `endTurn` applies it in its own step): the
 * delayed-preempt timers bound to the turn to stop, the context to write (with `also` last, which
 * may hold the next turn's record), and the pushes whose acks resolve. `undefined` with no turn.
 * @internal
 */
export function turnRelease(context: TurnLoopContext, also: Partial<TurnLoopContext> | undefined) {
  const turn = context.turn;
  if (turn === undefined) return undefined;
  const { pending } = context.delayed;
  const bound = pending.filter((d) => d.turnId === turn.turnId);
  return {
    stopped: bound.map((d) => `preempt-${d.id}`),
    patch: {
      turn: undefined,
      ...(bound.length === 0
        ? {}
        : {
            delayed: {
              seq: context.delayed.seq,
              pending: pending.filter((d) => d.turnId !== turn.turnId),
            },
          }),
      // Last: it may start the next turn's record (`endTurn` straight into the next turn).
      ...also,
    } satisfies Partial<TurnLoopContext>,
    acks:
      bound.length === 0 ? turn.waitingAcks : [...turn.waitingAcks, ...bound.map((d) => d.pushId)],
  };
}

/** The params of `deliverPreempt`: the preempt, and the pushes whose acks wait for it. */
interface PreemptDelivery {
  readonly draft: PreemptDraft;
  readonly pushIds: readonly number[];
}

// Actions that enqueue other named actions are typed against the ones declared before them.
const deliverySetup = loopSetup.extend({
  actions: {
    /**
     * Delivers a preempt to the current turn, the one place that does: a running turn gets the
     * cancel at once and the pushes' acks resolve; a turn still planning keeps it (merged with
     * any earlier one) until its run starts.
     */
    deliverPreempt: loopSetup.createAction(
      enqueueActions(({ context, enqueue }, params: unknown) => {
        const { draft, pushIds } = params as PreemptDelivery;
        const turn = context.turn;
        if (turn === undefined) return;
        if (turn.phase === 'running') {
          enqueue.sendTo('turn', {
            type: 'turn.cancel',
            request: preemptCancelRequest(draft),
            by: 'preempt',
          });
          if (pushIds.length > 0) enqueue({ type: 'settleAcks', params: pushIds });
          return;
        }
        enqueue.assign({
          turn: {
            ...turn,
            pendingPreempt: mergeDrafts(turn.pendingPreempt, draft),
            waitingAcks: [...turn.waitingAcks, ...pushIds],
          },
        });
      }),
    ),
  },
});

/** The loop machine's setup, with every named action, guard and logic placeholder. @internal */
export const turnLoopSetup = deliverySetup.extend({
  actions: {
    /**
     * Forgets the turn: its undelivered preempts found nothing to preempt. Its params, if any,
     * are more of the context to write in the same assign (each costs XState a snapshot copy),
     * the next turn's record among them.
     */
    releaseTurn: loopSetup.createAction(
      enqueueActions(({ context, enqueue }, params: unknown) => {
        const release = turnRelease(context, params as Partial<TurnLoopContext> | undefined);
        if (release === undefined) return;
        for (const id of release.stopped) enqueue.stopChild(id);
        enqueue.assign(release.patch);
        if (release.acks.length > 0) enqueue({ type: 'settleAcks', params: release.acks });
      }),
    ),

    /** Writes a decided push into the buffer and delivers its preempt (or arms its delay). */
    acceptPush: deliverySetup.createAction(
      enqueueActions(({ context, event, enqueue }) => {
        const receipt = context.lastPush;
        if (event.type !== 'loop.push' || receipt?.pushId !== event.pushId) return;
        if (receipt.outcome !== 'accepted') return;
        const { pushId, at } = event;
        // The hot path of a busy loop: one append in place, and no copy when nothing changes.
        context.buffer.push(event.item);
        if (!context.needsPlanning) enqueue.assign({ needsPlanning: true });
        const preempt = receipt.preempt;
        // No preempt: nothing to deliver (the runtime resolves such a push's ack when it answers).
        if (preempt === undefined) return;
        const turn = context.turn;
        if (turn === undefined) {
          // The loop is idle: nothing to preempt; the item runs next turn.
          enqueue({ type: 'settleAcks', params: [pushId] });
          return;
        }
        const draft = toPreemptDraft(preempt, at);
        if (preempt.delayMs !== undefined && preempt.delayMs > 0) {
          const id = context.delayed.seq + 1;
          const fireAt = at + preempt.delayMs;
          enqueue.assign({
            delayed: {
              seq: id,
              pending: [
                ...context.delayed.pending,
                { id, turnId: turn.turnId, fireAt, draft, pushId },
              ],
            },
          });
          enqueue.spawnChild('timer', {
            id: `preempt-${id}`,
            input: { at: fireAt, event: { type: 'loop.preempt_due', id } },
          });
          return;
        }
        enqueue({ type: 'deliverPreempt', params: { draft, pushIds: [pushId] } });
      }),
    ),

    refusePush: loopSetup.createAction(
      enqueueActions(({ context, event, enqueue }) => {
        const receipt = context.lastPush;
        if (event.type !== 'loop.push' || receipt?.pushId !== event.pushId) return;
        if (receipt.outcome !== 'accepted') return;
        enqueue.assign({ lastPush: { ...receipt, outcome: 'refused' } });
        enqueue({ type: 'settleAcks', params: [event.pushId] });
      }),
    ),

    /** A delayed preempt is due: delivered to its turn if that turn is still current. */
    firePreempt: deliverySetup.createAction(
      enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'loop.preempt_due') return;
        const due = context.delayed.pending.find((d) => d.id === event.id);
        if (due === undefined) return;
        enqueue.assign({
          delayed: {
            seq: context.delayed.seq,
            pending: context.delayed.pending.filter((d) => d.id !== event.id),
          },
        });
        if (context.turn?.turnId !== due.turnId) {
          enqueue({ type: 'settleAcks', params: [due.pushId] });
          return;
        }
        enqueue({ type: 'deliverPreempt', params: { draft: due.draft, pushIds: [due.pushId] } });
      }),
    ),

    /** Sends the committed stop's cancel to a running turn (a no-op for `afterTurn`). */
    cancelForStop: loopSetup.createAction(
      enqueueActions(({ context, enqueue }) => {
        const turn = context.turn;
        const request = context.stop === undefined ? undefined : stopCancelRequest(context.stop);
        if (turn?.phase !== 'running' || request === undefined) return;
        enqueue.sendTo('turn', { type: 'turn.cancel', request, by: 'stop' });
      }),
    ),

    /**
     * The turn's run started with this plan: its remaining items go back to the front of the
     * buffer, its dropped ones are reported, planning is due again once it ends, and preempts
     * parked while it planned are delivered now. One assign: each costs XState a snapshot copy.
     */
    recordRunStart: deliverySetup.createAction(
      enqueueActions(({ context, event, enqueue }) => {
        const turn = context.turn;
        if (event.type !== 'turn.started' || turn === undefined) return;
        const { plan } = event;
        context.dropped.push(...plan.dropped);
        enqueue.assign({
          turn: { ...turn, plan, phase: 'running', runId: event.runId, pendingPreempt: undefined },
          // A running turn always ends with planning due (endTurn): set now, a push while it
          // runs writes nothing but the buffer (and takes the runtime's plain-push path).
          needsPlanning: true,
          ...(plan.remaining.length === 0
            ? {}
            : { buffer: [...plan.remaining, ...context.buffer] }),
        });
        if (turn.pendingPreempt !== undefined) {
          enqueue({
            type: 'deliverPreempt',
            params: { draft: turn.pendingPreempt, pushIds: turn.waitingAcks },
          });
        } else if (turn.waitingAcks.length > 0) {
          enqueue({ type: 'settleAcks', params: turn.waitingAcks });
        }
      }),
    ),
  },
});
