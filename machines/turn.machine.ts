/**
 * The turn machine: the turns of a TurnLoop, one after the other, in one actor the loop invokes
 * (docs/architecture.md, "TurnLoop"). Eino ADK's TurnLoop runs the same steps in one goroutine;
 * here each is a state.
 *
 * @remarks
 * Two parallel regions:
 * - `progress`: `idle → planning → running → handling | suspended → ended`, and from `ended`
 *   (or `idle`) the loop's next `turn.begin` starts the next turn at `planning`, with a fresh
 *   context (`resetTurn`) and the `cancel` region back at `uncancelled`: a turn costs no actor
 *   of its own (its construction, `xstate.init` and stop were a tenth of a preempted turn's
 *   heap). `planning` is genInput (or
 *   genResume), then prepareAgent (the entry action `planTurn`; the turn hears `turn.planned`);
 *   `turn.planned` starts the run (`startRun`) and the loop hears `turn.started`, with the plan
 *   and the run id, in that one microstep (`announceStart`; a run that cannot start raises
 *   `turn.start_failed`, and the turn fails). While `running`, the run executes
 *   (`followRun`, answers `run.settled`) and onAgentEvents reads its events
 *   (`handleEvents`, spawned as `handler`, answers `handler.returned`); `handling` waits for
 *   onAgentEvents once the run has settled. Without onAgentEvents (guard `readsEvents`) no
 *   handler is spawned: `run.settled` carries the default handler's answer and the turn ends in
 *   that step. A handler that returns while its run executes cancels the run. `suspended` is
 *   `handling` for a run whose agent ended it with `ctx.suspend(request)` (Eino's business
 *   interrupt) before any cancel landed: the agent ended the turn, asking for outside input.
 *   Then `turn.ended`. Planning and following the run are actions, not child actors: a turn
 *   without onAgentEvents is one actor (docs/architecture.md, "TurnLoop").
 * - `cancel`: who of the loop cancelled the run: `uncancelled → preempted → stopped`,
 *   `uncancelled → stopped`, or `uncancelled → endedByHandler`. A `turn.cancel` command reaches
 *   the run through `cancelRun`, which records whether it contributed to the run's cancel
 *   request; only a contributing cancel moves the region. The loop's stop overrides its
 *   preempt; a cancel from anyone else (a direct cancel, a timeout, a shutdown) leaves it
 *   `uncancelled`.
 *
 * The run is the session's child, in the runtime's actor system: the turn knows it by run id.
 * Agents are functions, so they never travel in events or context: `planTurn` leaves the agent
 * with the runtime, keyed by turn id. The machine is pure: `createTurnLoop` provides the
 * actions `planTurn`, `startRun`, `followRun`, `cancelRun` and the signal actions, and the
 * actor `handleEvents`.
 *
 * @module
 */
import { assign, enqueueActions, fromCallback, raise, sendParent, setup, stateIn } from 'xstate';
import type { EventObject } from 'xstate';
import { CancelMode } from './cancel-request.js';
import type {
  HandlerResult,
  RunSettlement,
  TurnCancelCommand,
  TurnCanceller,
  TurnEnding,
  TurnInput,
  TurnLoopEvent,
  TurnPlan,
} from './turn-loop.types.js';

/** The latest cancel this turn sent its run, written by `cancelRun`. */
export interface TurnCancelRecord {
  readonly by: TurnCanceller;
  /** The request changed the run's pending cancel (else someone was there first). */
  readonly contributed: boolean;
  readonly reason: string | undefined;
}

/** What the turn machine remembers. */
export interface TurnMachineContext {
  readonly input: TurnInput;
  readonly plan: TurnPlan | undefined;
  /** Written by `startRun`: the started run's id, or why it could not start. */
  readonly runId: string | undefined;
  readonly startError: unknown;
  readonly settlement: RunSettlement | undefined;
  readonly handled: HandlerResult | undefined;
  readonly lastCancel: TurnCancelRecord | undefined;
}

