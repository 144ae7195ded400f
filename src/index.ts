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
 * - Inspection: `createRuntime({ inspect })` takes any XState inspection observer;
 *   {@link createTimelineRecorder} writes a compact JSONL trace of run and session lifecycles
 *   (`runplane timeline trace.jsonl -o timeline.html` draws it), {@link createTimelineHub} serves
 *   the same transitions live, per owner, for the viewer page of {@link renderTimelinePage}.
 * - Agents: {@link createReActAgent} on a {@link ChatModel} ({@link createOpenAIModel} for any
 *   OpenAI-compatible endpoint, {@link createScriptedModel} for tests) with tools from
 *   {@link defineTool}; `runtime.inbox.push(...)` feeds hints to a running agent,
 *   `runtime.approve(...)` answers tool approvals, and the session store keeps the history
 *   (`createSqliteSessionStore` from `runplane/stores/sqlite`).
 * - Observability: every run is an OpenTelemetry span (`@opentelemetry/api`; a no-op until an
 *   application registers a tracer provider), its numbers go to a {@link RunMetrics} sink
 *   ({@link createOtelRunMetrics} by default).
 * - {@link createTurnLoop} turns a stream of pushed items into turns (one run each) with
 *   preemption, stop escalation and checkpoints in a {@link CheckpointStore}
 *   ({@link createMemoryCheckpointStore} here, SQLite from `runplane/stores/sqlite`).
 *
 * @module
 */
export { CancelMode } from '../machines/cancel-request.js';
export type { CancelCause, CancelModeValue, SafePointKind } from '../machines/cancel-request.js';
export type { RunStatus } from '../machines/run.types.js';
export type { StopMode } from '../machines/turn-loop.types.js';
export type { SessionStrategy } from '../machines/session.machine.js';
export { systemClock, sleep } from './clock.js';
export type { Clock } from './clock.js';
export {
  RunplaneError,
  RunAlreadyStartedError,
  RunCancelledError,
  RunSuspendedError,
  SessionBusyError,
  SessionQueueFullError,
  InvalidArgumentError,
  ShuttingDownError,
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
export type { Agent, InterruptCause, RunContext, SpawnOptions } from './run/agent.js';
export type { CancelOutcome, CancelResult, RunOutcome } from './run/run-outcome.js';
export type { RunInitiator } from './run/run-initiator.js';
export type { Session } from './session/session.js';
export { createRuntime } from './runtime/create-runtime.js';
// Agent layer (issue 4): models, tools, the ReAct agent, inbox, session history.
export type {
  AssistantMessage,
  AssistantStop,
  ChatMessage,
  SystemMessage,
  ToolCall,
  ToolMessage,
  UserMessage,
} from './agent/messages.js';
export { chatMessageSchema, createMessageId } from './agent/messages.js';
export type {
  ChatChunk,
  ChatFinishReason,
  ChatModel,
  ChatStreamOptions,
  ChatUsage,
  ToolSpec,
} from './agent/chat-model.js';
export { ModelError } from './agent/model-error.js';
export { createOpenAIModel, toOpenAIMessages } from './agent/openai-model.js';
export type { OpenAIModelOptions } from './agent/openai-model.js';
export { createScriptedModel } from './agent/scripted-model.js';
export type {
  ScriptEntry,
  ScriptedModel,
  ScriptedModelOptions,
  ScriptedReply,
  ScriptedRequest,
  ScriptedToolCall,
} from './agent/scripted-model.js';
export { createGate } from './agent/gate.js';
export type { Gate } from './agent/gate.js';
export { defineTool } from './agent/tool.js';
export type { Tool, ToolArgsParse, ToolContext, ToolDefinition } from './agent/tool.js';
export type { ToolResultStatus } from './agent/tool-runner.js';
export { createReActAgent } from './agent/react-agent.js';
export type {
  ReActAgentOptions,
  ReActHistoryMode,
  RecoveryInfo,
  ReActResult,
  ReActResumeInput,
  ReActSafePointState,
  ReActStopReason,
} from './agent/react-agent.js';
export { ContextOverBudgetError, estimateTokens } from './agent/history-policy.js';
export type { HistoryPolicy } from './agent/history-policy.js';
export { agentAsTool } from './agent/agent-as-tool.js';
export type { AgentAsToolOptions } from './agent/agent-as-tool.js';
export type {
  ApprovalDecision,
  ApprovalRequest,
  ApprovalWaitOptions,
  PendingApproval,
} from './agent/approvals.js';
export type { AgentServices } from './agent/agent-services.js';
export { createMemoryInbox } from './inbox/memory-inbox.js';
export type { Hint, HintInput, Inbox, RunInbox, RuntimeInbox } from './inbox/inbox.js';
export { createMemorySessionStore } from './stores/memory-session-store.js';
export type { SessionHistory, SessionStore } from './stores/session-store.js';
export type {
  PrepareOptions,
  RunRegistry,
  Runtime,
  RuntimeOptions,
} from './runtime/create-runtime.js';
export { createOtelRunMetrics } from './observability/run-metrics.js';
export type { EndedRun, RunMetrics } from './observability/run-metrics.js';
export type { ModelUsage } from './observability/run-telemetry.js';
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
  TurnLoopRunOptions,
} from './turn-loop/turn-loop-types.js';
export type { TurnSuspension } from '../machines/turn-loop.types.js';
export {
  checkpointFormat,
  checkpointVersion,
  jsonCheckpointCodec,
} from './turn-loop/checkpoint.js';
export type { Checkpoint, CheckpointCodec, PersistedLoopSnapshot } from './turn-loop/checkpoint.js';
export type { CheckpointStore, StoredCheckpoint } from './stores/checkpoint-store.js';
export { createMemoryCheckpointStore } from './stores/memory-checkpoint-store.js';
// Inspection and timelines (issue 6).
export { combineInspectors, createTimelineRecorder } from './inspect/timeline-recorder.js';
export type {
  TimelineRecorder,
  TimelineRecorderOptions,
  TimelineSink,
} from './inspect/timeline-recorder.js';
export { createTimelineHub } from './inspect/timeline-hub.js';
export type {
  TimelineEntry,
  TimelineHub,
  TimelineHubOptions,
  TimelineStreamOptions,
} from './inspect/timeline-hub.js';
export {
  encodeTimelineTransition,
  parseTimelineTrace,
  timelineActorKinds,
} from './inspect/timeline-transition.js';
export type { TimelineActorKind, TimelineTransition } from './inspect/timeline-transition.js';
export { renderTimelinePage } from './inspect/timeline-page.js';
export type { TimelinePageOptions } from './inspect/timeline-page.js';
export { toMermaidStateDiagram } from './inspect/mermaid-diagram.js';
