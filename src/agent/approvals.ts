/**
 * Tool approvals: a run waits on `ctx.requestApproval(...)` until someone answers with
 * `runtime.approve(ownerId, sessionId, toolUseId, decision)` (docs/architecture.md, "Agents", §11
 * `user.tool_confirmation`).
 *
 * @remarks From AgentScope's tool confirmation: a denial is not a cancel. The denied tool gets
 * an error result carrying the message and the run goes on; only cancelling the run releases
 * the wait without an answer.
 *
 * @module
 */
import { toSessionKeyString } from '../events/event-log.js';
import type { SessionKey } from '../events/event-log.js';

/** What a run asks to be approved: one tool call. */
export interface ApprovalRequest {
  /** The tool-use id of the call (from `agent.tool_use`); the key an answer names. */
  readonly toolUseId: string;
  /** The tool's name. */
  readonly name: string;
  /** The validated arguments of the call. */
  readonly args: unknown;
}

/** The answer to an {@link ApprovalRequest}. */
export interface ApprovalDecision {
  /** Whether the tool may run. */
  readonly allow: boolean;
  /** For a denial: what the model is told (e.g. "use a read-only query instead"). */
  readonly message?: string | undefined;
  /**
   * Who decided: `user` (the default), or `timeout` when nobody answered in time (the service's
   * approval timeout denies the call; the run goes on).
   */
  readonly reason?: 'user' | 'timeout' | undefined;
}

/** Options of `ctx.requestApproval`. */
export interface ApprovalWaitOptions {
  /** Aborting it withdraws the request (the run's own signal always does). */
  readonly signal?: AbortSignal | undefined;
}

/** A request waiting for its answer, as listed by `runtime.pendingApprovals`. */
export interface PendingApproval extends ApprovalRequest {
  readonly runId: string;
  /** When it was requested, clock ms. */
  readonly at: number;
}

interface Waiter {
  readonly pending: PendingApproval;
  settle(decision: ApprovalDecision): void;
}

const keyOf = (key: SessionKey, toolUseId: string) => `${toSessionKeyString(key)}${toolUseId}`;

/**
 * @internal The runtime's table of waiting approvals, keyed by (ownerId, sessionId, toolUseId):
 * an answer for another owner's session finds nothing.
 */
export class ApprovalBroker {
  readonly #waiting = new Map<string, Waiter>();

  /** Whether a request with this key is waiting. */
  has(key: SessionKey, toolUseId: string): boolean {
    return this.#waiting.has(keyOf(key, toolUseId));
  }

  /**
   * Registers a request; resolves with the answer, or rejects with the reason of the first
   * signal that aborts (the request is then withdrawn).
   */
  wait(
    key: SessionKey,
    pending: PendingApproval,
    signals: readonly AbortSignal[],
  ): Promise<ApprovalDecision> {
    const k = keyOf(key, pending.toolUseId);
    return new Promise<ApprovalDecision>((resolve, reject) => {
      const aborted = signals.find((signal) => signal.aborted);
      if (aborted !== undefined) {
        reject(aborted.reason as Error);
        return;
      }
      const cleanup = () => {
        this.#waiting.delete(k);
        for (const signal of signals) signal.removeEventListener('abort', onAbort);
      };
      function onAbort(this: AbortSignal) {
        cleanup();
        reject(this.reason as Error);
      }
      for (const signal of signals) signal.addEventListener('abort', onAbort, { once: true });
      this.#waiting.set(k, {
        pending,
        settle: (decision) => {
          cleanup();
          resolve(decision);
        },
      });
    });
  }

  /** Answers a waiting request. @returns whether one was waiting under that key */
  decide(key: SessionKey, toolUseId: string, decision: ApprovalDecision): boolean {
    const waiter = this.#waiting.get(keyOf(key, toolUseId));
    if (waiter === undefined) return false;
    waiter.settle(decision);
    return true;
  }

  /** The requests waiting in one session, oldest first. */
  pendingIn(key: SessionKey): PendingApproval[] {
    const prefix = toSessionKeyString(key);
    const out: PendingApproval[] = [];
    for (const [k, waiter] of this.#waiting) if (k.startsWith(prefix)) out.push(waiter.pending);
    return out;
  }
}