/** Events the turn machine accepts: the loop's cancel, and what its logic reports. */
export type TurnEvent =
  | TurnCancelCommand
  /** The loop starts its next turn with this actor (one turn actor serves all of a loop's turns). */
  | TurnBeginCommand
  /** genInput (or genResume) answered, and prepareAgent if anything was consumed. */
  | { type: 'turn.planned'; plan: TurnPlan }
  /** genInput, genResume or prepareAgent threw. */
  | { type: 'turn.plan_failed'; error: unknown }
  /** Raised: the planned run could not start (`startError`). */
  | { type: 'turn.start_failed' }
  /**
   * The run settled. `handled` is set when no onAgentEvents reads the run's events: the default
   * handler's answer, known from the settlement, so the turn ends in this one step.
   */
  | { type: 'run.settled'; settlement: RunSettlement; handled?: HandlerResult }
  | { type: 'handler.returned'; result: HandlerResult };

/** The loop's command that starts a turn: the turn plans `input` (genInput or genResume). */
export interface TurnBeginCommand {
  readonly type: 'turn.begin';
  readonly input: TurnInput;
}

/** What the turn remembers between turns: nothing of the last one. */
const freshTurn = (input: TurnInput): TurnMachineContext => ({
  input,
  plan: undefined,
  runId: undefined,
  startError: undefined,
  settlement: undefined,
  handled: undefined,
  lastCancel: undefined,
});

/** The input of the turn actor before the loop's first turn (never planned). */
const noTurn: TurnInput = { kind: 'input', turnId: '', items: [], preemptedItems: [] };

/** The cancel a handler that returned early sends its still running run. */
const handlerCancel: TurnCancelCommand = {
  type: 'turn.cancel',
  request: {
    mode: CancelMode.Immediate,
    deadlineAt: undefined,
    recursive: true,
    cause: 'cancel',
    reason: 'onAgentEvents returned before the run ended',
    initiator: 'user',
  },
  by: 'handler',
};

const turnSetup = setup({
  types: {
    context: {} as TurnMachineContext,
    events: {} as TurnEvent,
  },
  actors: {
    /** Placeholder: onAgentEvents over the run's events; answers `handler.returned`. */
    handleEvents: fromCallback<EventObject, { turnId: string; runId: string }>(({ sendBack }) =>
      sendBack({
        type: 'handler.returned',
        result: { error: undefined, isCancellation: false, isSuspension: false },
      }),
    ),
  },
  actions: {
    /**
     * Placeholder: starts planning, outside this step: genInput or genResume (checked against
     * the items), then prepareAgent; the turn hears `turn.planned` or `turn.plan_failed`. Work,
     * not an actor: a turn creates no child to plan (an actor per turn costs its construction,
     * its `xstate.init` step and its registration). The runtime abandons it when the loop leaves
     * the turn.
     */
    planTurn: (_, _input: TurnInput) => undefined,
    /**
     * Placeholder: follows the started run; the turn hears `run.settled` once it has settled.
     * Like `planTurn`, work and not an actor; the runtime stops listening when the loop leaves
     * the turn (and cancels the run if it has not ended).
     */
    followRun: (_, _run: { turnId: string; runId: string }) => undefined,
    /**
     * Placeholder (an `assign` the runtime replaces): on `turn.planned`, starts the run with the
     * event's plan, writing the plan and `runId`, or `startError`.
     */
    startRun: assign(({ context, event }) => {
      if (event.type !== 'turn.planned') return {};
      return { plan: event.plan, runId: `run-${context.input.turnId}`, startError: undefined };
    }),
    /**
     * Placeholder (an `assign` the runtime replaces): sends the command's request to the run and
     * records whether it contributed. Here every cancel contributes.
     */
    cancelRun: assign(({ event }) => {
      if (event.type !== 'turn.cancel') return {};
      return { lastCancel: { by: event.by, contributed: true, reason: event.request.reason } };
    }),
    /** `turn.begin`: the turn forgets the last one and takes the loop's next input. */
    resetTurn: assign(({ event }) => (event.type === 'turn.begin' ? freshTurn(event.input) : {})),
    recordSettlement: assign(({ event }) => {
      if (event.type !== 'run.settled') return {};
      const { settlement, handled } = event;
      return handled === undefined ? { settlement } : { settlement, handled };
    }),
    /** Placeholder: aborts the turn's `preempted` signal. */
    signalPreempted: (_, _reason: string | undefined) => undefined,
    /** Placeholder: aborts the turn's `stopped` signal. */
    signalStopped: (_, _reason: string | undefined) => undefined,
    /** Placeholder: the turn has ended; the runtime forgets what it kept for it. */
    forgetTurn: (_, _turnId: string) => undefined,
  },
  guards: {
    /**
     * Placeholder: onAgentEvents reads the run's events (a `handler` child runs it); without it
     * the run's `run.settled` carries the default handler's answer.
     */
    readsEvents: () => true,
    consumedNothing: ({ event }) =>
      event.type === 'turn.planned' && event.plan.consumed.length === 0,
    landed: ({ context }, by: TurnCanceller) =>
      context.lastCancel?.contributed === true && context.lastCancel.by === by,
    runSettled: ({ context }) => context.settlement !== undefined,
    handlerReturned: ({ context }) => context.handled !== undefined,
    stoppedIt: stateIn({ cancel: 'stopped' }),
    preemptedIt: stateIn({ cancel: 'preempted' }),
    handlerEndedIt: stateIn({ cancel: 'endedByHandler' }),
    agentSuspended: ({ event }) =>
      event.type === 'run.settled' &&
      event.settlement.suspension !== undefined &&
      event.settlement.status !== 'CANCELLED',
    suspendedIt: stateIn({ progress: 'suspended' }),
    settledHandled: ({ event }) => event.type === 'run.settled' && event.handled !== undefined,
  },
});

