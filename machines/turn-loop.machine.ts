/**
 * The TurnLoop machine: turns a stream of pushed items into turns, one run per turn, with
 * preemption, stop escalation and checkpoint bookkeeping (docs/architecture.md, "TurnLoop", §9). Semantics follow
 * Eino ADK's TurnLoop, stricter where Eino has holes.
 *
 * @remarks
 * Two parallel regions:
 * - `loop`: `idle → loading → turn (planning → running)
 *   → next turn | waiting | exiting → exited`;
 * - `stop`: `open → idleWaiting → committed → closed`. Once `committed` the buffer is closed:
 *   every later push is refused (a late item). `committed` is also entered on an error exit,
 *   so the buffer is always closed before it is taken.
 *
 * A push is one event: the strategy's decision, the buffer write and the resulting cancel all
 * happen inside it, so there is no check-then-act window. The strategy itself (a user
 * function) reaches the machine wrapped by the runtime as `decide(turnId)`; it is called once,
 * while the event is processed.
 *
 * The machine is pure: the world reaches it through logic the runtime supplies with
 * `turnLoopMachine.provide(...)`:
 * - actors `loadCheckpoint`, `turn` (genInput or genResume, then prepareAgent, then one run
 *   plus onAgentEvents), `saveCheckpoint`, `deleteCheckpoint`, `timer`
 *   (absolute time) and `idleClock` (relative: idleness restarts whenever the loop is idle);
 * - action `settleAcks` (resolve push acknowledgements).
 * A cancel reaches the running turn as a `turn.cancel` command sent to the invoked `turn`
 * child; XState delivers it before `send()` returns, so it is still part of the same step.
 *
 * Item arrays in context (`buffer`, `dropped`) are appended to in place: copying a
 * 10,000-item buffer on every push would make a busy loop quadratic. Every other field is
 * replaced, never mutated. The context keeps at most 16 top-level fields: XState's `assign`
 * copies it with `Object.assign({}, …)`, which V8 (Node 20) makes ~15× slower from 20
 * properties on (measured: 0.3 µs → 4.5 µs per copy), and a push is one such copy.
 *
 * Times are absolute clock milliseconds carried by events. The delayed-preempt and grace
 * deadlines are kept in context as absolute times (xstate #5331: `after` timers are not
 * restored). The idle clock alone is relative, by nature: it restarts whenever the loop
 * becomes idle, and a checkpoint is only written at exit, never for a live, idle loop.
 *
 * Checkpoints are written on exit and merged into the live actor on load (one
 * `xstate.done.actor` event), rather than by restoring an actor from the saved snapshot: the
 * loop takes pushes before `run()` and while the checkpoint loads, and a second actor would
 * leave a window where a push lands in the one being replaced.
 *
 * @module
 */
import { assign, enqueueActions, fromCallback, fromPromise, not, setup, stateIn } from 'xstate';
import type { EventObject } from 'xstate';
import { CancelMode, type CancelModeValue, type CancelRequest } from './cancel-request.js';

/** How a stop treats the running turn: escalation order afterTurn < graceful < immediate. */
export type StopMode = 'afterTurn' | 'graceful' | 'immediate';

const stopRank: Record<StopMode, number> = { afterTurn: 0, graceful: 1, immediate: 2 };

/** A preempt as a push asks for it, already validated by the runtime. */
export interface PreemptSpec {
  /** Safe-point bits (1..3); never 0: a preempt always waits for a safe point. */
  readonly mode: CancelModeValue;
  /** Escalate to an immediate, recursive cancel after this many ms. */
  readonly timeoutMs: number | undefined;
  /** Deliver the preempt this many ms after the push, to the turn current at push time. */
  readonly delayMs: number | undefined;
}

/** What a push's strategy decided (the runtime catches and validates the user's answer). */
export type PushDecision =
  | { readonly ok: true; readonly preempt: PreemptSpec | undefined }
  | { readonly ok: false; readonly error: unknown };

/** What the machine made of the latest push, tagged with that push's `seq`. */
export type PushReceipt = {
  readonly seq: number;
  readonly outcome: 'accepted' | 'refused' | { readonly error: unknown };
};

/**
 * Identifies one push. A push sent while the loop is in the middle of a step (re-entrantly,
 * from user code the step called) is queued by XState and would be answered too late; the
 * runtime then sets `withdrawn` before the machine sees it, and the machine ignores it.
 */
export interface PushToken {
  readonly seq: number;
  withdrawn: boolean;
}

