/**
 * The TurnLoop's public shapes: its config, push and stop options, the turn context its
 * callbacks see, and the exit it ends with (docs/architecture.md, "TurnLoop", §16).
 *
 * @module
 */
import type { InspectionEvent, Observer } from 'xstate';
import type { CancelModeValue } from '../../machines/cancel-request.js';
import type { StopMode, TurnSuspension } from '../../machines/turn-loop.types.js';
import type { RunplaneEvent } from '../events/event-log.js';
import type { Agent } from '../run/agent.js';
import type { Runtime } from '../runtime/create-runtime.js';
import type { CheckpointStore } from '../stores/checkpoint-store.js';
import type { CheckpointCodec } from './checkpoint.js';

/** What genInput (or genResume) answers: the turn's agent input and how the items split. */
export interface GenInputResult<TItem, TInput = unknown> {
  /** Handed to the turn's agent as its input. */
  readonly input: TInput;
  /** Items this turn handles; each must be one of the items offered. Empty: no turn is run. */
  readonly consumed: readonly TItem[];
  /**
   * Items kept for later turns, in the order given (they go back to the front of the buffer).
   * Offered items in neither list are dropped and reported in `exit.droppedItems`. @default []
   */
  readonly remaining?: readonly TItem[];
}

/** The second argument of {@link TurnLoopConfig.genInput}. */
export interface GenInputInfo<TItem> {
  /** The turn being planned. */
  readonly turnId: string;
  /**
   * With `requeuePreempted`: the consumed items of the turn(s) preempted since the last plan,
   * offered again (they may appear in `consumed` / `remaining` like buffered items). Else `[]`.
   */
  readonly preemptedItems: readonly TItem[];
  /** Aborted when the plan is abandoned (the loop was stopped meanwhile). */
  readonly signal: AbortSignal;
}

/** The argument of {@link TurnLoopConfig.genResume}. */
export interface GenResumeArgs<TItem> {
  readonly turnId: string;
  /** The consumed items of the turn the checkpoint interrupted. */
  readonly interrupted: readonly TItem[];
  /** Items that were buffered when the checkpoint was saved. */
  readonly unhandled: readonly TItem[];
  /** Everything pushed into this loop before the resume turn was planned. */
  readonly newItems: readonly TItem[];
  /**
   * What the interrupted turn's agent passed to its latest `ctx.safePoint(kind, state)`, or to
   * `ctx.suspend(request, state)`.
   */
  readonly agentState: unknown;
  /**
   * Set when the checkpoint holds a suspended turn (`ctx.suspend(request)`, Eino's business
   * interrupt): its `request`, and the `answer` given to `loop.run({ answer })` (`undefined`
   * when none was given). Build the resumed agent's input from `agentState` and `answer`.
   */
  readonly suspension?: TurnSuspension & { readonly answer: unknown };
  /** Aborted when the plan is abandoned. */
  readonly signal: AbortSignal;
}

/** The second argument of {@link TurnLoopConfig.prepareAgent}. */
export interface PrepareAgentInfo {
  readonly turnId: string;
  /** Whether this turn resumes a mid-turn checkpoint (planned by genResume). */
  readonly resume: boolean;
  /** Aborted when the plan is abandoned. */
  readonly signal: AbortSignal;
}

/**
 * What a turn's callbacks and a push strategy see of the current turn.
 *
 * @remarks Follows Eino's TurnContext: `preempted` and `stopped` abort only when a preempt
 * (resp. a stop) of this loop actually contributed to the turn's cancel request; if the
 * cancel was already settled by another request, they stay un-aborted.
 */
export interface TurnContext<TItem> {
  /** `turn-<n>`, unique within a loop; numbering continues across a checkpoint. */
  readonly turnId: string;
  /** The run executing this turn. */
  readonly runId: string;
  /** The items this turn consumed. */
  readonly consumed: readonly TItem[];
  /** Aborts when a preempt contributed to cancelling this turn. */
  readonly preempted: AbortSignal;
  /** Aborts when a stop contributed to cancelling this turn. */
  readonly stopped: AbortSignal;
  /** The loop's stop cause so far (first non-empty `stop({ cause })`), if any. */
  readonly stopCause: string | undefined;
}

