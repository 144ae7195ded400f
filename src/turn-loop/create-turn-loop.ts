/**
 * createTurnLoop: binds the pure TurnLoop machine to a runtime, a store and the user's
 * callbacks (docs/architecture.md, "TurnLoop"). Its turns are bound in `bind-turn.ts`, its
 * options checked in `turn-loop-options.ts`.
 *
 * @module
 */
import { freeze } from 'immer';
import { assign, createActor, fromCallback, fromPromise, type EventObject } from 'xstate';
import { turnLoopMachine } from '../../machines/turn-loop.machine.js';
import type {
  LoadedCheckpoint,
  LoopTimerInput,
  PreemptSpec,
  PushReceipt,
  SaveCheckpointInput,
  StopCall,
  TurnCancelInfo,
  TurnLoopContext,
} from '../../machines/turn-loop.types.js';
import {
  InvalidArgumentError,
  LateItemsTakenError,
  StoreFailedError,
  TurnCancelledError,
} from '../errors.js';
import { guardInspect } from '../guard-inspect.js';
import { inspectorOf } from '../runtime/runtime-inspector.js';
import { parseOptions } from '../validation.js';
import { bindTurn } from './bind-turn.js';
import { jsonCheckpointCodec } from './checkpoint.js';
import {
  createCheckpointKeeper,
  type CheckpointDraft,
  type CheckpointKeeper,
} from './checkpoint-keeper.js';
import { viewOf } from './item-view.js';
import {
  durableSnapshot,
  itemsInHand,
  liveSaveInput,
  toCheckpoint,
  type SaveDraftInput,
} from './loop-checkpoint.js';
import {
  configSchema,
  pushSchema,
  runSchema,
  stopSchema,
  strategyAnswerSchema,
  toSpec,
} from './turn-loop-options.js';
import type {
  PreemptOptions,
  PushOptions,
  PushResult,
  PushStrategy,
  StopOptions,
  TurnLoop,
  TurnLoopConfig,
  TurnLoopExit,
  TurnLoopRunOptions,
} from './turn-loop-types.js';

const resolved: Promise<void> = Promise.resolve();
/** What every accepted plain push answers (one object: a push allocates nothing of its own). */
const acceptedPlain: PushResult = Object.freeze({ accepted: true, ack: resolved });
/** Numbers the loops without a checkpointId, for inspectors. */
let loopCount = 0;

const isTurnCancelInfo = (reason: unknown): reason is TurnCancelInfo =>
  typeof reason === 'object' &&
  reason !== null &&
  (reason as { kind?: unknown }).kind === 'turn-cancelled';

/** The exit reason a user sees: a cancelled turn's data becomes its `TurnCancelledError`. */
const toExitReason = (reason: unknown): unknown =>
  isTurnCancelInfo(reason)
    ? new TurnCancelledError(
        reason.runId,
        reason.turnId,
        reason.cause,
        reason.reason,
        reason.escalated,
      )
    : reason;

/**
 * Creates a TurnLoop: a supervisor that turns pushed items into turns, one run per turn, in
 * one session (semantics of Eino ADK's TurnLoop).
 *
 * @remarks
 * Each turn: `genInput(buffered items)` (or `genResume` after a mid-turn checkpoint) →
 * `prepareAgent(consumed)` → one run (`runtime.prepare` + `start`) whose events go to
 * `onAgentEvents` → the run is settled before the next turn. A push with `preempt` cancels
 * the current turn at a safe point in the same machine event as the buffer write; a
 * preempted turn is swallowed and the loop goes on, a stop-cancelled turn ends the loop with
 * its `TurnCancelledError`. Stricter than Eino: the buffer is closed before it is taken at
 * exit; every accepted item ends in exactly one of consumed, `droppedItems`,
 * `unhandledItems`, `interruptedItems`; every refused one in `takeLateItems()`; stop beats
 * preempt when both hit a turn; a pending resume is saved again on an early exit; a loaded
 * checkpoint is deleted once a turn after it has consumed its items (finished or preempted), so
 * an error exit later never offers them again (a failing delete is `checkpointError`).
 *
 * Checkpoints (with `store` + `checkpointId`): saved on a stop-caused exit that leaves items
 * or an interrupted turn, unless `skipCheckpoint`; never on an error exit; the loaded
 * checkpoint is also deleted on a clean exit that saves nothing. A loop that never ran never
 * touches the store. Every timer runs on `runtime.clock`.
 *
 * @param config - {@link TurnLoopConfig}
 * @returns a {@link TurnLoop}, accepting pushes at once; call `run()` to start it
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) naming the bad config field
 * @example
 * ```ts
 * const loop = createTurnLoop<string>({
 *   runtime, ownerId: 'u1', sessionId: 's1',
 *   genInput: (items) => ({ input: items.join('\n'), consumed: items }),
 *   prepareAgent: () => agent,
 * });
 * loop.push('hello');
 * loop.run();
 * loop.push('urgent', { preempt: CancelMode.AnySafePoint });
 * loop.stop({ mode: 'graceful', graceMs: 5_000, cause: 'shutting down' });
 * const exit = await loop.wait();
 * ```
 */
