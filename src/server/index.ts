/**
 * `runplane/server`: the HTTP session-events service (`runplane serve`).
 *
 * A short tour:
 * - {@link startServer} opens the SQLite database, recovers runs a dead process left
 *   unfinished ({@link recoverCrashedRuns}), and serves {@link createServiceApp} on
 *   @hono/node-server; `server.shutdown()` drains gracefully, {@link serveUntilSignal} does so
 *   on SIGTERM/SIGINT.
 * - {@link createServiceApp} is the service as a web-standard `fetch(Request) → Response`
 *   handler (a Hono app): embed it in any runtime, or test it with `app.request(...)`. Its
 *   routes reach sessions only through a {@link SessionAccess}: commands for the session's one
 *   writer and reads for any instance (docs/architecture.md, "Event log and HTTP service").
 * - {@link createDemoAgent} is the default agent: the ReAct agent with a calculator and a
 *   clock, on a scripted model that streams at a human pace.
 *
 * @module
 */
export { bearerToken, createDevToken, createTokenAuthenticator, parseTokenList } from './auth.js';
export type { Authenticate } from './auth.js';
export { evaluateArithmetic } from './calculator.js';
export { chatPageHtml } from './chat-page.js';
export {
  createDemoAgent,
  createDemoModel,
  createDemoTools,
  demoInstructions,
  planDemoReply,
} from './demo-agent.js';
export type { DemoAgentOptions, DemoModelOptions, DemoToolName } from './demo-agent.js';
export { HttpError, toHttpError } from './http-error.js';
export type { HttpErrorCode, HttpErrorData } from './http-error.js';
export { recoverCrashedRuns } from './recover.js';
export type { CrashedRun } from './recover.js';
export { parseServeArgs, runServeCommand, serveUsage } from './serve-command.js';
export { serveUntilSignal, startServer } from './serve.js';
export type { ClusterServeOptions, OpenAIEndpoint, RunningServer, ServeOptions } from './serve.js';
export { createServiceApp, toRecordOutcome } from './service-app.js';
export { createMemoryIdempotencyKeys } from '../stores/idempotency-keys.js';
export type { Service, ServiceOptions } from './service-app.js';
export type { StoreHealth } from './store-health.js';
export type {
  IdempotencyKeyAccess,
  SessionAccess,
  SessionCommand,
  SessionCommandAnswer,
  SessionCommandAnswers,
  SessionEventReads,
  SessionHolder,
  SessionSettings,
  SessionView,
} from './session-access.js';
export { formatErrorFrame, formatEventFrame, heartbeatFrame, toEventJson } from './sse.js';
export type { EventJson } from './sse.js';