/** Preempt options of a push (also what a {@link PushStrategy} answers). */
export interface PreemptOptions {
  /**
   * Cancel the current turn at a safe point: `CancelMode.AfterChatModel`,
   * `CancelMode.AfterToolCalls` or `CancelMode.AnySafePoint` (a bitmask; 0 is refused: a
   * preempt never cancels immediately by itself). Not recursive unless `preemptTimeoutMs` is set.
   */
  readonly preempt?: CancelModeValue;
  /**
   * Escalate to an immediate, recursive cancel if no safe point came this many ms after the push
   * (after the push and `preemptDelayMs`). The deadline is fixed at the push, as in Eino: a
   * preempt parked while the next turn plans lands as immediate if it has passed. Needs `preempt`.
   */
  readonly preemptTimeoutMs?: number;
  /**
   * Deliver the preempt this many ms after the push, to the turn current at push time; a
   * no-op if that turn has ended by then. Needs `preempt`.
   */
  readonly preemptDelayMs?: number;
}

/**
 * Decides a push's preempt from the current turn, inside the same machine event as the
 * buffer write (Eino's WithPushStrategy: no TOCTOU window).
 *
 * @param turn - the running turn, or `undefined` while no turn's run has started
 * @returns preempt options, or `undefined` for a plain push; a `strategy` in the answer is ignored
 */
export type PushStrategy<TItem> = (
  turn: TurnContext<TItem> | undefined,
) => (PreemptOptions & { readonly strategy?: unknown }) | undefined | void;

/** Options of {@link TurnLoop.push}. */
export interface PushOptions<TItem> extends PreemptOptions {
  /** Decides the preempt options at push time; excludes the static preempt options. */
  readonly strategy?: PushStrategy<TItem>;
}

/** The answer of {@link TurnLoop.push}. */
export interface PushResult {
  /** False once the loop is stopped: the item is a late item (see `exit.takeLateItems()`). */
  readonly accepted: boolean;
  /**
   * Resolves once the preempt was delivered to a turn, or found nothing to preempt (no turn,
   * the bound turn ended, the loop exited). Resolved at once for a push without preempt.
   * Never rejects.
   */
  readonly ack: Promise<void>;
}

/** Options of {@link TurnLoop.stop}. Repeated stops merge: they escalate, never de-escalate. */
export interface StopOptions {
  /**
   * `'afterTurn'`: let the current turn finish, start no new one. `'graceful'`: cancel the
   * current turn at its next safe point (recursive). `'immediate'`: cancel it now (recursive).
   * @default 'graceful' when `graceMs` is given, else 'afterTurn'
   */
  readonly mode?: StopMode;
  /** Graceful only: escalate to immediate after this many ms. */
  readonly graceMs?: number;
  /**
   * Stop only once the loop has been idle (no turn, nothing to plan) for this many ms; a push
   * restarts the clock. A later `stop()` without `idleForMs` commits at once. Not used with
   * `graceMs` or a `mode` other than `'afterTurn'` (`INVALID_ARGUMENT`): no turn runs when an
   * idle stop commits.
   */
  readonly idleForMs?: number;
  /** Why the loop stops; the first non-empty cause wins (`exit.stopCause`). */
  readonly cause?: string;
  /** Save no checkpoint on this exit. Sticky: a later stop cannot turn it off. @default false */
  readonly skipCheckpoint?: boolean;
  /**
   * Who asks for the stop: the `initiator` of the cancelled turn's `run.cancelled` event (README
   * "Events"). `'shutdown'` when the host is shutting down (`runplane serve` says so); once any
   * stop says `'shutdown'` it stays. @default 'user'
   */
  readonly initiator?: 'user' | 'shutdown';
}