/** One `stop()` call, with defaults resolved by the runtime. */
export interface StopCall {
  readonly mode: StopMode;
  readonly graceMs: number | undefined;
  readonly idleForMs: number | undefined;
  readonly cause: string | undefined;
  readonly skipCheckpoint: boolean;
}

/** The merge of every stop call so far: escalates, never de-escalates. */
export interface StopRequest {
  readonly mode: StopMode;
  /** Absolute time at which a graceful stop escalates to immediate. */
  readonly graceDeadlineAt: number | undefined;
  /** The first idle duration asked for; only used while the stop phase is `idleWaiting`. */
  readonly idleForMs: number | undefined;
  /** The first non-empty cause wins. */
  readonly cause: string | undefined;
  /** Sticky: once true, stays true. */
  readonly skipCheckpoint: boolean;
}

/** A pending resume, from a mid-turn checkpoint. */
export interface ResumeState {
  readonly interrupted: readonly unknown[];
  readonly unhandled: readonly unknown[];
  readonly agentState: unknown;
}

/** The plan of a turn, as genInput or genResume answered it (checked against the taken items). */
export interface TurnPlan {
  readonly input: unknown;
  readonly consumed: readonly unknown[];
  readonly remaining: readonly unknown[];
  readonly dropped: readonly unknown[];
}

/** The turn being planned or run. */
export interface TurnRecord {
  readonly turnId: string;
  /** `resume`: planned by genResume from a mid-turn checkpoint. */
  readonly kind: 'input' | 'resume';
  readonly phase: 'planning' | 'running';
  /** Buffer items taken for planning, in push order. */
  readonly taken: readonly unknown[];
  /** Preempted items handed to genInput as `preemptedItems` (with `requeuePreempted`). */
  readonly takenRequeued: readonly unknown[];
  /** For a resume: the pending resume, restored if the plan is undone. */
  readonly resume: ResumeState | undefined;
  /** Set when the turn's run has started (the plan arrives with `turn.started`). */
  readonly plan: TurnPlan | undefined;
  readonly runId: string | undefined;
  /** Preempts pushed before the run started, merged; delivered at `turn.started`. */
  readonly pendingPreempt: CancelRequestDraft | undefined;
  /** Acks resolved when the turn starts or the plan ends. */
  readonly waitingAcks: readonly number[];
}

/** A preempt not yet turned into a cancel request (its deadline needs the delivery time). */
export interface CancelRequestDraft {
  readonly mode: CancelModeValue;
  readonly timeoutMs: number | undefined;
}

/** A preempt pushed with `preemptDelayMs`, bound to one turn. */
export interface DelayedPreempt {
  readonly id: number;
  readonly turnId: string;
  /** Absolute time the preempt is due. */
  readonly fireAt: number;
  readonly draft: CancelRequestDraft;
  readonly ackId: number | undefined;
}

/** How a turn ended, as the `turn` logic reports it. */
export interface TurnEnding {
  readonly status: 'COMPLETED' | 'FAILED' | 'CANCELLED';
  /**
   * What onAgentEvents returned or threw (with the default handler: the run's error for a
   * FAILED run); `undefined` when nothing, or when it was the turn's own cancellation.
   */
  readonly error: unknown;
  /** For a CANCELLED run: the error that describes the cancellation. */
  readonly cancelError: unknown;
  /** The state the agent passed to its latest `ctx.safePoint(kind, state)`. */
  readonly agentState: unknown;
  /** Whether a preempt of this loop contributed to the run's cancel request. */
  readonly preemptContributed: boolean;
  /**
   * Whether the run's agent was ever invoked. A run cancelled while it still waited in its
   * session (behind a run that is not the loop's) consumed nothing.
   */
  readonly agentStarted: boolean;
  /**
   * onAgentEvents returned before the run ended and nothing else had cancelled it, so the loop
   * cancelled the run itself: the turn counts as finished.
   */
  readonly endedByHandler: boolean;
}

/** Why the loop is exiting and what the exiting turn left behind. */
export interface LoopEnding {
  /** `stop`: the loop was stopped (a checkpoint may be saved); `error`: it failed. */
  readonly cause: 'stop' | 'error';
  /** `undefined` for a clean stop; else the error. */
  readonly reason: unknown;
  /** Items of a turn that did not finish. */
  readonly interrupted: readonly unknown[];
  readonly agentState: unknown;
}

/** The exit bookkeeping, computed once the buffer is closed. */
export interface LoopExit {
  readonly cause: 'stop' | 'error';
  readonly reason: unknown;
  readonly unhandled: readonly unknown[];
  readonly interrupted: readonly unknown[];
  readonly agentState: unknown;
  /** Whether a checkpoint written now would be `mid-turn`. */
  readonly midTurn: boolean;
}

