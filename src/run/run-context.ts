/**
 * The {@link RunContext} an executing agent receives: one small object per run, whose
 * methods live on a prototype and whose costlier parts (the AbortSignal, the agent services)
 * are built only when the agent first reaches for them. A no-op agent pays for neither.
 *
 * @module
 */
import type { SafePointKind } from '../../machines/cancel-request.js';
import type { AgentServices } from '../agent/agent-services.js';
import type { Clock } from '../clock.js';
import { InvalidArgumentError } from '../errors.js';
import type { Agent, RunContext, SpawnOptions } from './agent.js';
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
  /** Starts a nested run. */
  spawnNested<TInput, TOutput>(
    agent: Agent<TInput, TOutput>,
    input: TInput,
    options: SpawnOptions | undefined,
  ): AgentRun<TOutput>;
}

const safePointKinds: ReadonlySet<string> = new Set(['afterChatModel', 'afterToolCalls']);

/** Event namespaces only the runtime writes: an agent cannot forge lifecycle events. */
const reservedEventPrefixes = ['run.', 'session.'];

/** @internal The context handed to `agent.execute(input, ctx)`. See {@link RunContext}. */
export class AgentRunContext implements RunContext {
  readonly #run: RunContextHost;

  constructor(run: RunContextHost) {
    this.#run = run;
  }

  get runId(): string {
    return this.#run.id;
  }

  get ownerId(): string {
    return this.#run.ownerId;
  }

  get sessionId(): string {
    return this.#run.sessionId;
  }

  get parentRunId(): string | undefined {
    return this.#run.parentRunId;
  }

  get clock(): Clock {
    return this.#run.clock;
  }

  get signal(): AbortSignal {
    return this.#run.executorSignal();
  }

  get interruptSignal(): AbortSignal {
    return this.#run.interruptSignal();
  }

  get interruptRequested(): boolean {
    return this.#run.interruptRequested;
  }

  get interruptMessage(): string | undefined {
    return this.#run.interruptMessage;
  }

  get inbox(): AgentServices['inbox'] {
    return this.#run.agentServices().inbox;
  }

  get history(): AgentServices['history'] {
    return this.#run.agentServices().history;
  }

  get requestApproval(): AgentServices['requestApproval'] {
    return this.#run.agentServices().requestApproval;
  }

  emit(type: string, payload?: Record<string, unknown>): void {
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
    this.#run.emitFromAgent(type, payload ?? {});
  }

  safePoint(kind: SafePointKind, state?: unknown): void {
    if (!safePointKinds.has(kind)) {
      throw new InvalidArgumentError(
        'kind',
        `expected \`kind\` to be 'afterChatModel' or 'afterToolCalls', got ${JSON.stringify(kind)}`,
      );
    }
    this.#run.reachSafePoint(kind, state);
  }

  spawn<TInput, TOutput>(
    agent: Agent<TInput, TOutput>,
    input: TInput,
    options?: SpawnOptions,
  ): AgentRun<TOutput> {
    return this.#run.spawnNested(agent, input, options);
  }
}