/** How a TurnLoop ended: the same object for every `wait()` caller. */
export interface TurnLoopExit<TItem> {
  /**
   * `undefined` for a clean stop. `'suspended'` when a turn's agent suspended it for outside
   * input (`ctx.suspend(request)`; see `suspension`). A `TurnCancelledError` when the stop
   * cancelled the last turn (`escalated` tells a graceful stop that hit its deadline); else the
   * error that ended the loop (onAgentEvents' error, a throwing callback, `CheckpointCorruptError`, `StoreFailedError`).
   */
  readonly exitReason: unknown;
  /** Accepted items no turn consumed, in push order (a pending resume's unhandled items first). */
  readonly unhandledItems: readonly TItem[];
  /** Consumed items of a turn that did not finish (or of a resume that never ran). */
  readonly interruptedItems: readonly TItem[];
  /** Items genInput / genResume returned in neither `consumed` nor `remaining`. */
  readonly droppedItems: readonly TItem[];
  /** The first non-empty stop cause. */
  readonly stopCause: string | undefined;
  /**
   * Set when a turn suspended for outside input (`exitReason` is then `'suspended'`), or when a
   * pending resume of a suspension never ran: the turn, its run and the agent's request.
   */
  readonly suspension?: TurnSuspension;
  /** Whether a checkpoint save was attempted on exit. */
  readonly checkpointAttempted: boolean;
  /**
   * A `StoreFailedError` (`STORE_FAILED`) when the save, or the delete of a consumed
   * checkpoint, failed. The exit reason is unchanged by it.
   */
  readonly checkpointError: unknown;
  /**
   * Takes the items pushed after the stop (refused pushes), once. After this call, a push
   * throws `LateItemsTakenError` (`LATE_ITEMS_TAKEN`) instead of being refused.
   *
   * @returns the late items in push order; `[]` on a second call
   */
  takeLateItems(): TItem[];
}

/** Configuration of {@link createTurnLoop}. */
export interface TurnLoopConfig<TItem, TInput = unknown> {
  /** Runs the turns: each turn is one `runtime.prepare(...)` + `start()`; its clock times everything. */
  readonly runtime: Runtime;
  readonly ownerId: string;
  /** The session the turns run in (one at a time, with the session's other runs). */
  readonly sessionId: string;
  /**
   * Plans a turn from everything buffered (Eino's GenInput). Called outside any loop step (as
   * `prepareAgent` is): it may push, and the item waits for a later turn. A stop while it runs
   * aborts `info.signal` and puts the items back.
   *
   * @param items - the buffered items, in push order
   * @param info - turn id, re-offered preempted items, abort signal
   * @returns the agent input and the split of the items; may be a promise
   */
  genInput(
    items: readonly TItem[],
    info: GenInputInfo<TItem>,
  ): GenInputResult<TItem, TInput> | Promise<GenInputResult<TItem, TInput>>;
  /**
   * Builds the turn's agent from its consumed items (Eino's PrepareAgent).
   *
   * @returns an {@link Agent}; may be a promise
   */
  prepareAgent(
    consumed: readonly TItem[],
    info: PrepareAgentInfo,
  ): Agent<TInput, unknown> | Promise<Agent<TInput, unknown>>;
  /**
   * Consumes a turn's events (Eino's OnAgentEvents). Return (or throw) an error to end the
   * loop with it; a cancellation of the turn itself is handled by the loop and ignored here.
   * If it returns before the run ended, the run is cancelled and settled before the next turn.
   * @default wait for the run to end (its events are not followed); end the loop with the
   *   run's error if it FAILED
   */
  onAgentEvents?(turn: TurnContext<TItem>, events: AsyncIterable<RunplaneEvent>): unknown;
  /**
   * Plans the turn that resumes a mid-turn checkpoint (Eino's GenResume). The resumed agent
   * gets `agentState` through the `input` you build.
   * @default genInput([...interrupted, ...unhandled, ...newItems])
   */
  genResume?(
    args: GenResumeArgs<TItem>,
  ): GenInputResult<TItem, TInput> | Promise<GenInputResult<TItem, TInput>>;
  /** Where the checkpoint lives; requires `checkpointId`. */
  readonly store?: CheckpointStore;
  /** The checkpoint's key in `store`; requires `store`. */
  readonly checkpointId?: string;
  /**
   * Encodes checkpoints. A custom codec turns incremental saves off (patches are JSON).
   * @default JSON (items and agent state must be JSON values)
   */
  readonly codec?: CheckpointCodec;
  /**
   * With a store that has `append` and `load` (incremental), and the default codec: how many
   * patch records a checkpoint chain holds on one base before the next save is whole again (a
   * save is also whole once the chain's patches outweigh its base). An integer ≥ 1.
   * @default 32
   */
  readonly compactAfterPatches?: number;
  /**
   * Offer a preempted turn's consumed items to the next genInput as `preemptedItems`
   * instead of counting them as consumed. @default false
   */
  readonly requeuePreempted?: boolean;
  /**
   * Names an item in the session's log: each turn's run then logs its consumed items' ids on
   * `session.run_started` (`item_ids`), as the HTTP service's loop sessions do. Called when the
   * turn's run starts; a throw fails the turn's start (the loop exits with it). @default none
   */
  readonly itemIdOf?: (item: TItem) => string;
  /**
   * An XState inspection observer for the loop and its turns, in addition to the runtime's
   * (`createRuntime({ inspect })`), which every loop inherits: do not pass the runtime's again,
   * or it sees each event twice. A throwing observer is reported, never thrown into the loop.
   */
  readonly inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
}