/** What the loop machine remembers. */
export interface TurnLoopContext {
  /** Fixed at creation. */
  readonly settings: TurnLoopInput;
  /** `run()` was called: only then is the store ever read or written. */
  readonly ran: boolean;
  /** Pushed items not yet taken by a plan, in order (appended in place). */
  readonly buffer: unknown[];
  /** Items of preempted turns, handed to the next genInput (with `requeuePreempted`). */
  readonly requeued: readonly unknown[];
  /** Items genInput / genResume returned in neither `consumed` nor `remaining` (appended in place). */
  readonly dropped: unknown[];
  /** Turns planned so far; turn ids are `turn-<n>` and continue across a checkpoint. */
  readonly turnSeq: number;
  readonly turn: TurnRecord | undefined;
  readonly resume: ResumeState | undefined;
  /** Set by a push and at the end of a turn; cleared when a plan starts. */
  readonly needsPlanning: boolean;
  readonly stop: StopRequest | undefined;
  /** Mirrors the stop region being `committed`: the buffer takes no more pushes. */
  readonly closed: boolean;
  /** Preempts pushed with `preemptDelayMs`, not yet due; `seq` numbers them. */
  readonly delayed: { readonly seq: number; readonly pending: readonly DelayedPreempt[] };
  readonly lastPush: PushReceipt | undefined;
  readonly ending: LoopEnding | undefined;
  readonly exit: LoopExit | undefined;
  readonly checkpoint: CheckpointState;
}

/** The loop's dealings with its store. */
export interface CheckpointState {
  /** A checkpoint was loaded and is still in the store (not yet deleted or overwritten). */
  readonly loaded: boolean;
  /** A save was attempted on exit. */
  readonly attempted: boolean;
  /** What the save (or the delete of the consumed checkpoint) failed with. */
  readonly error: unknown;
}

/** What the runtime gives the machine at creation. */
export interface TurnLoopInput {
  /** A store and a checkpointId are configured. */
  readonly hasStore: boolean;
  readonly requeuePreempted: boolean;
}

/** Events the loop machine accepts. `at` is the clock time the runtime read. */
export type TurnLoopEvent =
  | {
      type: 'loop.push';
      token: PushToken;
      item: unknown;
      at: number;
      ackId: number | undefined;
      preempt: PreemptSpec | undefined;
      /** The wrapped strategy: called once, inside this event. */
      decide: ((turnId: string | undefined) => PushDecision) | undefined;
    }
  | { type: 'loop.run' }
  | { type: 'loop.stop'; at: number; call: StopCall }
  | { type: 'loop.preempt_due'; id: number }
  | { type: 'loop.idle_due' }
  /** The turn was planned and its run started, in one step (there is no window between). */
  | { type: 'turn.started'; turnId: string; runId: string; at: number; plan: TurnPlan }
  /** genInput (or genResume) consumed nothing: no run. */
  | { type: 'turn.skipped'; turnId: string; plan: TurnPlan }
  | { type: 'turn.ended'; turnId: string; ending: TurnEnding }
  /** Planning failed (genInput, genResume or prepareAgent threw) or the run could not start. */
  | { type: 'turn.failed'; turnId: string; error: unknown };

/** What a loaded, validated checkpoint brings into the loop. */
export interface LoadedCheckpoint {
  readonly kind: 'between-turns' | 'mid-turn';
  readonly unhandled: readonly unknown[];
  readonly interrupted: readonly unknown[];
  readonly agentState: unknown;
  readonly turnSeq: number;
}

/**
 * Input of the `turn` logic: plan with genInput (`input`) or genResume (`resume`), then
 * prepareAgent with what the plan consumed, then start one run and follow it to settlement.
 */
export type TurnInput =
  | {
      readonly kind: 'input';
      readonly turnId: string;
      readonly items: readonly unknown[];
      readonly preemptedItems: readonly unknown[];
    }
  | {
      readonly kind: 'resume';
      readonly turnId: string;
      readonly interrupted: readonly unknown[];
      readonly unhandled: readonly unknown[];
      readonly newItems: readonly unknown[];
      readonly agentState: unknown;
    };

/** Input of the `saveCheckpoint` logic. */
export interface SaveCheckpointInput {
  readonly kind: 'between-turns' | 'mid-turn';
  readonly unhandled: readonly unknown[];
  readonly interrupted: readonly unknown[];
  readonly agentState: unknown;
}

/** Input of the `timer` logic: send `event` back once the clock reaches `at`. */
export interface LoopTimerInput {
  readonly at: number;
  readonly event: TurnLoopEvent;
}