/**
 * The turn machine definition. Bind it with {@link turnMachine}`.provide({ actors, actions })`;
 * `createTurnLoop` does, and registers it as the loop's `turn` logic.
 */
export const turnMachine = turnSetup
  .extend({
    actions: {
      /** Tells the loop how the turn ended: the run's settlement, the handler's error, who cancelled. */
      reportEnding: turnSetup.createAction(
        enqueueActions(({ context, event, enqueue, check }) => {
          // Ending in the step the run settled in (no onAgentEvents), the event has both.
          const ended =
            event.type === 'run.settled' && event.handled !== undefined ? event : context;
          const settlement = ended.settlement as RunSettlement;
          const handled = ended.handled as HandlerResult;
          const cancelled = settlement.status === 'CANCELLED';
          const suspended = check('suspendedIt');
          const ending: TurnEnding = {
            status: settlement.status,
            // The loop handles its turns' cancellations and suspensions itself.
            error:
              (cancelled && handled.isCancellation) || (suspended && handled.isSuspension)
                ? undefined
                : handled.error,
            cancel: settlement.cancel,
            agentState: settlement.agentState,
            cancelledBy: check('stoppedIt')
              ? 'stop'
              : check('preemptedIt')
                ? 'preempt'
                : check('handlerEndedIt')
                  ? 'handler'
                  : undefined,
            agentStarted: settlement.agentStarted,
            suspension: suspended
              ? {
                  turnId: context.input.turnId,
                  runId: context.runId as string,
                  request: settlement.suspension?.request,
                }
              : undefined,
          };
          enqueue({ type: 'forgetTurn', params: context.input.turnId });
          // The actor serves the loop's next turn: this turn's onAgentEvents reader goes now.
          if (check('readsEvents')) enqueue.stopChild('handler');
          enqueue.sendParent({ type: 'turn.ended', turnId: context.input.turnId, ending });
        }),
      ),
      /**
       * The run has started (`startRun`, in this step): the loop hears it with the plan, the turn
       * follows the run, and onAgentEvents (if any) reads its events. A run that could not start
       * raises `turn.start_failed` instead.
       */
      announceStart: turnSetup.createAction(
        enqueueActions(({ context, enqueue, check }) => {
          const { turnId } = context.input;
          const runId = context.runId;
          if (runId === undefined) {
            enqueue.raise({ type: 'turn.start_failed' });
            return;
          }
          enqueue.sendParent({
            type: 'turn.started',
            turnId,
            runId,
            plan: context.plan as TurnPlan,
          });
          enqueue({ type: 'followRun', params: { turnId, runId } });
          if (check('readsEvents')) {
            enqueue.spawnChild('handleEvents', { id: 'handler', input: { turnId, runId } });
          }
        }),
      ),
      /** Planning failed (genInput, genResume or prepareAgent threw) or the run did not start. */
      reportFailure: turnSetup.createAction(
        enqueueActions(({ context, event, enqueue }) => {
          const error = event.type === 'turn.plan_failed' ? event.error : context.startError;
          enqueue({ type: 'forgetTurn', params: context.input.turnId });
          enqueue.sendParent({ type: 'turn.failed', turnId: context.input.turnId, error });
        }),
      ),
    },
  })
  .createMachine({
    id: 'turn',
    type: 'parallel',
    context: freshTurn(noTurn),
    states: {
      progress: {
        initial: 'idle',
        states: {
          /** Before the loop's first turn. */
          idle: {},
          /** genInput (or genResume), then prepareAgent. */
          planning: {
            entry: { type: 'planTurn', params: ({ context }) => context.input },
            on: {
              'turn.planned': [
                {
                  guard: 'consumedNothing',
                  target: 'ended',
                  actions: sendParent(({ context, event }): TurnLoopEvent => ({
                    type: 'turn.skipped',
                    turnId: context.input.turnId,
                    plan: event.plan,
                  })),
                },
                // The run starts, and the loop hears it with the plan, in this one step.
                { target: 'running', actions: ['startRun', 'announceStart'] },
              ],
              'turn.plan_failed': { target: 'ended', actions: 'reportFailure' },
            },
          },
          /** The run executes; onAgentEvents reads its events. */
          running: {
            on: {
              'turn.start_failed': { target: 'ended', actions: 'reportFailure' },
              'run.settled': [
                {
                  guard: 'agentSuspended',
                  target: 'suspended',
                  actions: 'recordSettlement',
                },
                // No onAgentEvents: the default handler's answer came with the settlement, and
                // the turn ends in this one microstep.
                // Nothing else reads the settlement then: it is not written to context.
                { guard: 'settledHandled', target: 'ended', actions: 'reportEnding' },
                {
                  target: 'handling',
                  actions: 'recordSettlement',
                },
              ],
            },
          },
          /**
           * The agent suspended the turn for outside input (`ctx.suspend(request)`) before any
           * cancel landed; onAgentEvents has not returned yet.
           */
          suspended: {
            always: { guard: 'handlerReturned', target: 'ended', actions: 'reportEnding' },
          },
          /** The run has settled; onAgentEvents has not returned yet. */
          handling: {
            always: { guard: 'handlerReturned', target: 'ended', actions: 'reportEnding' },
          },
          /**
           * The loop has heard how the turn went (or that it was skipped or failed). Not a final
           * state: nothing waits for the region to be done, and a final one would cost the turn
           * one more microstep (`xstate.done.state`) as it ends.
           */
          ended: {},
        },
        on: {
          // The loop's next turn, in the actor that ran the last one (from `idle` or `ended`).
          'turn.begin': { target: '.planning', actions: 'resetTurn' },
          'handler.returned': [
            {
              guard: 'runSettled',
              actions: assign(({ event }) => ({ handled: event.result })),
            },
            {
              // A handler that returns before its run has settled does not leave the run behind.
              actions: [assign(({ event }) => ({ handled: event.result })), raise(handlerCancel)],
            },
          ],
        },
      },
      cancel: {
        initial: 'uncancelled',
        on: {
          'turn.cancel': { actions: 'cancelRun' },
          'turn.begin': { target: '.uncancelled' },
        },
        states: {
          uncancelled: {
            always: [
              { guard: { type: 'landed', params: 'stop' }, target: 'stopped' },
              { guard: { type: 'landed', params: 'preempt' }, target: 'preempted' },
              { guard: { type: 'landed', params: 'handler' }, target: 'endedByHandler' },
            ],
          },
          preempted: {
            entry: { type: 'signalPreempted', params: ({ context }) => context.lastCancel?.reason },
            always: { guard: { type: 'landed', params: 'stop' }, target: 'stopped' },
          },
          stopped: {
            entry: { type: 'signalStopped', params: ({ context }) => context.lastCancel?.reason },
          },
          /** onAgentEvents returned before the run ended and nothing else had cancelled it. */
          endedByHandler: {},
        },
      },
    },
  });
