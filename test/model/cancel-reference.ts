/**
 * A reference model of one RUNNING run's cancel requests, written from the README's rules
 * ("The controls": `run.cancel`, and the merge of `machines/cancel-request.ts`'s docstring as the
 * README states it), independent of the run machine: an `Immediate` request dominates, safe-point
 * bits OR together, the earliest escalation deadline wins (a deadline is the request's time plus
 * its `timeoutMs`), `recursive` only goes false → true (default: true for `Immediate`), the first
 * reason given is kept, and a request that changes none of these does not contribute; a mode that
 * is not one of these is refused (INVALID_ARGUMENT) whatever the run's state. A pending safe-point cancel lands at
 * the next matching `ctx.safePoint`, or at its deadline as an escalation; an `Immediate` request
 * on top of a pending safe-point cancel is an escalation too (`escalated: true`).
 */
import { CancelMode } from '../../machines/cancel-request.js';

/** One thing that happens to the run. */
export type CancelStep =
  | {
      readonly kind: 'cancel';
      /** Any value: one that is not a cancel mode must be refused. */
      readonly mode: unknown;
      readonly timeoutMs: number | undefined;
      readonly recursive?: boolean;
      readonly reason?: string;
    }
  | { readonly kind: 'safePoint'; readonly point: 'afterChatModel' | 'afterToolCalls' }
  | { readonly kind: 'advance'; readonly ms: number };

/** What the model predicts a user sees after a step. */
export interface CancelView {
  readonly status: 'RUNNING' | 'CANCELLED';
  /** Set once CANCELLED. */
  readonly escalated: boolean | undefined;
  /**
   * For a cancel step: whether it contributed (`'invalid'`: refused with INVALID_ARGUMENT); for a
   * safe point: what it found.
   */
  readonly answer: boolean | 'invalid' | 'cancelled' | 'continued' | 'not_running' | undefined;
  /** Set once CANCELLED: the first reason given. */
  readonly reason?: string | undefined;
}

/** The README's cancel modes: `Immediate` (0), or a non-empty OR of the two safe-point bits. */
const validModes: readonly unknown[] = [
  CancelMode.Immediate,
  CancelMode.AfterChatModel,
  CancelMode.AfterToolCalls,
  CancelMode.AnySafePoint,
];

const bit = {
  afterChatModel: CancelMode.AfterChatModel,
  afterToolCalls: CancelMode.AfterToolCalls,
};

/** The model's state: the merged pending request, the clock, the outcome. */
export class CancelReference {
  #now = 0;
  #pending:
    | { mode: number; deadlineAt: number | undefined; recursive: boolean; reason?: string }
    | undefined;
  #cancelled: { escalated: boolean } | undefined;

  /** Applies a step and returns what a user must then see. */
  step(step: CancelStep): CancelView {
    const answer = this.#apply(step);
    return {
      status: this.#cancelled === undefined ? 'RUNNING' : 'CANCELLED',
      escalated: this.#cancelled?.escalated,
      answer,
      ...(this.#cancelled === undefined ? {} : { reason: this.#pending?.reason }),
    };
  }

  #apply(step: CancelStep): CancelView['answer'] {
    if (step.kind === 'advance') {
      const deadlineAt = this.#pending?.deadlineAt;
      if (this.#cancelled === undefined && deadlineAt !== undefined) {
        if (deadlineAt <= this.#now + step.ms) this.#cancelled = { escalated: true };
      }
      this.#now += step.ms;
      return undefined;
    }
    if (step.kind === 'safePoint') {
      if (this.#cancelled !== undefined) return 'not_running';
      if (this.#pending !== undefined && (this.#pending.mode & bit[step.point]) !== 0) {
        this.#cancelled = { escalated: false };
        return 'cancelled';
      }
      return 'continued';
    }
    if (!validModes.includes(step.mode)) {
      return 'invalid'; // refused before anything else, whatever the run's state
    }
    if (this.#cancelled !== undefined) return false;
    const mode = step.mode as number;
    const immediate = mode === CancelMode.Immediate;
    const next = {
      mode,
      deadlineAt:
        !immediate && step.timeoutMs !== undefined ? this.#now + step.timeoutMs : undefined,
      recursive: step.recursive ?? immediate,
      reason: step.reason,
    };
    const before = this.#pending;
    const merged =
      before === undefined
        ? next
        : {
            mode:
              before.mode === CancelMode.Immediate || immediate
                ? CancelMode.Immediate
                : before.mode | next.mode,
            deadlineAt: [before.deadlineAt, next.deadlineAt]
              .filter((d): d is number => d !== undefined)
              .sort((a, b) => a - b)[0],
            recursive: before.recursive || next.recursive,
            reason: before.reason ?? next.reason,
          };
    const contributed =
      before === undefined ||
      merged.mode !== before.mode ||
      merged.deadlineAt !== before.deadlineAt ||
      merged.recursive !== before.recursive ||
      merged.reason !== before.reason;
    this.#pending = merged;
    if (merged.mode === CancelMode.Immediate) this.#cancelled = { escalated: before !== undefined };
    return contributed;
  }
}