/**
 * Sent to the invoked `turn` child: cancel the turn's run with `request`. The built-in `sendTo`
 * delivers it at the end of the same macrostep, before `send()` returns to the caller.
 */
export interface TurnCancelCommand {
  readonly type: 'turn.cancel';
  readonly request: CancelRequest;
  readonly by: 'preempt' | 'stop';
}

// ---- pure helpers -------------------------------------------------------------------------------

/** Merges one stop call into the pending request: escalates, never de-escalates. */
export function mergeStop(
  pending: StopRequest | undefined,
  call: StopCall,
  at: number,
): StopRequest {
  const graceDeadlineAt = call.graceMs === undefined ? undefined : at + call.graceMs;
  if (pending === undefined) {
    return {
      mode: call.mode,
      graceDeadlineAt,
      idleForMs: call.idleForMs,
      cause: call.cause === '' ? undefined : call.cause,
      skipCheckpoint: call.skipCheckpoint,
    };
  }
  return {
    mode: stopRank[call.mode] > stopRank[pending.mode] ? call.mode : pending.mode,
    graceDeadlineAt:
      pending.graceDeadlineAt === undefined
        ? graceDeadlineAt
        : graceDeadlineAt === undefined
          ? pending.graceDeadlineAt
          : Math.min(pending.graceDeadlineAt, graceDeadlineAt),
    idleForMs: pending.idleForMs ?? call.idleForMs,
    cause: pending.cause ?? (call.cause === '' ? undefined : call.cause),
    skipCheckpoint: pending.skipCheckpoint || call.skipCheckpoint,
  };
}

/** Why a stop cancels: `turn loop stopped`, with the stop's cause when it has one. */
export function stopReason(stop: StopRequest | undefined): string {
  return stop?.cause === undefined ? 'turn loop stopped' : `turn loop stopped: ${stop.cause}`;
}

/** The cancel a committed stop sends to the running turn, or `undefined` for `afterTurn`. */
export function stopCancelRequest(stop: StopRequest): CancelRequest | undefined {
  if (stop.mode === 'afterTurn') return undefined;
  const reason = stopReason(stop);
  return stop.mode === 'immediate'
    ? {
        mode: CancelMode.Immediate,
        deadlineAt: undefined,
        recursive: true,
        cause: 'cancel',
        reason,
      }
    : {
        mode: CancelMode.AnySafePoint,
        deadlineAt: stop.graceDeadlineAt,
        recursive: true,
        cause: 'cancel',
        reason,
      };
}

/** A preempt's cancel request, delivered at `at`: a timeout makes it escalate and recursive. */
export function preemptCancelRequest(draft: CancelRequestDraft, at: number): CancelRequest {
  return {
    mode: draft.mode,
    deadlineAt: draft.timeoutMs === undefined ? undefined : at + draft.timeoutMs,
    recursive: draft.timeoutMs !== undefined,
    cause: 'preempt',
    reason: 'preempted by a pushed item',
  };
}

/** Merges two undelivered preempts: bits OR, the shortest timeout wins. */
export function mergeDrafts(
  pending: CancelRequestDraft | undefined,
  next: CancelRequestDraft,
): CancelRequestDraft {
  if (pending === undefined) return next;
  const timeoutMs =
    pending.timeoutMs === undefined
      ? next.timeoutMs
      : next.timeoutMs === undefined
        ? pending.timeoutMs
        : Math.min(pending.timeoutMs, next.timeoutMs);
  return { mode: pending.mode | next.mode, timeoutMs };
}

const hasWork = (context: TurnLoopContext): boolean =>
  context.resume !== undefined ||
  (context.needsPlanning && (context.buffer.length > 0 || context.requeued.length > 0));

