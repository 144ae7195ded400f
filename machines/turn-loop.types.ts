/**
 * The shapes of the TurnLoop machine and its turn machine: context, events, and what their
 * invoked logic takes and answers (docs/architecture.md, "TurnLoop"). The charts are in
 * `turn-loop.machine.ts` and `turn.machine.ts`.
 *
 * @module
 */
import type { CancelModeValue, CancelRequest, RunInitiator } from './cancel-request.js';

/** How a stop treats the running turn: escalation order afterTurn < graceful < immediate. */
export type StopMode = 'afterTurn' | 'graceful' | 'immediate';

/** A preempt as a push asks for it, already validated by the runtime. */
export interface PreemptSpec {
  /** Safe-point bits (1..3); never 0: a preempt always waits for a safe point. */
  readonly mode: CancelModeValue;
  /** Escalate to an immediate, recursive cancel this many ms after the push (plus its delay). */
  readonly timeoutMs: number | undefined;
  /** Deliver the preempt this many ms after the push, to the turn current at push time. */
  readonly delayMs: number | undefined;
}

/**
 * What the loop made of the latest push. `decidePush` writes it (`accepted`, with the push's
 * preempt as given or as its strategy answered; or the strategy's error; or `withdrawn`), and
 * `refusePush` turns `accepted` into `refused` once the buffer is closed.
 */
export interface PushReceipt {
  readonly pushId: number;
  readonly preempt: PreemptSpec | undefined;
  readonly outcome: 'accepted' | 'refused' | 'withdrawn' | { readonly error: unknown };
}

/** One `stop()` call, with defaults resolved by the runtime. */
export interface StopCall {
  readonly mode: StopMode;
  readonly graceMs: number | undefined;
  readonly idleForMs: number | undefined;
  readonly cause: string | undefined;
  readonly skipCheckpoint: boolean;
  /** Who asks: the initiator of the cancel the stop sends its turn. */
  readonly initiator: StopInitiator;
}

/** Who may ask a TurnLoop to stop: its user, or the host shutting down. */
export type StopInitiator = Extract<RunInitiator, 'user' | 'shutdown'>;

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
  /** `shutdown` once any stop call says so (it escalates, as `mode` does), else `user`. */
  readonly initiator: StopInitiator;
}

/**
 * A turn suspended by its agent for outside input (`ctx.suspend(request)`, Eino's business
 * interrupt): which turn and run, and what it asked for (JSON data).
 */
export interface TurnSuspension {
  readonly turnId: string;
  readonly runId: string;
  readonly request: unknown;
}

/** A suspension being resumed: the request, and the answer `run({ answer })` brought (if any). */
export interface ResumedSuspension extends TurnSuspension {
  readonly answer: unknown;
}

/** A pending resume, from a mid-turn checkpoint. */
export interface ResumeState {
  readonly interrupted: readonly unknown[];
  readonly unhandled: readonly unknown[];
  readonly agentState: unknown;
  /** Set when the checkpoint was saved by a suspended turn. */
  readonly suspension?: ResumedSuspension | undefined;
}

/** The plan of a turn, as genInput or genResume answered it (checked against the taken items). */
export interface TurnPlan {
  readonly input: unknown;
  readonly consumed: readonly unknown[];
  readonly remaining: readonly unknown[];
  readonly dropped: readonly unknown[];
}

/**
 * A preempt not yet delivered to a run. Its escalation deadline is an absolute time fixed at
 * the push (Eino's preempt timeout): a preempt parked while the next turn plans keeps it.
 */
export interface PreemptDraft {
  readonly mode: CancelModeValue;
  /** Absolute clock time (ms) of the escalation to an immediate, recursive cancel. */
  readonly deadlineAt: number | undefined;
}

/** The turn being planned or run, as the loop sees it. */
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
  readonly pendingPreempt: PreemptDraft | undefined;
  /** Pushes whose acks resolve when the turn starts or the plan ends. */
  readonly waitingAcks: readonly number[];
}

/** A preempt pushed with `preemptDelayMs`, bound to one turn. */
export interface DelayedPreempt {
  readonly id: number;
  readonly turnId: string;
  /** Absolute time the preempt is due. */
  readonly fireAt: number;
  readonly draft: PreemptDraft;
  readonly pushId: number;
}

/** Who cancelled a turn's run, as the turn machine's `cancel` region says. */
export type TurnCanceller = 'preempt' | 'stop' | 'handler';

/** How a cancelled run was cancelled: the data of its `TurnCancelledError`, built at exit. */
export interface TurnCancelInfo {
  readonly kind: 'turn-cancelled';
  readonly runId: string;
  readonly turnId: string;
  readonly cause: CancelRequest['cause'];
  readonly reason: string | undefined;
  readonly escalated: boolean;
}

/** How a turn's run settled, as the `followRun` logic reports it. */
export interface RunSettlement {
  readonly status: 'COMPLETED' | 'FAILED' | 'CANCELLED';
  /** For a CANCELLED run: its cause, reason and whether it escalated. */
  readonly cancel: TurnCancelInfo | undefined;
  /** The state the agent passed to its latest `ctx.safePoint(kind, state)`. */
  readonly agentState: unknown;
  /**
   * Whether the run's agent was ever invoked. A run cancelled while it still waited in its
   * session (behind a run that is not the loop's) consumed nothing.
   */
  readonly agentStarted: boolean;
  /** What the agent asked for with `ctx.suspend(request)`, if it suspended. */
  readonly suspension?: { readonly request: unknown } | undefined;
}

