/**
 * The TurnLoop machine's base setup: its types, logic placeholders, the actions that only assign
 * or send, and its guards. `turn-loop.setup.ts` extends it with the actions that enqueue others
 * (pushes, preempt delivery, turn release); the chart in `turn-loop.machine.ts` names them all
 * (docs/architecture.md, "TurnLoop"). Nothing here runs on its own.
 *
 * @module
 */
import { assign, fromCallback, fromPromise, sendTo, setup, stateIn } from 'xstate';
import type { EventObject } from 'xstate';
import { turnMachine } from './turn.machine.js';
import { mergeStop } from './turn-loop.requests.js';
import { planNextTurn, turnEndingEffect } from './turn-loop.rules.js';
import type {
  LoadedCheckpoint,
  LoopTimerInput,
  SaveCheckpointInput,
  TurnLoopContext,
  TurnLoopEvent,
  TurnLoopInput,
  TurnInput,
  TurnRecord,
} from './turn-loop.types.js';

const hasWork = (context: TurnLoopContext): boolean =>
  context.resume !== undefined ||
  (context.needsPlanning && (context.buffer.length > 0 || context.requeued.length > 0));

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

// ---- the machine --------------------------------------------------------------------------------

/** The base of the loop machine's setup (see `turnLoopSetup` in turn-loop.setup.ts). @internal */
export const loopSetup = setup({
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