/** The turn a push's strategy sees: only a turn whose run has started. */
const strategyTurnId = (context: TurnLoopContext): string | undefined =>
  context.turn?.phase === 'running' ? context.turn.turnId : undefined;

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
     * Placeholder: plans the turn (genInput or genResume, checked against the items, then
     * prepareAgent) and starts its run, answering `turn.started` (with the plan), `turn.skipped`
     * (nothing consumed) or `turn.failed`; then `turn.ended` once the run has settled.
     */
    turn: fromCallback<TurnCancelCommand, TurnInput>(() => undefined),
    saveCheckpoint: fromPromise<void, SaveCheckpointInput>(() => Promise.resolve()),
    deleteCheckpoint: fromPromise<void>(() => Promise.resolve()),
    /** Placeholder: sends `event` back when the clock reaches `at`. */
    timer: fromCallback<EventObject, LoopTimerInput>(() => undefined),
    /** Placeholder: sends `loop.idle_due` after `idleForMs` of uninterrupted idleness. */
    idleClock: fromCallback<EventObject, { idleForMs: number }>(() => undefined),
  },
  actions: {
    /** Placeholder: resolves the acks of these pushes. */
    settleAcks: (_, _ackIds: readonly number[]) => undefined,

    recordStop: assign(({ context, event }) => {
      if (event.type !== 'loop.stop') return {};
      return { stop: mergeStop(context.stop, event.call, event.at) };
    }),

    startPlan: assign(({ context }) => {
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
    }),

    /** The turn's run started with this plan: remaining items go back to the front of the buffer, dropped are reported. */
    applyPlan: assign(({ context, event }) => {
      const turn = context.turn;
      if (turn === undefined || event.type !== 'turn.started') return {};
      const { plan } = event;
      context.dropped.push(...plan.dropped);
      return { buffer: [...plan.remaining, ...context.buffer], turn: { ...turn, plan } };
    }),

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
      return {
        closed: true,
        exit: {
          cause: ending.cause,
          reason: ending.reason,
          unhandled: [...(resume?.unhandled ?? []), ...context.requeued, ...context.buffer],
          interrupted,
          agentState: resume === undefined ? ending.agentState : resume.agentState,
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
     * A turn consumed its items (it finished, was preempted, or its handler ended it) while the
     * loaded checkpoint is still stored: the checkpoint is used up (mid-turn: the resume ran;
     * between-turns: its items are being consumed, the rest are in the buffer), and left in the
     * store it would offer consumed items again after an error exit. A turn that ends the loop
     * (an error, a stop) leaves the store to the exit.
     */
    loadedCheckpointUsed: ({ context, event }) => {
      if (event.type !== 'turn.ended' || !context.checkpoint.loaded) return false;
      const { ending } = event;
      if (ending.error !== undefined) return false;
      if (ending.status !== 'CANCELLED' || ending.endedByHandler) return true;
      return ending.preemptContributed && ending.agentStarted && !context.closed;
    },
    mustSave: ({ context }) =>
      context.ran &&
      context.settings.hasStore &&
      context.exit?.cause === 'stop' &&
      context.stop?.skipCheckpoint !== true &&
      (context.exit.unhandled.length > 0 || context.exit.midTurn),
    mustDelete: ({ context }) =>
      context.ran &&
      context.settings.hasStore &&
      context.exit?.cause === 'stop' &&
      context.checkpoint.loaded,
  },
});

