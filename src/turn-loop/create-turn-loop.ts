/**
 * createTurnLoop: binds the pure TurnLoop machine to a runtime, a store and the user's
 * callbacks (docs/architecture.md, "TurnLoop", §9).
 *
 * @module
 */
import { createActor, fromCallback, fromPromise, type EventObject } from 'xstate';
import { CancelMode } from '../../machines/cancel-request.js';
import {
  stopReason,
  turnLoopMachine,
  type LoadedCheckpoint,
  type LoopTimerInput,
  type PreemptSpec,
  type PushDecision,
  type PushToken,
  type SaveCheckpointInput,
  type StopCall,
  type TurnEnding,
  type TurnCancelCommand,
  type TurnInput,
  type TurnLoopContext,
  type TurnLoopEvent,
  type TurnPlan,
} from '../../machines/turn-loop.machine.js';
import { z } from 'zod';
import {
  InvalidArgumentError,
  LateItemsTakenError,
  StoreFailedError,
  TurnCancelledError,
  isCancellation,
} from '../errors.js';
import { guardInspect } from '../guard-inspect.js';
import { LazyAbortController } from '../lazy-abort-controller.js';
import type { Agent } from '../run/agent.js';
import { executorOf, type AgentRun } from '../run/agent-run.js';
import { terminalRunStatuses } from '../../machines/run.machine.js';
import { durationMs, nonEmptyString, parseOptions } from '../validation.js';
import {
  checkpointFormat,
  checkpointVersion,
  decodeCheckpoint,
  jsonCheckpointCodec,
  type Checkpoint,
  type PersistedLoopSnapshot,
} from './checkpoint.js';
import { partitionItems } from './partition-items.js';
import type {
  PreemptOptions,
  PushOptions,
  PushResult,
  StopOptions,
  TurnContext,
  TurnLoop,
  TurnLoopConfig,
  TurnLoopExit,
} from './turn-loop-types.js';

const isFunction = (value: unknown): boolean => typeof value === 'function';
const fn = (what: string) => z.custom<unknown>(isFunction, { error: what });

const configSchema = z
  .strictObject({
    runtime: z.custom<unknown>(
      (value) =>
        typeof value === 'object' &&
        value !== null &&
        isFunction((value as { prepare?: unknown }).prepare) &&
        typeof (value as { clock?: unknown }).clock === 'object',
      { error: 'a runtime from createRuntime()' },
    ),
    ownerId: nonEmptyString,
    sessionId: nonEmptyString,
    genInput: fn('a function (items, info) => { input, consumed, remaining? }'),
    prepareAgent: fn('a function (consumed, info) => Agent'),
    onAgentEvents: fn('a function (turn, events) => error | undefined').optional(),
    genResume: fn(
      'a function ({ interrupted, unhandled, newItems, agentState }) => plan',
    ).optional(),
    store: z
      .custom<unknown>(
        (value) =>
          typeof value === 'object' &&
          value !== null &&
          ['get', 'set', 'delete'].every((m) => isFunction((value as Record<string, unknown>)[m])),
        { error: 'a CheckpointStore with get, set and delete' },
      )
      .optional(),
    checkpointId: nonEmptyString.optional(),
    codec: z
      .custom<unknown>(
        (value) =>
          typeof value === 'object' &&
          value !== null &&
          isFunction((value as { encode?: unknown }).encode) &&
          isFunction((value as { decode?: unknown }).decode),
        { error: 'a CheckpointCodec with encode and decode' },
      )
      .optional(),
    requeuePreempted: z.boolean({ error: 'a boolean' }).optional(),
    inspect: z
      .custom<unknown>(
        (value) =>
          isFunction(value) ||
          (typeof value === 'object' &&
            value !== null &&
            isFunction((value as { next?: unknown }).next)),
        { error: 'an XState inspection observer or function' },
      )
      .optional(),
  })
  .superRefine((config, ctx) => {
    if (config.store !== undefined && config.checkpointId === undefined) {
      ctx.addIssue({ code: 'custom', path: ['checkpointId'], message: 'set when `store` is set' });
    }
    if (config.checkpointId !== undefined && config.store === undefined) {
      ctx.addIssue({ code: 'custom', path: ['store'], message: 'set when `checkpointId` is set' });
    }
  });

