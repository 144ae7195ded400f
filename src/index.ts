/**
 * runplane: run control for AI agents on XState v5.
 *
 * A short tour:
 * - {@link createRuntime} makes a runtime; `runtime.prepare({ ownerId, sessionId, agent, input })`
 *   gives an {@link AgentRun} in status CREATED, already findable in `runtime.runs`.
 * - `run.start()` queues it in its session (one RUNNING run per session, FIFO);
 *   `run.cancel({ mode })` stops it at once or at a safe point; `run.interrupt()` asks the agent
 *   to wrap up; `await run.termination` tells how it ended, once its agent has settled.
 * - `runtime.session(ownerId, sessionId)` controls a whole conversation; `runtime.shutdown()`
 *   drains gracefully.
 *
 * @module
 */
export { CancelMode, isSafePointMatch, mergeCancelRequests } from '../machines/cancel-request.js';
export type {
  CancelCause,
  CancelModeValue,
  CancelRequest,
  SafePointKind,
} from '../machines/cancel-request.js';
export { runMachine, terminalRunStatuses } from '../machines/run.machine.js';
export type {
  RunStatus,
  RunMachineContext,
  RunMachineEvent,
  RunMachineInput,
} from '../machines/run.machine.js';
export { sessionMachine } from '../machines/session.machine.js';
export type { SessionStrategy } from '../machines/session.machine.js';
export { systemClock, sleep } from './clock.js';
export type { Clock } from './clock.js';
export {
  RunplaneError,
  RunAlreadyStartedError,
  RunCancelledError,
  SessionBusyError,
  InvalidArgumentError,
  ShuttingDownError,
  NotFoundError,
  isCancellation,
} from './errors.js';
export type { RunplaneErrorCode } from './errors.js';
export { createMemoryEventLog } from './events/memory-event-log.js';
export type { MemoryEventLogOptions } from './events/memory-event-log.js';
export type {
  EventLog,
  NewEvent,
  ReadOptions,
  RunplaneEvent,
  SessionKey,
  StoreContext,
} from './events/event-log.js';
export { AgentRun } from './run/agent-run.js';
export type { CancelOptions } from './run/agent-run.js';
export type { Agent, RunContext, SpawnOptions } from './run/agent.js';
export type { CancelOutcome, CancelResult, RunOutcome } from './run/run-outcome.js';
export type { Session } from './session/session.js';
export { createRuntime } from './runtime/create-runtime.js';
export type {
  PrepareOptions,
  RunRegistry,
  Runtime,
  RuntimeOptions,
} from './runtime/create-runtime.js';