export function createTurnLoop<TItem, TInput = unknown>(
  config: TurnLoopConfig<TItem, TInput>,
): TurnLoop<TItem> {
  parseOptions(configSchema, config, 'config');
  const { runtime, ownerId, sessionId, store, checkpointId } = config;
  const clock = runtime.clock;
  const codec = config.codec ?? jsonCheckpointCodec;
  const checkpointKey = checkpointId ?? '';

  /** Acks of preempt and strategy pushes, by push id. */
  const acks = new Map<number, () => void>();
  /** The strategy of the push being sent, by push id: `decidePush` calls it in the push's step. */
  const strategies = new Map<number, PushStrategy<TItem>>();
  /** Pushes sent from inside a loop step, answered with an error: the machine ignores them. */
  const withdrawn = new Set<number>();
  let pushSeq = 0;
  /** The answer given to `run({ answer })`, for a loaded suspension. */
  let resumeAnswer: unknown;
  const late: TItem[] = [];
  let lateTaken = false;
  let exited = false;
  let resolveExit!: (exit: TurnLoopExit<TItem>) => void;
  const exitPromise = new Promise<TurnLoopExit<TItem>>((resolve) => (resolveExit = resolve));

  const settleAcks = (ids: Iterable<number>) => {
    for (const id of ids) {
      acks.get(id)?.();
      acks.delete(id);
    }
  };
  const turns = bindTurn(config, () => actor.getSnapshot().context.stop?.cause);
  const keeper =
    store === undefined
      ? undefined
      : createCheckpointKeeper({
          store,
          checkpointId: checkpointKey,
          codec,
          incremental:
            config.codec === undefined &&
            typeof store.append === 'function' &&
            typeof store.load === 'function',
          compactAfterPatches: config.compactAfterPatches ?? 32,
        });

  /** Saves the loop as `input` says, with its snapshot as it is now. */
  const saveNow = (input: SaveDraftInput): Promise<void> => {
    let checkpoint: CheckpointDraft;
    try {
      // Inside the try: a snapshot that cannot be persisted is an encode failure.
      checkpoint = toCheckpoint(input, durableSnapshot(machine, actor.getSnapshot()), clock.now());
    } catch (error) {
      return Promise.reject(new StoreFailedError('encode', checkpointKey, error));
    }
    return (keeper as CheckpointKeeper).save(checkpoint);
  };

  /** Calls a push's strategy with the running turn, its answer checked. */
  const decide = (
    strategy: PushStrategy<TItem>,
    context: TurnLoopContext,
  ): Pick<PushReceipt, 'preempt' | 'outcome'> => {
    try {
      const turn =
        context.turn?.phase === 'running' ? turns.contextOf(context.turn.turnId) : undefined;
      const answer: unknown = strategy(turn);
      if (answer === undefined || answer === null)
        return { preempt: undefined, outcome: 'accepted' };
      const checked = parseOptions(strategyAnswerSchema, { 'strategy()': answer }, 'strategy()')[
        'strategy()'
      ] as PreemptOptions;
      return { preempt: toSpec(checked), outcome: 'accepted' };
    } catch (error) {
      return { preempt: undefined, outcome: { error } };
    }
  };

  const machine = turnLoopMachine.provide({
    actors: {
      loadCheckpoint: fromPromise<LoadedCheckpoint | undefined>(async () => {
        const checkpoint = await (keeper as CheckpointKeeper).load();
        if (checkpoint === undefined) return undefined;
        return {
          kind: checkpoint.kind,
          unhandled: checkpoint.unhandled,
          interrupted: checkpoint.interrupted,
          agentState: checkpoint.agentState,
          turnSeq: checkpoint.loop.context.turnSeq,
          suspension:
            checkpoint.suspension === undefined
              ? undefined
              : { ...checkpoint.suspension, answer: resumeAnswer },
        };
      }),
      turn: turns.logic,
      saveCheckpoint: fromPromise<void, SaveCheckpointInput>(({ input }) =>
        saveNow({ ...input, unhandled: viewOf([input.unhandled]) }),
      ),
      deleteCheckpoint: fromPromise<void>(() => (keeper as CheckpointKeeper).delete()),
      timer: fromCallback<EventObject, LoopTimerInput>(({ input, sendBack }) => {
        const handle = clock.setTimeout(
          () => sendBack(input.event),
          Math.max(0, input.at - clock.now()),
        );
        return () => clock.clearTimeout(handle);
      }),
      idleClock: fromCallback<EventObject, { idleForMs: number }>(({ input, sendBack }) => {
        const handle = clock.setTimeout(() => sendBack({ type: 'loop.idle_due' }), input.idleForMs);
        return () => clock.clearTimeout(handle);
      }),
    },
    actions: {
      settleAcks: (_, pushIds) => settleAcks(pushIds),
      leaveTurn: (_, turnId) => turns.leave(turnId),
      // The push's strategy, found by its id, is called here: inside the push's own step.
      decidePush: assign(({ context, event }) => {
        if (event.type !== 'loop.push') return {};
        const { pushId } = event;
        if (withdrawn.delete(pushId)) {
          return { lastPush: { pushId, preempt: undefined, outcome: 'withdrawn' as const } };
        }
        const strategy = strategies.get(pushId);
        const decision: Pick<PushReceipt, 'preempt' | 'outcome'> =
          strategy === undefined || context.closed
            ? { preempt: event.preempt, outcome: 'accepted' }
            : decide(strategy, context);
        return { lastPush: { pushId, ...decision } };
      }),
    },
  });

  const loopId = checkpointId ?? `turn-loop-${++loopCount}`;
  // Loops inherit the runtime's inspector; a throwing one is reported (inside a loop step it
  // would fail the loop actor).
  const own = guardInspect(config.inspect, (error) => runtime.reportError(error));
  const inherited = inspectorOf(runtime);
  const inspect =
    own === undefined
      ? inherited
      : inherited === undefined
        ? own
        : (event: Parameters<typeof own>[0]) => {
            inherited(event);
            own(event);
          };
  /**
   * Whether a push without options may write the buffer without a machine step: set after each
   * loop step from the snapshot it left, cleared when the next step starts (so a push from code
   * a step runs still goes through the machine and is refused as before). True when such a push
   * would change nothing but the buffer: the buffer is open, a push is already pending planning
   * (`needsPlanning`), the loop is not `waiting` (where a push starts a turn), and no inspector
   * watches the loop (its trace shows every push).
   */
  let plainPushes = false;
  // The machine with its steps observed; everything else is the machine's own.
  const observed: typeof machine = Object.create(machine, {
    transition: {
      value: (...args: Parameters<typeof machine.transition>) => {
        plainPushes = false;
        return machine.transition(...args);
      },
    },
  }) as typeof machine;
  const actor = createActor(observed, {
    input: {
      hasStore: store !== undefined,
      requeuePreempted: config.requeuePreempted ?? false,
      ownerId,
      sessionId,
      loopId,
    },
    clock,
    ...(inspect === undefined ? {} : { inspect }),
  });

  const finish = (exit: TurnLoopExit<TItem>) => {
    if (exited) return;
    exited = true;
    turns.clear();
    settleAcks([...acks.keys()]);
    resolveExit(exit);
  };

  const takeLateItems = (): TItem[] => {
    if (lateTaken) return [];
    lateTaken = true;
    return late.splice(0);
  };

  actor.subscribe({
    next(snapshot) {
      const { context } = snapshot;
      plainPushes =
        inspect === undefined &&
        snapshot.status === 'active' &&
        context.needsPlanning &&
        !context.closed &&
        (snapshot.value as { loop: unknown }).loop !== 'waiting';
      if (snapshot.status !== 'done') return;
      const exit = context.exit;
      finish({
        exitReason: toExitReason(exit?.reason),
        unhandledItems: (exit?.unhandled ?? []) as TItem[],
        interruptedItems: (exit?.interrupted ?? []) as TItem[],
        droppedItems: [...context.dropped] as TItem[],
        stopCause: context.stop?.cause,
        ...(exit?.suspension === undefined ? {} : { suspension: exit.suspension }),
        checkpointAttempted: context.checkpoint.attempted,
        checkpointError: context.checkpoint.error,
        takeLateItems,
      });
    },
    error(error) {
      // A defect inside the machine: report it as the exit, never as an unhandled rejection.
      const { context } = actor.getSnapshot();
      const { unhandled, interrupted } = itemsInHand(context);
      finish({
        exitReason: error,
        unhandledItems: unhandled as TItem[],
        interruptedItems: interrupted as TItem[],
        droppedItems: [...context.dropped] as TItem[],
        stopCause: context.stop?.cause,
        checkpointAttempted: context.checkpoint.attempted,
        checkpointError: context.checkpoint.error,
        takeLateItems,
      });
    },
  });
  actor.start();

  return {
    push(item: TItem, options?: PushOptions<TItem>): PushResult {
      const parsed = options === undefined ? {} : parseOptions(pushSchema, options, 'options');
      if (item === undefined) {
        throw new InvalidArgumentError('item', 'expected `item` to be a value, got undefined');
      }
      // Frozen at push (plain objects and arrays, deeply): what is checkpointed is what was pushed.
      freeze(item, true);
      if (lateTaken) throw new LateItemsTakenError();
      if (exited) {
        late.push(item);
        return { accepted: false, ack: resolved };
      }
      if (plainPushes && options === undefined) {
        // What `acceptPush` would do, and all it would do: one append in place, O(1).
        actor.getSnapshot().context.buffer.push(item);
        return acceptedPlain;
      }
      const strategy = options?.strategy;
      const pushId = ++pushSeq;
      let ack = resolved;
      if (parsed.preempt !== undefined || strategy !== undefined) {
        ack = new Promise<void>((resolve) => acks.set(pushId, resolve));
      }
      const preempt: PreemptSpec | undefined = toSpec(parsed);
      if (strategy !== undefined) strategies.set(pushId, strategy);
      turns.pushed(item);
      actor.send({ type: 'loop.push', pushId, item, at: clock.now(), preempt });
      strategies.delete(pushId);
      const receipt = actor.getSnapshot().context.lastPush;
      if (receipt?.pushId !== pushId) {
        // Called from user code running inside a loop step: XState queued the event behind
        // that step, so its answer is not known yet. Withdraw it rather than guess.
        withdrawn.add(pushId);
        settleAcks([pushId]);
        throw new InvalidArgumentError(
          'push()',
          'expected `push()` to be called outside a loop step, got a call from code the loop ' +
            'was running (a strategy, or a listener it triggered); defer it, e.g. with queueMicrotask',
        );
      }
      const { outcome } = receipt;
      if (outcome === 'accepted') {
        // No preempt to deliver: its ack (a strategy's push) resolves now.
        if (receipt.preempt === undefined && ack !== resolved) settleAcks([pushId]);
        return { accepted: true, ack };
      }
      if (outcome === 'refused') {
        late.push(item);
        return { accepted: false, ack };
      }
      settleAcks([pushId]);
      throw (outcome as { error: unknown }).error;
    },

    run(options: TurnLoopRunOptions = {}): boolean {
      parseOptions(runSchema, options, 'options');
      const { context } = actor.getSnapshot();
      if (exited || context.ran) return false;
      resumeAnswer = options.answer;
      actor.send({ type: 'loop.run' });
      return true;
    },

    stop(options: StopOptions = {}): void {
      const parsed = parseOptions(stopSchema, options, 'options');
      const call: StopCall = {
        mode: parsed.mode ?? (parsed.graceMs === undefined ? 'afterTurn' : 'graceful'),
        graceMs: parsed.graceMs,
        idleForMs: parsed.idleForMs,
        cause: parsed.cause,
        skipCheckpoint: parsed.skipCheckpoint ?? false,
        initiator: parsed.initiator ?? 'user',
      };
      if (!exited) actor.send({ type: 'loop.stop', at: clock.now(), call });
    },

    wait(): Promise<TurnLoopExit<TItem>> {
      return exitPromise;
    },

    checkpoint(): Promise<boolean> {
      const snapshot = actor.getSnapshot();
      const live = snapshot.matches({ loop: 'waiting' }) || snapshot.matches({ loop: 'turn' });
      if (keeper === undefined || exited || !live) return Promise.resolve(false);
      const { context } = snapshot;
      const turn = context.turn;
      const agentState =
        turn?.plan === undefined
          ? undefined
          : (turns.agentStateOf(turn.turnId) ?? turn.resume?.agentState);
      const saved = saveNow(liveSaveInput(context, agentState));
      // The store now holds (or is about to hold) this loop's checkpoint: the loop deletes it
      // once a turn has consumed its items, and at a clean exit that saves nothing.
      actor.send({ type: 'loop.checkpointing' });
      return saved.then(() => true);
    },
  };
}
