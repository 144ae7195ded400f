/**
 * bindTurn: the turn machine (`machines/turn.machine.ts`) bound to a runtime and the user's
 * callbacks: genInput / genResume, prepareAgent, the run, onAgentEvents, and the turn's
 * `preempted` / `stopped` signals (docs/architecture.md, "TurnLoop").
 *
 * @module
 */
import { assign, fromCallback, type EventObject } from 'xstate';
import { CancelMode } from '../../machines/cancel-request.js';
import { terminalRunStatuses } from '../../machines/run.machine.js';
import { turnMachine } from '../../machines/turn.machine.js';
import type {
  HandlerResult,
  RunSettlement,
  TurnInput,
  TurnPlan,
} from '../../machines/turn-loop.types.js';
import type { TurnEvent } from '../../machines/turn.machine.js';
import { InvalidArgumentError, isCancellation, RunSuspendedError } from '../errors.js';
import { LazyAbortController } from '../lazy-abort-controller.js';
import { telemetryOf } from '../observability/runtime-telemetry.js';
import { TurnSpans } from '../observability/turn-spans.js';
import type { Agent } from '../run/agent.js';
import { executorOf, type AgentRun } from '../run/agent-run.js';
import type { RunOutcome } from '../run/run-outcome.js';
import { partitionItems } from './partition-items.js';
import type { TurnContext, TurnLoopConfig } from './turn-loop-types.js';

/** What the runtime keeps for one turn, by turn id: agents and signals never enter the machine. */
interface TurnHost<TItem> {
  agent: Agent<unknown, unknown> | undefined;
  run: AgentRun<unknown> | undefined;
  context: TurnContext<TItem> | undefined;
  /** The signal of the planning under way (genInput, genResume, prepareAgent), until it answers. */
  planning: LazyAbortController | undefined;
  /** Their signals exist only if the turn's onAgentEvents reads them. */
  readonly preempted: LazyAbortController;
  readonly stopped: LazyAbortController;
}

/** The bound turn logic and the turns it runs. @internal */
export interface BoundTurns<TItem> {
  /** The `turn` logic to register with the loop machine. */
  readonly logic: typeof turnMachine;
  /** The context of a turn whose run has started (what a push strategy sees), by turn id. */
  contextOf(turnId: string): TurnContext<TItem> | undefined;
  /**
   * The loop has left the turn (it ended, or the loop stopped or failed meanwhile): its run, if
   * it has not ended, is cancelled at once, and the turn is forgotten.
   */
  leave(turnId: string): void;
  /** The latest safe-point state of a turn's run, if it has one. */
  agentStateOf(turnId: string): unknown;
  /** Forgets every turn (the loop has exited). */
  clear(): void;
  /** An item is being pushed: its trace context is kept for its turn's span. */
  pushed(item: unknown): void;
}

const resolved: Promise<void> = Promise.resolve();

const cancelNow = (run: AgentRun<unknown>, reason: string) =>
  executorOf(run).cancelWith({
    mode: CancelMode.Immediate,
    deadlineAt: undefined,
    recursive: true,
    cause: 'cancel',
    reason,
    initiator: 'user',
  });

/** The loop left a turn still planning: its planning signal aborts, and its answer is ignored. */
const abandonPlanning = (host: { planning: LazyAbortController | undefined }) => {
  const { planning } = host;
  host.planning = undefined;
  planning?.abort(new DOMException('the turn loop stopped', 'AbortError'));
};

const isFunction = (value: unknown): boolean => typeof value === 'function';

/** A value now, or a promise of it. */
type Settling<T> = T | Promise<T>;

const isPromise = <T>(value: Settling<T>): value is Promise<T> => value instanceof Promise;

const isThenable = (value: unknown): value is PromiseLike<unknown> =>
  (typeof value === 'object' || typeof value === 'function') &&
  value !== null &&
  isFunction((value as { then?: unknown }).then);

/**
 * `next(value)` now when `value` is not a thenable, else once it resolves: a user callback
 * that answers synchronously costs no microtask hop.
 */
