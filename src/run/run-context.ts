/**
 * The {@link RunContext} an executing agent receives. Its costlier parts (the AbortSignal, the
 * agent services) are built only when the agent first reaches for them: a no-op agent pays for
 * neither.
 *
 * @module
 */
import type { SafePointKind } from '../../machines/cancel-request.js';
import type { AgentServices } from '../agent/agent-services.js';
import type { Clock } from '../clock.js';
import { freeze } from 'immer';
import { InvalidArgumentError } from '../errors.js';
import { strictJsonValue } from '../turn-loop/checkpoint.js';
import type { Agent, InterruptCause, RunContext, SpawnOptions } from './agent.js';
import type { AgentRun } from './agent-run.js';

/** @internal What a run context asks of its run (implemented by {@link AgentRun}). */
export interface RunContextHost {
  readonly id: string;
  readonly ownerId: string;
  readonly sessionId: string;
  readonly parentRunId: string | undefined;
  readonly clock: Clock;
  readonly interruptRequested: boolean;
  readonly interruptMessage: string | undefined;
  readonly interruptCause: InterruptCause | undefined;
  /** The run's AbortSignal, created on first use. */
  executorSignal(): AbortSignal;
  /** The run's interrupt signal, created on first use. */
  interruptSignal(): AbortSignal;
  /** The agent services bound to the run, created on first use. */
  agentServices(): AgentServices;
  /** Logs an agent event (already validated); dropped once the run is terminal. */
  emitFromAgent(type: string, payload: Record<string, unknown>): void;
  /** A validated safe point: may throw RunCancelledError. */
  reachSafePoint(kind: SafePointKind, state: unknown): void;
  /** A validated suspension: always throws. */
  suspendRun(request: unknown, state: unknown): never;
  /** Starts a nested run. */
  spawnNested<TInput, TOutput>(
    agent: Agent<TInput, TOutput>,
    input: TInput,
    options: SpawnOptions | undefined,
  ): AgentRun<TOutput>;
}

/** Checks that `value` is JSON data (it is checkpointed) and deep-freezes it. */
function checkedJson(value: unknown, name: string): unknown {
  try {
    JSON.stringify(value, strictJsonValue);
  } catch (error) {
    throw new InvalidArgumentError(
      name,
      `expected \`${name}\` to be JSON data, got ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  return freeze(value, true);
}

const safePointKinds: ReadonlySet<string> = new Set(['afterChatModel', 'afterToolCalls']);

/** Event namespaces only the runtime writes: an agent cannot forge lifecycle events. */
const reservedEventPrefixes = ['run.', 'session.'];

/** Where a run context keeps its run: a symbol, so a spread copy (`{ ...ctx }`) leaves it out. */
const hostKey = Symbol('runplane.runContextHost');

type HostedContext = RunContext & { readonly [hostKey]: RunContextHost };

/** The context's fields read live from its run (see {@link liveFields}). */
type LiveField =
  | 'signal'
  | 'interruptSignal'
  | 'interruptRequested'
  | 'interruptMessage'
  | 'interruptCause'
  | 'inbox'
  | 'history'
  | 'requestApproval';

const hostOf = (ctx: unknown): RunContextHost => (ctx as HostedContext)[hostKey];

/**
 * The context's live fields, read from its run on each access: own, enumerable accessors (so a
 * spread copy gets their values), defined from one set of descriptors shared by every context.
 *
 * @remarks Getters written in an object literal are new closures and accessor pairs for every
 * run, and leave the object in V8's slow dictionary mode: measured here, such a context cost
 * about 2.1 KB and 4 times the time of this one (0.8 KB). One `defineProperty` per field is
 * faster than one `defineProperties` (a microbenchmark here: about 0.6×).
 */
const liveFields: ReadonlyArray<readonly [LiveField, PropertyDescriptor]> = Object.entries<
  (run: RunContextHost) => unknown
>({
  signal: (run: RunContextHost) => run.executorSignal(),
  interruptSignal: (run: RunContextHost) => run.interruptSignal(),
  interruptRequested: (run: RunContextHost) => run.interruptRequested,
  interruptMessage: (run: RunContextHost) => run.interruptMessage,
  interruptCause: (run: RunContextHost) => run.interruptCause,
  inbox: (run: RunContextHost) => run.agentServices().inbox,
  history: (run: RunContextHost) => run.agentServices().history,
  requestApproval: (run: RunContextHost) => run.agentServices().requestApproval,
} satisfies Record<LiveField, (run: RunContextHost) => unknown>).map(([name, read]) => [
  name as LiveField,
  {
    get(this: unknown) {
      return read(hostOf(this));
    },
    enumerable: true,
    configurable: true,
  },
]);

/**
 * @internal Builds the context handed to `agent.execute(input, ctx)` (see {@link RunContext}).
 *
 * @remarks A plain object with its own properties, so an agent may destructure it
 * (`const { emit, signal } = ctx`) or spread it into a context of its own. Its methods are
 * closures over the run (they need no `this`); its live fields are shared accessors
 * ({@link liveFields}).
 */
export function createRunContext(run: RunContextHost): RunContext {
  const ctx: Omit<RunContext, LiveField> = {
    runId: run.id,
    ownerId: run.ownerId,
    sessionId: run.sessionId,
    parentRunId: run.parentRunId,
    clock: run.clock,
    emit(type, payload) {
      if (
        typeof type !== 'string' ||
        type === '' ||
        reservedEventPrefixes.some((prefix) => type.startsWith(prefix))
      ) {
        throw new InvalidArgumentError(
          'type',
          `expected \`type\` to be a non-empty event type outside run.* and session.*, got ${JSON.stringify(type)}`,
        );
      }
      run.emitFromAgent(type, payload ?? {});
    },
    safePoint(kind, state) {
      if (!safePointKinds.has(kind)) {
        throw new InvalidArgumentError(
          'kind',
          `expected \`kind\` to be 'afterChatModel' or 'afterToolCalls', got ${JSON.stringify(kind)}`,
        );
      }
      run.reachSafePoint(kind, state);
    },
    suspend(request, state) {
      return run.suspendRun(checkedJson(request, 'request'), checkedJson(state, 'state'));
    },
    spawn(agent, input, options) {
      return run.spawnNested(agent, input, options);
    },
  };
  Object.defineProperty(ctx, hostKey, { value: run });
  for (const [name, descriptor] of liveFields) Object.defineProperty(ctx, name, descriptor);
  return ctx as RunContext;
}