/** What onAgentEvents answered, as the `handleEvents` logic reports it. */
export interface HandlerResult {
  /**
   * What onAgentEvents returned or threw (with the default handler: the run's error for a
   * FAILED run); `undefined` when nothing.
   */
  readonly error: unknown;
  /** The error is a cancellation: for a cancelled run it is the turn's own, not a failure. */
  readonly isCancellation: boolean;
  /** The error is the run's own `RunSuspendedError`: for a suspended turn, not a failure. */
  readonly isSuspension?: boolean;
}

/** How a turn ended, as the turn machine reports it to the loop. */
export interface TurnEnding {
  readonly status: 'COMPLETED' | 'FAILED' | 'CANCELLED';
  /** The handler's error, `undefined` when none or when it was the turn's own cancellation. */
  readonly error: unknown;
  /** For a CANCELLED run: the cancel that happened. */
  readonly cancel: TurnCancelInfo | undefined;
  readonly agentState: unknown;
  /** Who of this loop cancelled the run first (a stop overrides a preempt), if anyone. */
  readonly cancelledBy: TurnCanceller | undefined;
  readonly agentStarted: boolean;
  /** Set when the agent ended the turn by suspending it (and no cancel won first). */
  readonly suspension?: TurnSuspension | undefined;
}

/** Why the loop is exiting and what the exiting turn left behind. */
export interface LoopEnding {
  /**
   * `stop`: the loop was stopped (a checkpoint may be saved); `suspend`: a turn suspended for
   * outside input (a checkpoint is saved); `error`: it failed.
   */
  readonly cause: LoopEndCause;
  /** `undefined` for a clean stop; else the error, or a {@link TurnCancelInfo}. */
  readonly reason: unknown;
  /** Items of a turn that did not finish. */
  readonly interrupted: readonly unknown[];
  readonly agentState: unknown;
  /** For `suspend`: the suspended turn and its request. */
  readonly suspension?: TurnSuspension | undefined;
}

/** Why the loop ends. */
export type LoopEndCause = 'stop' | 'suspend' | 'error';

/** The exit bookkeeping, computed once the buffer is closed. */
export interface LoopExit {
  readonly cause: LoopEndCause;
  readonly reason: unknown;
  readonly unhandled: readonly unknown[];
  readonly interrupted: readonly unknown[];
  readonly agentState: unknown;
  /** A suspended turn (this exit's, or a pending resume's that never ran). */
  readonly suspension: TurnSuspension | undefined;
  /** Whether a checkpoint written now would be `mid-turn`. */
  readonly midTurn: boolean;
}

/** The loop's dealings with its store. */
export interface CheckpointState {
  /**
   * A checkpoint of this loop is in the store, not yet deleted or overwritten: it was loaded, or
   * saved by `loop.checkpoint()`.
   */
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
  /** Who the loop is, for inspectors: its session and its id (its checkpointId, else generated). */
  readonly ownerId: string;
  readonly sessionId: string;
  readonly loopId: string;
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
  /** Set by a push, when a turn's run starts and when it ends; cleared when a plan starts. */
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

/** Events the loop machine accepts. `at` is the clock time the runtime read. */
export type TurnLoopEvent =
  | {
      type: 'loop.push';
      /** Numbers the push; a push strategy is found by it (`decidePush`). */
      pushId: number;
      item: unknown;
      at: number;
      preempt: PreemptSpec | undefined;
    }
  | { type: 'loop.run' }
  | { type: 'loop.stop'; at: number; call: StopCall }
  | { type: 'loop.preempt_due'; id: number }
  | { type: 'loop.idle_due' }
  /** `loop.checkpoint()` is saving the live loop: a checkpoint of it is in the store. */
  | { type: 'loop.checkpointing' }
  /** The turn was planned and its run started, in one step (there is no window between). */
  | { type: 'turn.started'; turnId: string; runId: string; plan: TurnPlan }
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
  /** A suspended turn's request, with the answer given to `run({ answer })`. */
  readonly suspension?: ResumedSuspension | undefined;
}

/**
 * Input of a turn: plan with genInput (`input`) or genResume (`resume`), then prepareAgent with
 * what the plan consumed, then start one run and follow it to settlement.
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
      readonly suspension: ResumedSuspension | undefined;
    };

/** Input of the `saveCheckpoint` logic. */
export interface SaveCheckpointInput {
  readonly kind: 'between-turns' | 'mid-turn';
  readonly unhandled: readonly unknown[];
  readonly interrupted: readonly unknown[];
  readonly agentState: unknown;
  readonly suspension?: TurnSuspension | undefined;
}

/** Input of the `timer` logic: send `event` back once the clock reaches `at`. */
export interface LoopTimerInput {
  readonly at: number;
  readonly event: TurnLoopEvent;
}

/**
 * Sent to the `turn` child: cancel the turn's run with `request`. The built-in `sendTo`
 * delivers it at the end of the same macrostep, before `send()` returns to the caller.
 */
export interface TurnCancelCommand {
  readonly type: 'turn.cancel';
  readonly request: CancelRequest;
  readonly by: TurnCanceller;
}
