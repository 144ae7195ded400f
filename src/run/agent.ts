/**
 * The agent contract (docs/architecture.md, "Agents"): what runplane runs, and what it hands the agent.
 *
 * @module
 */
import type { SafePointKind } from '../../machines/cancel-request.js';
import type { AgentServices } from '../agent/agent-services.js';
import type { Clock } from '../clock.js';
import type { AgentRun } from './agent-run.js';

/**
 * An agent: any async function of an input and a {@link RunContext}.
 *
 * @remarks The agent should honour `ctx.signal` (pass it to fetch, SDKs, tools), call
 * `ctx.safePoint(kind)` at its clean boundaries, and check `ctx.interruptRequested` to finish
 * early with a recovery output. Whatever it returns is the run's output; whatever it throws
 * makes the run FAILED (unless a cancel already won).
 *
 * @example
 * ```ts
 * const echo: Agent<string, string> = { execute: async (text) => text };
 * ```
 */
export interface Agent<TInput = unknown, TOutput = unknown> {
  execute(input: TInput, ctx: RunContext): Promise<TOutput>;
}

/** Why a run was interrupted (see {@link RunContext.interruptCause}). */
export type InterruptCause = 'interrupt' | 'shutdown';

/** Options of {@link RunContext.spawn}. */
export interface SpawnOptions {
  /** Total budget of the nested run, in ms. */
  readonly timeoutMs?: number;
}

/**
 * What an executing agent sees of its run.
 *
 * @remarks Its methods need no `this`: an agent may destructure the context
 * (`const { emit, signal, safePoint } = ctx`) or spread it. `interruptRequested` and
 * `interruptMessage` are read live from `ctx`: a destructured copy keeps the value of that
 * moment, so read them from `ctx` (or listen to `interruptSignal`). The agent layer adds,
 * through {@link AgentServices}: `inbox.drain()`, `history` (the session's conversation) and
 * `requestApproval(...)`.
 */
export interface RunContext extends AgentServices {
  readonly runId: string;
  readonly ownerId: string;
  readonly sessionId: string;
  /** The run that started this one with `spawn`, for a nested run. */
  readonly parentRunId: string | undefined;
  /** Aborted on an immediate cancel, an escalation, a timeout or an external signal. */
  readonly signal: AbortSignal;
  /** The runtime's clock: wait on it (see `sleep`) so tests can drive time. */
  readonly clock: Clock;
  /** True once `interrupt()` reached this run while RUNNING; finish with a recovery output. */
  readonly interruptRequested: boolean;
  /** The message passed to the first `interrupt(message)`, if any. */
  readonly interruptMessage: string | undefined;
  /**
   * Who interrupted: `'interrupt'` (a user, or a newer run's `interrupt` strategy) or
   * `'shutdown'` (`runtime.shutdown()` lets running runs wrap up); `undefined` until then.
   * An agent should not answer a shutdown as if the user had spoken (no "you interrupted me").
   */
  readonly interruptCause: InterruptCause | undefined;
  /**
   * Aborted when `interrupt()` reaches this run while RUNNING (its reason is an `AbortError`
   * DOMException): race it, or hand it to a model call, to notice an interrupt without polling.
   */
  readonly interruptSignal: AbortSignal;
  /**
   * Logs an event of this run (`type` should be dot-namespaced, e.g. `agent.message`).
   * Dropped once the run is terminal: a late executor cannot write into the log.
   */
  emit(this: void, type: string, payload?: Record<string, unknown>): void;
  /**
   * Reports a safe point. Throws {@link RunCancelledError} (code `RUN_CANCELLED`) when a pending
   * safe-point cancel matches `kind`, or when the run is already cancelled.
   *
   * @param kind - `'afterChatModel'` or `'afterToolCalls'`
   * @param state - optional agent state captured here (kept as the run's last safe-point state)
   */
  safePoint(this: void, kind: SafePointKind, state?: unknown): void;
  /**
   * Suspends the run for outside input (Eino's business interrupt, `compose.Interrupt`): a tool
   * approval, a form. Throws a {@link RunSuspendedError} (code `RUN_SUSPENDED`): let it
   * propagate out of `execute`. The run ends FAILED with it; in a TurnLoop the turn ends as
   * suspended, the loop exits with `exitReason: 'suspended'` and saves a mid-turn checkpoint
   * holding `state`, and a later `run({ answer })` hands the answer to `genResume`.
   *
   * @param request - what the agent asks for; JSON data (it is checkpointed), frozen here
   * @param state - the agent's state to resume from (as `safePoint(kind, state)` keeps it)
   * @throws {@link RunSuspendedError} (`RUN_SUSPENDED`) always, unless: {@link RunCancelledError}
   *   when a cancel already ended the run (the cancel wins), {@link InvalidArgumentError}
   *   (`INVALID_ARGUMENT`) when `request` or `state` is not JSON data
   */
  suspend(this: void, request: unknown, state?: unknown): never;
  /**
   * Starts a nested run of `agent` in this run's session, outside the session queue. A
   * recursive cancel of this run reaches it; when this run ends, a nested run still going is
   * cancelled.
   *
   * @returns the nested run (already started); await `result()` for its output
   * @throws {@link RunCancelledError} when this run is already terminal
   */
  spawn<TInput, TOutput>(
    this: void,
    agent: Agent<TInput, TOutput>,
    input: TInput,
    options?: SpawnOptions,
  ): AgentRun<TOutput>;
}
