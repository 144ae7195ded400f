/**
 * What a run and a session need from their runtime (internal).
 *
 * @module
 */
import type { InspectionEvent } from 'xstate';
import type { RunMachineContext, RunStatus, runMachine } from '../../machines/run.machine.js';
import type { AgentServices } from '../agent/agent-services.js';
import type { Clock } from '../clock.js';
import type { EventLog } from '../events/event-log.js';
import type { Agent, SpawnOptions } from '../run/agent.js';
import type { AgentRun } from '../run/agent-run.js';
import type { RunOutcome } from '../run/run-outcome.js';

/** The run machine with the runtime's executor and timers provided. */
export type BoundRunMachine = typeof runMachine;

/** @internal The services a runtime gives its runs. */
export interface RuntimeCore {
  readonly clock: Clock;
  readonly eventLog: EventLog;
  readonly unwindTimeoutMs: number;
  readonly runMachine: BoundRunMachine;
  /** The user's inspector, already guarded (`guardInspect`): it cannot throw into an actor. */
  readonly inspect: ((event: InspectionEvent) => void) | undefined;
  /** Puts a top-level run into its session (applying its strategy). */
  startRun(run: AgentRun<unknown>): void;
  /** Creates, registers and starts a nested run. */
  spawnNested<TOutput>(
    parent: AgentRun<unknown>,
    agent: Agent<unknown, TOutput>,
    input: unknown,
    options: SpawnOptions | undefined,
  ): AgentRun<TOutput>;
  /** Logs one event of `run` in its session's event log. */
  appendEvent(run: AgentRun<unknown>, type: string, payload: Record<string, unknown>): void;
  /** A run changed status: log it, tell its session. */
  onStatusChange(
    run: AgentRun<unknown>,
    from: RunStatus,
    to: RunStatus,
    context: RunMachineContext & { error?: unknown },
  ): void;
  /** A run is terminal and its agent settled (or was abandoned). */
  onSettled(run: AgentRun<unknown>, outcome: RunOutcome<unknown>): void;
  /** Reports an error that must not escape (listener errors, actor bugs). */
  reportError(error: unknown): void;
  /**
   * Agent layer: the inbox, history and approvals bound to `run` (its signal and its fenced
   * `emit` given by the run).
   */
  agentServices(
    run: AgentRun<unknown>,
    bound: {
      signal: AbortSignal;
      emit: (type: string, payload: Record<string, unknown>) => void;
      /** Not yet terminal: may take hints. */
      isLive: () => boolean;
      /** Settled or abandoned: an executor still going past this point writes nothing. */
      isAbandoned: () => boolean;
    },
  ): AgentServices;
}