// Actions that enqueue other named actions are typed against the ones declared before them.
const effectsSetup = loopSetup.extend({
  actions: {
    /** Forgets the turn: its undelivered preempts found nothing to preempt. */
    releaseTurn: loopSetup.createAction(
      enqueueActions(({ context, enqueue }) => {
        const turn = context.turn;
        if (turn === undefined) return;
        const bound = context.delayed.pending.filter((d) => d.turnId === turn.turnId);
        const ackIds = [
          ...turn.waitingAcks,
          ...bound.flatMap((d) => (d.ackId === undefined ? [] : [d.ackId])),
        ];
        for (const d of bound) enqueue.stopChild(`preempt-${d.id}`);
        enqueue.assign({
          turn: undefined,
          delayed: {
            seq: context.delayed.seq,
            pending: context.delayed.pending.filter((d) => d.turnId !== turn.turnId),
          },
        });
        if (ackIds.length > 0) enqueue({ type: 'settleAcks', params: ackIds });
      }),
    ),

    acceptPush: loopSetup.createAction(
      enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'loop.push' || event.token.withdrawn) return;
        const { seq } = event.token;
        const decision: PushDecision =
          event.decide === undefined
            ? { ok: true, preempt: event.preempt }
            : event.decide(strategyTurnId(context));
        if (!decision.ok) {
          enqueue.assign({ lastPush: { seq, outcome: { error: decision.error } } });
          return;
        }
        context.buffer.push(event.item);
        enqueue.assign({ lastPush: { seq, outcome: 'accepted' }, needsPlanning: true });
        const preempt = decision.preempt;
        const ackIds = event.ackId === undefined ? [] : [event.ackId];
        const turn = context.turn;
        if (preempt === undefined || turn === undefined) {
          // Nothing to preempt (no preempt asked, or the loop is idle): the item runs next turn.
          if (ackIds.length > 0) enqueue({ type: 'settleAcks', params: ackIds });
          return;
        }
        const draft: CancelRequestDraft = { mode: preempt.mode, timeoutMs: preempt.timeoutMs };
        if (preempt.delayMs !== undefined && preempt.delayMs > 0) {
          const id = context.delayed.seq + 1;
          const fireAt = event.at + preempt.delayMs;
          enqueue.assign({
            delayed: {
              seq: id,
              pending: [
                ...context.delayed.pending,
                { id, turnId: turn.turnId, fireAt, draft, ackId: event.ackId },
              ],
            },
          });
          enqueue.spawnChild('timer', {
            id: `preempt-${id}`,
            input: { at: fireAt, event: { type: 'loop.preempt_due', id } },
          });
          return;
        }
        if (turn.phase === 'running') {
          enqueue.sendTo('turn', {
            type: 'turn.cancel',
            request: preemptCancelRequest(draft, event.at),
            by: 'preempt',
          });
          if (ackIds.length > 0) enqueue({ type: 'settleAcks', params: ackIds });
          return;
        }
        // Planning: delivered when the turn's run starts.
        enqueue.assign({
          turn: {
            ...turn,
            pendingPreempt: mergeDrafts(turn.pendingPreempt, draft),
            waitingAcks: [...turn.waitingAcks, ...ackIds],
          },
        });
      }),
    ),

    refusePush: loopSetup.createAction(
      enqueueActions(({ event, enqueue }) => {
        if (event.type !== 'loop.push' || event.token.withdrawn) return;
        enqueue.assign({ lastPush: { seq: event.token.seq, outcome: 'refused' } });
        if (event.ackId !== undefined) enqueue({ type: 'settleAcks', params: [event.ackId] });
      }),
    ),

    firePreempt: loopSetup.createAction(
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
        const ackIds = due.ackId === undefined ? [] : [due.ackId];
        const turn = context.turn;
        if (turn === undefined || turn.turnId !== due.turnId) {
          if (ackIds.length > 0) enqueue({ type: 'settleAcks', params: ackIds });
          return;
        }
        if (turn.phase === 'running') {
          enqueue.sendTo('turn', {
            type: 'turn.cancel',
            request: preemptCancelRequest(due.draft, due.fireAt),
            by: 'preempt',
          });
          if (ackIds.length > 0) enqueue({ type: 'settleAcks', params: ackIds });
          return;
        }
        enqueue.assign({
          turn: {
            ...turn,
            pendingPreempt: mergeDrafts(turn.pendingPreempt, due.draft),
            waitingAcks: [...turn.waitingAcks, ...ackIds],
          },
        });
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

    recordRunStart: loopSetup.createAction(
      enqueueActions(({ context, event, enqueue }) => {
        const turn = context.turn;
        if (event.type !== 'turn.started' || turn === undefined) return;
        enqueue.assign({
          turn: { ...turn, phase: 'running', runId: event.runId, pendingPreempt: undefined },
        });
        if (turn.pendingPreempt !== undefined) {
          enqueue.sendTo('turn', {
            type: 'turn.cancel',
            request: preemptCancelRequest(turn.pendingPreempt, event.at),
            by: 'preempt',
          });
        }
        if (turn.waitingAcks.length > 0) enqueue({ type: 'settleAcks', params: turn.waitingAcks });
      }),
    ),
  },
});

/**
 * The TurnLoop machine definition. Bind it with {@link turnLoopMachine}`.provide({ actors,
 * actions })`; `createTurnLoop` does.
 */
