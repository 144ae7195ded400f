/**
 * The agent layer's part of a {@link RunContext}: the session inbox, the session history and
 * tool approvals, bound to one run (internal; the runtime builds it for every run).
 *
 * @module
 */
import type { Clock } from '../clock.js';
import { InvalidArgumentError, RunplaneError } from '../errors.js';
import type { SessionKey } from '../events/event-log.js';
import type { Inbox, RunInbox } from '../inbox/inbox.js';
import type { SessionHistory, SessionStore } from '../stores/session-store.js';
import type {
  ApprovalBroker,
  ApprovalDecision,
  ApprovalRequest,
  ApprovalWaitOptions,
} from './approvals.js';

/** What the agent layer adds to every {@link RunContext}. */
export interface AgentServices {
  /** The session's inbox: drain it at the start of each reasoning step. */
  readonly inbox: RunInbox;
  /** The session's conversation history. */
  readonly history: SessionHistory;
  /**
   * Asks for approval of one tool call and waits for `runtime.approve(...)`. Logs
   * `agent.approval_requested` (and `agent.approval_resolved` once answered).
   *
   * @param request - `{ toolUseId, name, args }`
   * @param options - `signal`: withdraw the request when it aborts
   * @returns the decision; a denial is not an error
   * @throws rejects with the run signal's reason (a {@link RunCancelledError}) when the run is
   *   cancelled while waiting, or with `options.signal`'s reason
   * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for an empty `toolUseId` or `name`,
   *   or a `toolUseId` already waiting in this session
   */
  readonly requestApproval: (
    request: ApprovalRequest,
    options?: ApprovalWaitOptions,
  ) => Promise<ApprovalDecision>;
}

/** @internal The runtime's shared stores. */
export interface AgentServiceDeps {
  readonly clock: Clock;
  readonly inbox: Inbox;
  readonly sessionStore: SessionStore;
  readonly approvals: ApprovalBroker;
}

/** @internal The run the services are bound to. */
export interface AgentServiceRun {
  readonly runId: string;
  readonly ownerId: string;
  readonly sessionId: string;
  /** The run's AbortSignal. */
  readonly signal: AbortSignal;
  /** Logs an event of the run; fenced (dropped once the run is terminal). */
  readonly emit: (type: string, payload: Record<string, unknown>) => void;
  /** Logs an event of the run even after it ended (used for `session.error`). */
  readonly emitUnfenced: (type: string, payload: Record<string, unknown>) => void;
  /** Whether the run is not yet terminal (a terminal run takes no more hints). */
  readonly isLive: () => boolean;
  /**
   * Whether the run was settled or abandoned: its late executor must not write history (a
   * new run of the session may be writing already).
   */
  readonly isAbandoned: () => boolean;
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** @internal Binds the agent services to one run. */
export function createAgentServices(deps: AgentServiceDeps, run: AgentServiceRun): AgentServices {
  const key: SessionKey = { ownerId: run.ownerId, sessionId: run.sessionId };

  const guarded = async <T>(operation: 'load' | 'append', fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (error) {
      run.emitUnfenced('session.error', {
        operation: `history.${operation}`,
        code: error instanceof RunplaneError ? error.code : 'STORE_FAILED',
        error: messageOf(error),
      });
      if (error instanceof RunplaneError && error.code === 'STORE_FAILED') throw error;
      throw new RunplaneError(
        'STORE_FAILED',
        `session history ${operation} failed: ${messageOf(error)}`,
        {
          cause: error,
        },
      );
    }
  };

  return {
    inbox: {
      // A terminal run takes no hints: they wait for the session's next run.
      drain: () => (run.isLive() ? deps.inbox.drain({}, key) : []),
    },
    history: {
      // Store calls get no signal: saving after a cancel must not be cancelled (docs/architecture.md, "Use and vocabulary").
      load: () => guarded('load', () => deps.sessionStore.load({}, key)),
      append: (messages) => {
        if (run.isAbandoned()) {
          return Promise.reject(
            new RunplaneError(
              'RUN_CANCELLED',
              `run ${run.runId} was abandoned after its unwind timeout; its history writes are fenced off`,
            ),
          );
        }
        return guarded('append', () => deps.sessionStore.append({}, key, messages));
      },
    },
    async requestApproval(request, options = {}) {
      const { toolUseId, name } = request;
      if (typeof toolUseId !== 'string' || toolUseId === '') {
        throw new InvalidArgumentError(
          'toolUseId',
          `expected \`toolUseId\` to be a non-empty string, got ${String(toolUseId)}`,
        );
      }
      if (typeof name !== 'string' || name === '') {
        throw new InvalidArgumentError(
          'name',
          `expected \`name\` to be a non-empty string, got ${String(name)}`,
        );
      }
      if (deps.approvals.has(key, toolUseId)) {
        throw new InvalidArgumentError(
          'toolUseId',
          `expected \`toolUseId\` to be unique among waiting approvals, got ${JSON.stringify(toolUseId)}`,
        );
      }
      const signals = options.signal === undefined ? [run.signal] : [run.signal, options.signal];
      const waiting = deps.approvals.wait(
        key,
        { toolUseId, name, args: request.args, runId: run.runId, at: deps.clock.now() },
        signals,
      );
      run.emit('agent.approval_requested', { tool_use_id: toolUseId, name, args: request.args });
      try {
        const decision = await waiting;
        run.emit('agent.approval_resolved', {
          tool_use_id: toolUseId,
          outcome: decision.allow ? 'allowed' : 'denied',
          reason: decision.reason ?? 'user',
          message: decision.message ?? null,
        });
        return decision;
      } catch (error) {
        run.emit('agent.approval_resolved', {
          tool_use_id: toolUseId,
          outcome: 'withdrawn',
          message: messageOf(error),
        });
        throw error;
      }
    },
  };
}