const preemptMode = z
  .number({ error: 'a safe-point CancelMode (AfterChatModel, AfterToolCalls or AnySafePoint)' })
  .int({ error: 'a safe-point CancelMode (AfterChatModel, AfterToolCalls or AnySafePoint)' })
  .min(CancelMode.AfterChatModel, {
    error: 'a safe-point CancelMode (AfterChatModel, AfterToolCalls or AnySafePoint), not 0',
  })
  .max(CancelMode.AnySafePoint, {
    error: 'a safe-point CancelMode (AfterChatModel, AfterToolCalls or AnySafePoint)',
  });

const preemptShape = {
  preempt: preemptMode.optional(),
  preemptTimeoutMs: durationMs.optional(),
  preemptDelayMs: durationMs.optional(),
};

const needsPreempt = (options: PreemptOptions, ctx: z.RefinementCtx) => {
  for (const field of ['preemptTimeoutMs', 'preemptDelayMs'] as const) {
    if (options[field] !== undefined && options.preempt === undefined) {
      ctx.addIssue({ code: 'custom', path: [field], message: 'used together with `preempt`' });
    }
  }
};

const pushSchema = z
  .strictObject({
    ...preemptShape,
    strategy: fn('a function (turn) => preempt options').optional(),
  })
  .superRefine((options, ctx) => {
    needsPreempt(options, ctx);
    if (
      options.strategy !== undefined &&
      (options.preempt !== undefined ||
        options.preemptTimeoutMs !== undefined ||
        options.preemptDelayMs !== undefined)
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['strategy'],
        message: 'given without preempt options (the strategy answers them)',
      });
    }
  });

/** A strategy's answer, validated under the field name `strategy()`. */
const strategyAnswerSchema = z.object({
  'strategy()': z
    .custom<object>(
      (answer) =>
        typeof answer === 'object' &&
        answer !== null &&
        !isFunction((answer as { then?: unknown }).then),
      { error: 'preempt options or undefined, answered synchronously (not a promise)' },
    )
    // A `strategy` in the answer is ignored (Eino's semantics); any other unknown key is a typo.
    .pipe(
      z
        .strictObject({ ...preemptShape, strategy: z.unknown().optional() })
        .superRefine(needsPreempt),
    ),
});

const stopModes = ['afterTurn', 'graceful', 'immediate'] as const;
const stopSchema = z
  .strictObject({
    mode: z.enum(stopModes, { error: `one of ${stopModes.join(', ')}` }).optional(),
    graceMs: durationMs.optional(),
    idleForMs: durationMs.optional(),
    cause: z.string({ error: 'a string' }).optional(),
    skipCheckpoint: z.boolean({ error: 'a boolean' }).optional(),
  })
  .superRefine((options, ctx) => {
    if (
      options.graceMs !== undefined &&
      options.mode !== undefined &&
      options.mode !== 'graceful'
    ) {
      ctx.addIssue({ code: 'custom', path: ['graceMs'], message: "used with mode 'graceful'" });
    }
    // An idle stop commits only when no turn runs: a mode or a grace would never apply, and
    // merged into a later stop they would cancel a turn that stop meant to let finish.
    if (options.idleForMs !== undefined) {
      for (const field of ['mode', 'graceMs'] as const) {
        if (options[field] !== undefined && !(field === 'mode' && options.mode === 'afterTurn')) {
          ctx.addIssue({
            code: 'custom',
            path: [field],
            message: 'not used with `idleForMs` (an idle stop commits when no turn runs)',
          });
        }
      }
    }
  });

const toSpec = (options: PreemptOptions): PreemptSpec | undefined =>
  options.preempt === undefined
    ? undefined
    : {
        mode: options.preempt,
        timeoutMs: options.preemptTimeoutMs,
        delayMs: options.preemptDelayMs,
      };

const resolved: Promise<void> = Promise.resolve();
/** Store calls whose effect must complete (the final checkpoint) get a signal that never aborts. */
const uncancellable = new AbortController().signal;