function andThen<T, R>(value: T | PromiseLike<T>, next: (settled: T) => Settling<R>): Settling<R> {
  return isThenable(value) ? Promise.resolve(value).then(next) : next(value);
}

/**
 * Binds the turn machine to `config`.
 *
 * @param config - the loop's config (runtime, session, callbacks)
 * @param stopCause - reads the loop's stop cause so far, for `TurnContext.stopCause`
 * @returns the bound logic and the table of live turns
 * @throws never; a callback's error becomes the turn's `turn.failed` or its ending
 * @internal
 */
export function bindTurn<TItem, TInput>(
  config: TurnLoopConfig<TItem, TInput>,
  stopCause: () => string | undefined,
): BoundTurns<TItem> {
  const { runtime, ownerId, sessionId } = config;
  const hosts = new Map<string, TurnHost<TItem>>();
  const spans = new TurnSpans(telemetryOf(runtime), sessionId);
  const hostOf = (turnId: string): TurnHost<TItem> => {
    let host = hosts.get(turnId);
    if (host === undefined) {
      host = {
        agent: undefined,
        run: undefined,
        context: undefined,
        planning: undefined,
        preempted: new LazyAbortController(),
        stopped: new LazyAbortController(),
      };
      hosts.set(turnId, host);
    }
    return host;
  };

  /**
   * The turn's run: kept by its turn, else found by id through the runtime; `undefined` once the
   * loop has left the turn and the run has settled.
   */
  const runOf = ({ turnId, runId }: { turnId: string; runId: string }) =>
    hosts.get(turnId)?.run ?? runtime.runs.find(ownerId, sessionId, runId);

  /** genInput or genResume, its answer checked against the offered items (at once if it is not a promise). */
  const generate = (input: TurnInput, planning: LazyAbortController): Settling<TurnPlan> => {
    const { turnId } = input;
    if (input.kind === 'input') {
      const answer = config.genInput(input.items as TItem[], {
        turnId,
        preemptedItems: input.preemptedItems as TItem[],
        get signal() {
          return planning.signal;
        },
      });
      return andThen(answer, (settled) =>
        partitionItems(settled, [...input.preemptedItems, ...input.items], 'genInput'),
      );
    }
    const offered = [...input.interrupted, ...input.unhandled, ...input.newItems];
    if (config.genResume === undefined) {
      const answer = config.genInput(offered as TItem[], {
        turnId,
        preemptedItems: [],
        get signal() {
          return planning.signal;
        },
      });
      return andThen(answer, (settled) => partitionItems(settled, offered, 'genInput'));
    }
    const answer = config.genResume({
      turnId,
      interrupted: input.interrupted as TItem[],
      unhandled: input.unhandled as TItem[],
      newItems: input.newItems as TItem[],
      agentState: input.agentState,
      ...(input.suspension === undefined ? {} : { suspension: input.suspension }),
      get signal() {
        return planning.signal;
      },
    });
    return andThen(answer, (settled) => partitionItems(settled, offered, 'genResume'));
  };

  /** prepareAgent(consumed), its answer checked (at once if it is not a promise). */
  const prepare = (
    input: TurnInput,
    consumed: readonly unknown[],
    planning: LazyAbortController,
  ): Settling<Agent<unknown, unknown>> => {
    const answer = config.prepareAgent(consumed as TItem[], {
      turnId: input.turnId,
      resume: input.kind === 'resume',
      get signal() {
        return planning.signal;
      },
    });
    return andThen(answer as unknown, (agent) => {
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
    });
  };

  /** A handler's answer: its error, and whether that is the run's cancellation or suspension. */
  const handlerResult = (error: unknown, run: AgentRun<unknown>): HandlerResult => ({
    error,
    isCancellation: error !== undefined && isCancellation(error),
    // The run's own suspension, as its agent threw it (or the default handler read it).
    isSuspension: error instanceof RunSuspendedError && error.runId === run.id,
  });

  /**
   * The default handler's answer, read from the run's outcome: the run's error. Events nobody
   * reads are not followed (draining them cost a log follower per turn).
   */
  const defaultHandled = (run: AgentRun<unknown>, outcome: RunOutcome<unknown>): HandlerResult =>
    handlerResult(
      // An agent may throw anything; a nullish throw must still end the loop as a failure.
      outcome.status === 'FAILED'
        ? (outcome.error ?? new Error(`the turn's agent threw ${String(outcome.error)}`))
        : undefined,
      run,
    );

  /** onAgentEvents over the run's events; `undefined` if the loop left. */
  const handle = async (
    input: { turnId: string; runId: string },
    live: () => boolean,
  ): Promise<HandlerResult | undefined> => {
    const run = runOf(input);
    if (run === undefined) return undefined;
    let error: unknown;
    try {
      await resolved; // listeners run after the loop step that started the turn
      const context = hosts.get(input.turnId)?.context;
      // The loop left the turn meanwhile (code run by the run's start stopped it).
      if (!live() || context === undefined) return undefined;
      error = (await config.onAgentEvents?.(context, run.events())) ?? undefined;
    } catch (thrown) {
      error = thrown ?? new Error('onAgentEvents threw a nullish value');
    }
    return handlerResult(error, run);
  };
  const readsEvents = config.onAgentEvents !== undefined;

  const logic = turnMachine.provide({
    actors: {
      handleEvents: fromCallback<EventObject, { turnId: string; runId: string }>(
        ({ input, sendBack }) => {
          if (!readsEvents) return undefined; // never spawned: see the guard `readsEvents`
          let live = true;
          void handle(input, () => live).then((result) => {
            if (result !== undefined) sendBack({ type: 'handler.returned', result });
          });
          return () => {
            live = false;
          };
        },
      ),
    },
    guards: {
      readsEvents: () => readsEvents,
    },
    actions: {
      // Planning starts one microtask after the step that entered the turn, so that user code
      // never runs inside a loop step (it may push). When the loop leaves the turn, `leave`
      // aborts its signal (built only if read) and nothing is called or answered after.
      planTurn: ({ self }, input) => {
        const { turnId } = input;
        spans.begin(
          turnId,
          input.kind === 'input'
            ? [...input.preemptedItems, ...input.items]
            : [...input.interrupted, ...input.unhandled, ...input.newItems],
        );
        const host = hostOf(turnId);
        const planning = new LazyAbortController();
        host.planning = planning;
        const answer = (event: TurnEvent) => {
          if (host.planning !== planning || hosts.get(turnId) !== host) return;
          host.planning = undefined;
          self.send(event);
        };
        const fail = (error: unknown) => answer({ type: 'turn.plan_failed', error });
        const live = () => host.planning === planning;
        // One microtask after the step, then as many more as the user's callbacks take: a
        // callback that answers at once costs no hop of its own.
        const plan = () => {
          if (!live()) return;
          const settling = andThen(generate(input, planning), (plan) => {
            if (!live()) return undefined;
            if (plan.consumed.length === 0) return answer({ type: 'turn.planned', plan });
            return andThen(prepare(input, plan.consumed, planning), (agent) => {
              if (!live()) return;
              host.agent = agent;
              answer({ type: 'turn.planned', plan });
            });
          });
          if (isPromise(settling)) settling.catch(fail);
        };
        void resolved.then(plan).catch(fail);
      },
      // Once the run has settled, the turn hears it, unless the loop has left the turn (then
      // `leave` has cancelled the run if it had not ended).
      followRun: ({ self }, { turnId, runId }) => {
        const run = runOf({ turnId, runId });
        if (run === undefined) return; // the loop has left the turn
        void run.termination.then((outcome) => {
          if (!hosts.has(turnId)) return;
          const settlement: RunSettlement = {
            status: outcome.status,
            cancel:
              outcome.status === 'CANCELLED'
                ? {
                    kind: 'turn-cancelled',
                    runId: run.id,
                    turnId,
                    cause: outcome.cause,
                    reason: outcome.reason,
                    escalated: outcome.escalated,
                  }
                : undefined,
            agentState: run.safePointState,
            agentStarted: run.agentStarted,
            suspension: run.suspension,
          };
          self.send({
            type: 'run.settled',
            settlement,
            ...(readsEvents ? {} : { handled: defaultHandled(run, outcome) }),
          });
        });
      },
      // On `turn.planned`: writes the plan with the run's start (or why it could not start).
      startRun: assign(({ context, event }) => {
        if (event.type !== 'turn.planned') return {};
        const { turnId } = context.input;
        const host = hostOf(turnId);
        const { plan } = event;
        let run: AgentRun<unknown> | undefined;
        try {
          const { itemIdOf } = config;
          run = spans.prepare(turnId, () =>
            runtime.prepare({
              ownerId,
              sessionId,
              agent: host.agent as Agent<unknown, unknown>,
              input: plan.input,
              ...(itemIdOf === undefined
                ? {}
                : { itemIds: plan.consumed.map((item) => itemIdOf(item as TItem)) }),
            }),
          );
          host.run = run; // code run by start() (an inspector) may stop the loop: `leave` cancels it
          run.start();
        } catch (error) {
          // A run prepared but not started would stay registered: it never runs now.
          if (run !== undefined && !terminalRunStatuses.has(run.status)) {
            cancelNow(run, 'its turn could not start');
          }
          return { plan, runId: undefined, startError: error };
        }
        const started = run;
        spans.started(turnId, started.id, plan.consumed.length);
        host.agent = undefined;
        host.context = {
          turnId,
          runId: started.id,
          consumed: plan.consumed as readonly TItem[],
          get preempted() {
            return host.preempted.signal;
          },
          get stopped() {
            return host.stopped.signal;
          },
          get stopCause() {
            return stopCause();
          },
        };
        return { plan, runId: started.id, startError: undefined };
      }),
      // The turn knows its run by id, through the runtime: a settled run is no longer found.
      cancelRun: assign(({ context, event }) => {
        if (event.type !== 'turn.cancel') return {};
        const run =
          context.runId === undefined
            ? undefined
            : runtime.runs.find(ownerId, sessionId, context.runId);
        // A deadline fixed at the push that has already passed (the turn planned longer than the
        // preempt's timeout) lands as the escalation it promised: immediate, recursive.
        const { request } = event;
        const due = request.deadlineAt !== undefined && request.deadlineAt <= runtime.clock.now();
        const sent = due
          ? { ...request, mode: CancelMode.Immediate, deadlineAt: undefined, recursive: true }
          : request;
        const contributed = run !== undefined && executorOf(run).cancelWith(sent).contributed;
        if (contributed && event.by === 'preempt') spans.preempted(context.input.turnId);
        return { lastCancel: { by: event.by, contributed, reason: event.request.reason } };
      }),
      // Listeners run after this step, so they may push.
      signalPreempted: ({ context }, reason) => {
        const host = hosts.get(context.input.turnId);
        if (host !== undefined) queueMicrotask(() => host.preempted.abort(reason));
      },
      signalStopped: ({ context }, reason) => {
        const host = hosts.get(context.input.turnId);
        if (host !== undefined) queueMicrotask(() => host.stopped.abort(reason));
      },
      forgetTurn: (_, turnId) => {
        hosts.delete(turnId);
        spans.end(turnId);
      },
    },
  });

  return {
    logic,
    contextOf: (turnId) => hosts.get(turnId)?.context,
    leave(turnId) {
      const host = hosts.get(turnId);
      const run = host?.run;
      hosts.delete(turnId);
      spans.end(turnId);
      if (host !== undefined) abandonPlanning(host);
      if (run !== undefined && !terminalRunStatuses.has(run.status)) {
        cancelNow(run, 'turn loop stopped');
      }
    },
    agentStateOf: (turnId) => hosts.get(turnId)?.run?.safePointState,
    clear: () => {
      for (const host of hosts.values()) abandonPlanning(host);
      hosts.clear();
      spans.clear();
    },
    pushed: (item) => spans.pushed(item),
  };
}