export const turnLoopMachine = effectsSetup
  .extend({
    actions: {
      /** genInput consumed nothing: no turn; the loop waits for a new push. */
      applyEmptyPlan: effectsSetup.createAction(
        enqueueActions(({ context, event, enqueue }) => {
          const turn = context.turn;
          if (turn === undefined || event.type !== 'turn.skipped') return;
          const { plan } = event;
          context.dropped.push(...plan.dropped);
          enqueue.assign({ buffer: [...plan.remaining, ...context.buffer] });
          enqueue('releaseTurn');
        }),
      ),

      /** Puts everything a plan took back where it was, in order (stop or failure while planning). */
      undoPlan: effectsSetup.createAction(
        enqueueActions(({ enqueue }) => {
          enqueue('unplanTurn');
          enqueue('releaseTurn');
        }),
      ),

      /**
       * A turn's run settled. Decides the fate of its consumed items and whether the loop goes on.
       * Stop beats preempt: when the loop is closed, a cancelled turn is the stop's, whoever asked
       * first. A turn cancelled before its agent ever ran (its run still waited in the session)
       * consumed nothing: it is unplanned, and its items and resume are offered again.
       */
      endTurn: effectsSetup.createAction(
        enqueueActions(({ context, event, enqueue }) => {
          const turn = context.turn;
          if (event.type !== 'turn.ended' || turn?.plan === undefined) return;
          const { ending } = event;
          const cancelled = ending.status === 'CANCELLED' && !ending.endedByHandler;
          const neverRan = cancelled && !ending.agentStarted;
          // What a stop or an error leaves interrupted: the items an agent was working on.
          const interrupted = ending.status === 'CANCELLED' && !neverRan ? turn.plan.consumed : [];
          const agentState = neverRan ? undefined : (ending.agentState ?? turn.resume?.agentState);
          if (neverRan) enqueue('unplanTurn');
          if (ending.error !== undefined) {
            enqueue.assign({
              ending: { cause: 'error', reason: ending.error, interrupted, agentState },
            });
          } else if (cancelled) {
            if (context.closed) {
              // Nothing ran: a clean stop, the items are unhandled.
              const reason = neverRan ? undefined : ending.cancelError;
              enqueue.assign({ ending: { cause: 'stop', reason, interrupted, agentState } });
            } else if (ending.preemptContributed) {
              if (!neverRan && context.settings.requeuePreempted) {
                enqueue.assign({ requeued: [...context.requeued, ...turn.plan.consumed] });
              }
            } else {
              // Cancelled by someone else (a direct cancel, a timeout, a runtime shutdown).
              enqueue.assign({
                ending: { cause: 'error', reason: ending.cancelError, interrupted, agentState },
              });
            }
          }
          enqueue.assign({ needsPlanning: true });
          enqueue('releaseTurn');
        }),
      ),
    },
  })
  .createMachine({
    id: 'turnLoop',
    type: 'parallel',
    context: ({ input }) => ({
      settings: { hasStore: input.hasStore, requeuePreempted: input.requeuePreempted },
      ran: false,
      buffer: [],
      requeued: [],
      dropped: [],
      turnSeq: 0,
      turn: undefined,
      resume: undefined,
      needsPlanning: false,
      stop: undefined,
      closed: false,
      delayed: { seq: 0, pending: [] },
      lastPush: undefined,
      ending: undefined,
      exit: undefined,
      checkpoint: { loaded: false, attempted: false, error: undefined },
    }),
    on: {
      'loop.preempt_due': { actions: 'firePreempt' },
    },
    states: {
      loop: {
        initial: 'idle',
        states: {
          /** Created, `run()` not called yet: pushes are buffered. */
          idle: {
            always: { guard: 'closed', target: 'exiting', actions: 'stopEnding' },
            on: {
              'loop.run': [
                { guard: 'hasStore', target: 'loading', actions: assign({ ran: true }) },
                { target: 'route', actions: assign({ ran: true }) },
              ],
            },
          },
          /** Reading the checkpoint. A stop waits for it, so that it is merged and saved again. */
          loading: {
            invoke: {
              src: 'loadCheckpoint',
              onDone: { target: 'route', actions: 'mergeCheckpoint' },
              onError: { target: 'exiting', actions: 'failWith' },
            },
          },
          /** Transient: exit, plan the next turn, or wait. */
          route: {
            always: [
              { guard: 'endsLoop', target: 'exiting' },
              { guard: 'closed', target: 'exiting', actions: 'stopEnding' },
              { guard: 'hasWork', target: 'turn' },
              { target: 'waiting' },
            ],
          },
          /** Running and idle: nothing to plan. A push or a stop moves on. */
          waiting: {
            always: [
              { guard: 'closed', target: 'exiting', actions: 'stopEnding' },
              { guard: 'hasWork', target: 'turn' },
            ],
          },
          /**
           * One turn: planned (genInput or genResume, then prepareAgent), then one run of its
           * agent, until the run has settled and onAgentEvents returned. One invocation does it
           * all and reports the plan with the run's start, in one step.
           */
          turn: {
            entry: 'startPlan',
            invoke: {
              id: 'turn',
              src: 'turn',
              input: ({ context }): TurnInput => {
                const turn = context.turn as TurnRecord;
                return turn.kind === 'resume'
                  ? {
                      kind: 'resume',
                      turnId: turn.turnId,
                      interrupted: turn.resume?.interrupted ?? [],
                      unhandled: turn.resume?.unhandled ?? [],
                      newItems: turn.taken,
                      agentState: turn.resume?.agentState,
                    }
                  : {
                      kind: 'input',
                      turnId: turn.turnId,
                      items: turn.taken,
                      preemptedItems: turn.takenRequeued,
                    };
              },
            },
            initial: 'planning',
            states: {
              /** A stop undoes the plan: the taken items go back where they were, in order. */
              planning: {
                always: {
                  guard: 'closed',
                  target: '#turnLoop.loop.exiting',
                  actions: ['undoPlan', 'stopEnding'],
                },
                on: {
                  'turn.started': {
                    target: 'running',
                    actions: ['applyPlan', 'recordRunStart', 'cancelForStop'],
                  },
                  'turn.skipped': { target: '#turnLoop.loop.route', actions: 'applyEmptyPlan' },
                  'turn.failed': {
                    target: '#turnLoop.loop.exiting',
                    actions: ['undoPlan', 'failWith'],
                  },
                },
              },
              running: {
                on: {
                  'turn.ended': [
                    {
                      guard: 'loadedCheckpointUsed',
                      target: '#turnLoop.loop.discarding',
                      actions: 'endTurn',
                    },
                    { target: '#turnLoop.loop.route', actions: 'endTurn' },
                  ],
                },
              },
            },
          },
          /**
           * The first turn after a load consumed its items: the checkpoint is deleted before
           * anything else. A failing delete is reported as `checkpointError`, not as the exit
           * reason; the loop goes on and tries again after its next turn, and at exit.
           */
          discarding: {
            invoke: {
              src: 'deleteCheckpoint',
              onDone: { target: 'route', actions: 'forgetLoaded' },
              onError: {
                target: 'route',
                actions: assign(({ context, event }) => ({
                  checkpoint: { ...context.checkpoint, error: event.error },
                })),
              },
            },
          },
          exiting: {
            entry: 'closeAndCollect',
            initial: 'deciding',
            states: {
              deciding: {
                always: [
                  { guard: 'mustSave', target: 'saving' },
                  { guard: 'mustDelete', target: 'deleting' },
                  { target: '#turnLoop.loop.exited' },
                ],
              },
              saving: {
                invoke: {
                  src: 'saveCheckpoint',
                  input: ({ context }): SaveCheckpointInput => ({
                    kind: context.exit?.midTurn === true ? 'mid-turn' : 'between-turns',
                    unhandled: context.exit?.unhandled ?? [],
                    interrupted: context.exit?.interrupted ?? [],
                    agentState: context.exit?.agentState,
                  }),
                  onDone: {
                    target: '#turnLoop.loop.exited',
                    actions: assign({
                      checkpoint: { loaded: false, attempted: true, error: undefined },
                    }),
                  },
                  onError: {
                    target: '#turnLoop.loop.exited',
                    actions: assign(({ context, event }) => ({
                      checkpoint: { ...context.checkpoint, attempted: true, error: event.error },
                    })),
                  },
                },
              },
              deleting: {
                invoke: {
                  src: 'deleteCheckpoint',
                  onDone: { target: '#turnLoop.loop.exited', actions: 'forgetLoaded' },
                  onError: {
                    target: '#turnLoop.loop.exited',
                    actions: assign(({ context, event }) => ({
                      checkpoint: { ...context.checkpoint, error: event.error },
                    })),
                  },
                },
              },
            },
          },
          exited: { type: 'final' },
        },
      },
      stop: {
        initial: 'open',
        states: {
          open: {
            always: { guard: 'closed', target: 'committed' },
            on: {
              'loop.push': { actions: 'acceptPush' },
              'loop.stop': [
                { guard: 'isIdleStop', target: 'idleWaiting', actions: 'recordStop' },
                { target: 'committed', actions: 'recordStop' },
              ],
            },
          },
          /** `stop({ idleForMs })`: commits once the loop has been idle that long. */
          idleWaiting: {
            always: { guard: 'closed', target: 'committed' },
            on: {
              'loop.push': { actions: 'acceptPush' },
              'loop.stop': [
                { guard: 'isIdleStop', actions: 'recordStop' },
                { target: 'committed', actions: 'recordStop' },
              ],
            },
            initial: 'busy',
            states: {
              busy: { always: { guard: 'loopIsWaiting', target: 'idle' } },
              idle: {
                always: { guard: not('loopIsWaiting'), target: 'busy' },
                invoke: {
                  src: 'idleClock',
                  input: ({ context }) => ({ idleForMs: context.stop?.idleForMs ?? 0 }),
                },
                on: { 'loop.idle_due': { target: '#turnLoop.stop.committed' } },
              },
            },
          },
          /** The buffer is closed: pushes are refused; later stops can only escalate. */
          committed: {
            entry: [assign({ closed: true }), 'cancelForStop'],
            always: { guard: 'loopExited', target: 'closed' },
            on: {
              'loop.push': { actions: 'refusePush' },
              'loop.stop': { actions: ['recordStop', 'cancelForStop'] },
            },
          },
          closed: { type: 'final' },
        },
      },
    },
  });