/** Options of {@link TurnLoop.run}. */
export interface TurnLoopRunOptions {
  /**
   * The answer to a suspended turn (Eino's ResumeWithParams): handed to `genResume` as
   * `suspension.answer` when the loaded checkpoint holds a suspension; unused otherwise.
   */
  readonly answer?: unknown;
}

/** A TurnLoop: push items, run, stop, wait for the exit. */
export interface TurnLoop<TItem> {
  /**
   * Buffers an item; with `preempt` (or a `strategy` that answers one) cancels the current
   * turn at a safe point, in the same step.
   *
   * @param item - any value but `undefined`
   * @param options - {@link PushOptions}
   * @returns `{ accepted, ack }`; `accepted` is false after a stop (the item is kept as a late item)
   * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) naming the bad option (also for a
   *   strategy's bad answer), or whatever the strategy threw; the item is then not buffered
   * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`, field `push()`) when called
   *   synchronously from code a loop step is running (a strategy, or a listener it triggered,
   *   such as an agent's abort listener): its answer would not be known in time, so the item is
   *   not buffered. Listeners on `TurnContext.preempted` / `stopped` are called after the step
   *   and may push.
   * @throws {@link LateItemsTakenError} (`LATE_ITEMS_TAKEN`) after `exit.takeLateItems()`
   */
  push(item: TItem, options?: PushOptions<TItem>): PushResult;
  /**
   * Starts processing in the background: loads the checkpoint (if a store is configured), then
   * plans and runs turns. Items pushed before are kept.
   *
   * @param options - {@link TurnLoopRunOptions}: the answer to a suspended turn
   * @returns whether this call started the loop (false on a repeated call, or after it exited)
   */
  run(options?: TurnLoopRunOptions): boolean;
  /**
   * Stops the loop; repeated calls escalate, never de-escalate. Before `run()`, the loop
   * exits at once without calling genInput; its items are unhandled.
   *
   * @param options - {@link StopOptions}
   * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) naming the bad option
   */
  stop(options?: StopOptions): void;
  /** Resolves with the exit once the loop has stopped and its checkpoint is written; never rejects. */
  wait(): Promise<TurnLoopExit<TItem>>;
  /**
   * Saves a checkpoint of the running loop now, as a stop would leave it: buffered items
   * unhandled, the running turn's items interrupted with its agent's latest safe-point state
   * (a mid-turn checkpoint). The loop goes on. With an incremental store (`append` + `load`)
   * a save after the first is a patch: it costs what changed since, not what the loop holds.
   *
   * @remarks The checkpoint is deleted once a turn has consumed its items (as a loaded one is),
   * and replaced or deleted at a clean exit; an error exit leaves it in place.
   * @returns true once written; false when there is nothing to write to (no store) or the loop
   *   is not running (before `run()`, while loading, deleting a used checkpoint, or exiting)
   * @throws {@link StoreFailedError} (`STORE_FAILED`; rejects) when the save fails
   */
  checkpoint(): Promise<boolean>;
}
