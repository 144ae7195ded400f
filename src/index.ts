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
 * - {@link createTurnLoop} turns a stream of pushed items into turns (one run each) with
 *   preemption, stop escalation and checkpoints in a {@link CheckpointStore}
 *   ({@link createMemoryCheckpointStore} here, SQLite from `runplane/stores/sqlite`).
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
export { turnLoopMachine } from '../machines/turn-loop.machine.js';
export type {
  StopMode,
  TurnLoopContext,
  TurnLoopEvent,
  TurnLoopInput,
} from '../machines/turn-loop.machine.js';
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
  TurnCancelledError,
  LateItemsTakenError,
  CheckpointCorruptError,
  StoreFailedError,
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
export { createTurnLoop } from './turn-loop/create-turn-loop.js';
export type {
  GenInputInfo,
  GenInputResult,
  GenResumeArgs,
  PreemptOptions,
  PrepareAgentInfo,
  PushOptions,
  PushResult,
  PushStrategy,
  StopOptions,
  TurnContext,
  TurnLoop,
  TurnLoopConfig,
  TurnLoopExit,
} from './turn-loop/turn-loop-types.js';
export {
  checkpointFormat,
  checkpointVersion,
  jsonCheckpointCodec,
} from './turn-loop/checkpoint.js';
export type { Checkpoint, CheckpointCodec, PersistedLoopSnapshot } from './turn-loop/checkpoint.js';
export type { CheckpointStore } from './stores/checkpoint-store.js';
export { createMemoryCheckpointStore } from './stores/memory-checkpoint-store.js';