/** The loop actor's persisted snapshot with the items moved out (they go in the envelope). */
function toDurableSnapshot(persisted: unknown): PersistedLoopSnapshot {
  const { context, ...rest } = persisted as { context: TurnLoopContext } & Record<string, unknown>;
  return {
    ...rest,
    status: String(rest.status),
    value: rest.value,
    children: {},
    context: {
      ...context,
      buffer: [],
      requeued: [],
      dropped: [],
      delayed: { seq: context.delayed.seq, pending: [] },
      turn: undefined,
      resume: undefined,
      lastPush: undefined,
      ending: undefined,
      exit: undefined,
    },
  };
}

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

  const acks = new Map<number, () => void>();
  let ackSeq = 0;
  let pushSeq = 0;
  const turns = new Map<string, TurnContext<TItem>>();
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
  const currentStopCause = () => actor.getSnapshot().context.stop?.cause;

  const storeCall = async <T>(
    operation: 'get' | 'set' | 'delete',
    call: () => Promise<T>,
  ): Promise<T> => {
    try {
      return await call();
    } catch (error) {
      throw new StoreFailedError(operation, checkpointKey, error);
    }
  };

  /** genInput or genResume, its answer checked against the offered items. */
  const generate = async (input: TurnInput, planning: LazyAbortController): Promise<TurnPlan> => {
    if (input.kind === 'input') {
      const answer = await config.genInput(input.items as TItem[], {
        turnId: input.turnId,
        preemptedItems: input.preemptedItems as TItem[],
        get signal() {
          return planning.signal;
        },
      });
      return partitionItems(answer, [...input.preemptedItems, ...input.items], 'genInput');
    }
    const offered = [...input.interrupted, ...input.unhandled, ...input.newItems];
    if (config.genResume === undefined) {
      const answer = await config.genInput(offered as TItem[], {
        turnId: input.turnId,
        preemptedItems: [],
        get signal() {
          return planning.signal;
        },
      });
      return partitionItems(answer, offered, 'genInput');
    }
    const answer = await config.genResume({
      turnId: input.turnId,
      interrupted: input.interrupted as TItem[],
      unhandled: input.unhandled as TItem[],
      newItems: input.newItems as TItem[],
      agentState: input.agentState,
      get signal() {
        return planning.signal;
      },
    });
    return partitionItems(answer, offered, 'genResume');
  };

  /** prepareAgent(consumed), its answer checked. */
  const prepare = async (
    input: TurnInput,
    consumed: readonly unknown[],
    planning: LazyAbortController,
  ): Promise<Agent<unknown, unknown>> => {
    const agent: unknown = await config.prepareAgent(consumed as TItem[], {
      turnId: input.turnId,
      resume: input.kind === 'resume',
      get signal() {
        return planning.signal;
      },
    });
    if (
      typeof agent !== 'object' ||
      agent === null ||
      !isFunction((agent as { execute?: unknown }).execute)
    ) {
      throw new InvalidArgumentError(
        'prepareAgent()',
        'expected `prepareAgent()` to return an agent with an execute(input, ctx) method',
      );
    }
    return agent as Agent<unknown, unknown>;
  };

  const cancelNow = (run: AgentRun<unknown>, reason: string) =>
    executorOf(run).cancelWith({
      mode: CancelMode.Immediate,
      deadlineAt: undefined,
      recursive: true,
      cause: 'cancel',
      reason,
    });

  /**
   * Runs one turn: plans it (genInput or genResume, then prepareAgent), starts its run and
   * reports both in one `turn.started`, feeds onAgentEvents, reports when both are done.
   *
   * Planning starts one microtask after the step that entered the turn, so that user code never
   * runs inside a loop step (it may push). Preempts that arrive while planning are delivered at
   * `turn.started`; a stop undoes the plan (the loop leaves the turn and stops this logic).
   */
  const runTurn = (
    input: TurnInput,
    sendBack: (event: TurnLoopEvent) => void,
    receive: (listener: (command: TurnCancelCommand) => void) => void,
  ): (() => void) => {
    const { turnId } = input;
    let live = true;
    let run: AgentRun<unknown> | undefined;
    const send = (event: TurnLoopEvent) => {
      if (live) sendBack(event);
    };
    // Their signals exist only if the turn's onAgentEvents reads them.
    const preempted = new LazyAbortController();
    const stopped = new LazyAbortController();
    let preemptContributed = false;
    let stopContributed = false;
    let endedByHandler = false;

    receive(({ request, by }) => {
      if (run === undefined || !executorOf(run).cancelWith(request).contributed) return;
      if (by === 'preempt') {
        preemptContributed = true;
        // Listeners run after this loop step, so they may push.
        queueMicrotask(() => preempted.abort(request.reason));
      } else {
        stopContributed = true;
        queueMicrotask(() => stopped.abort(request.reason));
      }
    });

    const follow = (current: AgentRun<unknown>, plan: TurnPlan) => {
      const context: TurnContext<TItem> = {
        turnId,
        runId: current.id,
        consumed: plan.consumed as readonly TItem[],
        get preempted() {
          return preempted.signal;
        },
        get stopped() {
          return stopped.signal;
        },
        get stopCause() {
          return currentStopCause();
        },
      };
      turns.set(turnId, context);
      send({ type: 'turn.started', turnId, runId: current.id, at: clock.now(), plan });

      const customHandler = config.onAgentEvents !== undefined;
      const handled: Promise<unknown> = Promise.resolve()
        .then(async () => {
          if (config.onAgentEvents !== undefined) {
            return config.onAgentEvents(context, current.events());
          }
          // The default handler: the run's error is taken from its outcome, and events nobody
          // reads are not followed (draining them cost a log follower per turn).
          await current.termination;
          return undefined;
        })
        .then(
          (value) => value ?? undefined,
          (thrown: unknown) => thrown ?? new Error('onAgentEvents threw a nullish value'),
        )
        .then((error) => {
          // A handler that returns early does not leave its run behind.
          if (!terminalRunStatuses.has(current.status)) {
            const { contributed } = cancelNow(
              current,
              'onAgentEvents returned before the run ended',
            );
            endedByHandler = contributed && !preemptContributed && !stopContributed;
          }
          return error;
        });

      void Promise.all([handled, current.termination]).then(([handlerError, outcome]) => {
        turns.delete(turnId);
        let error = handlerError;
        if (!customHandler && outcome.status === 'FAILED') {
          // An agent may throw anything; a nullish throw must still end the loop as a failure.
          error = outcome.error ?? new Error(`the turn's agent threw ${String(outcome.error)}`);
        }
        if (error !== undefined && outcome.status === 'CANCELLED' && isCancellation(error)) {
          error = undefined; // the loop handles its turns' cancellations itself
        }
        let cancelError: TurnCancelledError | undefined;
        const ending: TurnEnding = {
          status: outcome.status,
          error,
          // Built on first read: a preempted turn (the common case) never needs it, and an
          // error captures a stack trace.
          get cancelError() {
            if (outcome.status !== 'CANCELLED') return undefined;
            if (cancelError !== undefined) return cancelError;
            // When the loop's stop took part in the run's cancel, the error tells the stop's story
            // (with its first non-empty cause, known only now), even if a preempt asked first.
            // Otherwise it is the cancel that happened: a preempt's, a shutdown's, a user's.
            const { stop } = actor.getSnapshot().context;
            cancelError = stopContributed
              ? new TurnCancelledError(
                  current.id,
                  turnId,
                  'cancel',
                  stopReason(stop),
                  outcome.escalated,
                )
              : new TurnCancelledError(
                  current.id,
                  turnId,
                  outcome.cause,
                  outcome.reason,
                  outcome.escalated,
                );
            return cancelError;
          },
          agentState: current.safePointState,
          preemptContributed,
          agentStarted: current.agentStarted,
          endedByHandler,
        };
        send({ type: 'turn.ended', turnId, ending });
      });
    };

    // The signal genInput and prepareAgent get: aborted when the loop leaves the turn while it
    // is being planned (a stop); built only if read.
    const planning = new LazyAbortController();
    let planningDone = false;
    // `undefined` once the loop has left the turn (a stop): no callback is called after that.
    const planTurn = async () => {
      await resolved; // out of the loop step that invoked this logic
      if (!live) return undefined;
      const plan = await generate(input, planning);
      if (!live) return undefined;
      if (plan.consumed.length === 0) return { plan, agent: undefined };
      return { plan, agent: await prepare(input, plan.consumed, planning) };
    };
    void planTurn().then(
      (result) => {
        planningDone = true;
        if (!live || result === undefined) return;
        const { plan, agent } = result;
        if (agent === undefined) {
          send({ type: 'turn.skipped', turnId, plan });
          return;
        }
        try {
          run = runtime.prepare({ ownerId, sessionId, agent, input: plan.input });
          run.start();
        } catch (error) {
          // A run prepared but not started would stay registered: it never runs now.
          if (run !== undefined && !terminalRunStatuses.has(run.status)) {
            cancelNow(run, 'its turn could not start');
          }
          run = undefined;
          send({ type: 'turn.failed', turnId, error });
          return;
        }
        // Code run by start() (a custom store, an inspector) may have stopped the loop.
        if (live) follow(run, plan);
      },
      (error: unknown) => {
        planningDone = true;
        send({ type: 'turn.failed', turnId, error });
      },
    );

    return () => {
      live = false;
      if (!planningDone) planning.abort(new DOMException('the turn loop stopped', 'AbortError'));
      turns.delete(turnId);
      if (run !== undefined && !terminalRunStatuses.has(run.status)) {
        cancelNow(run, 'turn loop stopped');
      }
    };
  };

  const machine = turnLoopMachine.provide({
    actors: {
      loadCheckpoint: fromPromise<LoadedCheckpoint | undefined>(async () => {
        const data = await storeCall('get', () =>
          (store as NonNullable<typeof store>).get({ signal: uncancellable }, checkpointKey),
        );
        if (data === undefined) return undefined;
        const checkpoint = decodeCheckpoint(codec, data, checkpointKey);
        return {
          kind: checkpoint.kind,
          unhandled: checkpoint.unhandled,
          interrupted: checkpoint.interrupted,
          agentState: checkpoint.agentState,
          turnSeq: checkpoint.loop.context.turnSeq,
        };
      }),
      turn: fromCallback<TurnCancelCommand, TurnInput>(({ input, sendBack, receive }) =>
        runTurn(input, sendBack, receive),
      ),
      saveCheckpoint: fromPromise<void, SaveCheckpointInput>(async ({ input }) => {
        let data: Uint8Array;
        try {
          // Inside the try: persisting the snapshot walks every item too (a cycle throws there).
          const checkpoint: Checkpoint = {
            format: checkpointFormat,
            version: checkpointVersion,
            kind: input.kind,
            loop: toDurableSnapshot(actor.getPersistedSnapshot()),
            unhandled: input.unhandled,
            interrupted: input.interrupted,
            ...(input.agentState === undefined ? {} : { agentState: input.agentState }),
            savedAt: clock.now(),
          };
          data = codec.encode(checkpoint);
        } catch (error) {
          throw new StoreFailedError('encode', checkpointKey, error);
        }
        await storeCall('set', () =>
          (store as NonNullable<typeof store>).set({ signal: uncancellable }, checkpointKey, data),
        );
      }),
      deleteCheckpoint: fromPromise<void>(async () => {
        await storeCall('delete', () =>
          (store as NonNullable<typeof store>).delete({ signal: uncancellable }, checkpointKey),
        );
      }),
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
      settleAcks: (_, ackIds) => settleAcks(ackIds),
    },
  });

  // A throwing inspector is reported; inside a loop step it would fail the loop actor.
  const inspect = guardInspect(config.inspect, (error) => runtime.reportError(error));
  const actor = createActor(machine, {
    input: { hasStore: store !== undefined, requeuePreempted: config.requeuePreempted ?? false },
    clock,
    ...(inspect === undefined ? {} : { inspect }),
  });

  const finish = (exit: TurnLoopExit<TItem>) => {
    if (exited) return;
    exited = true;
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
      if (snapshot.status !== 'done') return;
      const { context } = snapshot;
      const exit = context.exit;
      finish({
        exitReason: exit?.reason,
        unhandledItems: (exit?.unhandled ?? []) as TItem[],
        interruptedItems: (exit?.interrupted ?? []) as TItem[],
        droppedItems: [...context.dropped] as TItem[],
        stopCause: context.stop?.cause,
        checkpointAttempted: context.checkpoint.attempted,
        checkpointError: context.checkpoint.error,
        takeLateItems,
      });
    },
    error(error) {
      // A defect inside the machine: report it as the exit, never as an unhandled rejection.
      // Every item is placed once: a planned turn's remaining items are back in the buffer and
      // its consumed ones are interrupted; an unplanned turn's taken items are still unhandled.
      const { context } = actor.getSnapshot();
      const turn = context.turn;
      const plan = turn?.plan;
      const resume = context.resume ?? (plan === undefined ? turn?.resume : undefined);
      finish({
        exitReason: error,
        unhandledItems: [
          ...(resume?.unhandled ?? []),
          ...(plan === undefined ? [...(turn?.takenRequeued ?? []), ...(turn?.taken ?? [])] : []),
          ...context.requeued,
          ...context.buffer,
        ] as TItem[],
        interruptedItems: [...(resume?.interrupted ?? []), ...(plan?.consumed ?? [])] as TItem[],
        droppedItems: [...context.dropped] as TItem[],
        stopCause: context.stop?.cause,
        checkpointAttempted: context.checkpoint.attempted,
        checkpointError: context.checkpoint.error,
        takeLateItems,
      });
    },
  });
  actor.start();

  const send = (event: TurnLoopEvent) => {
    if (!exited) actor.send(event);
  };

  return {
    push(item: TItem, options: PushOptions<TItem> = {}): PushResult {
      const parsed = parseOptions(pushSchema, options, 'options');
      if (item === undefined) {
        throw new InvalidArgumentError('item', 'expected `item` to be a value, got undefined');
      }
      if (lateTaken) throw new LateItemsTakenError();
      if (exited) {
        late.push(item);
        return { accepted: false, ack: resolved };
      }
      const strategy = options.strategy;
      let ackId: number | undefined;
      let ack = resolved;
      if (parsed.preempt !== undefined || strategy !== undefined) {
        const id = ++ackSeq;
        ackId = id;
        ack = new Promise<void>((resolve) => acks.set(id, resolve));
      }
      const decide =
        strategy === undefined
          ? undefined
          : (turnId: string | undefined): PushDecision => {
              try {
                const turn = turnId === undefined ? undefined : turns.get(turnId);
                const answer: unknown = strategy(turn);
                if (answer === undefined || answer === null)
                  return { ok: true, preempt: undefined };
                const checked = parseOptions(
                  strategyAnswerSchema,
                  { 'strategy()': answer },
                  'strategy()',
                )['strategy()'] as PreemptOptions;
                return { ok: true, preempt: toSpec(checked) };
              } catch (error) {
                return { ok: false, error };
              }
            };
      const token: PushToken = { seq: ++pushSeq, withdrawn: false };
      actor.send({
        type: 'loop.push',
        token,
        item,
        at: clock.now(),
        ackId,
        preempt: toSpec(parsed),
        decide,
      });
      const receipt = actor.getSnapshot().context.lastPush;
      if (receipt?.seq !== token.seq) {
        // Called from user code running inside a loop step: XState queued the event behind
        // that step, so its answer is not known yet. Withdraw it rather than guess.
        token.withdrawn = true;
        if (ackId !== undefined) settleAcks([ackId]);
        throw new InvalidArgumentError(
          'push()',
          'expected `push()` to be called outside a loop step, got a call from code the loop ' +
            'was running (a strategy, or a listener it triggered); defer it, e.g. with queueMicrotask',
        );
      }
      const { outcome } = receipt;
      if (outcome === 'accepted') return { accepted: true, ack };
      if (outcome === 'refused') {
        late.push(item);
        return { accepted: false, ack };
      }
      if (ackId !== undefined) settleAcks([ackId]);
      throw outcome.error;
    },

    run(): boolean {
      const { context } = actor.getSnapshot();
      if (exited || context.ran) return false;
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
      };
      send({ type: 'loop.stop', at: clock.now(), call });
    },

    wait(): Promise<TurnLoopExit<TItem>> {
      return exitPromise;
    },
  };
}
