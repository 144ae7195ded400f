/**
 * Cancel requests and how they merge. Pure data, shared by the run machine and the runtime.
 *
 * @remarks
 * The merge follows Eino ADK's agent cancel: an immediate request dominates, safe-point bits
 * OR together, the earliest absolute deadline wins and `recursive` only goes false → true.
 * A later request can escalate a pending one, never de-escalate it.
 *
 * @module
 */

/**
 * Where a cancel may land: a bitmask.
 *
 * @remarks
 * `Immediate` (0) aborts the run's signal at once. The safe-point bits let the agent stop
 * cleanly at the next matching `ctx.safePoint(kind)`.
 */
export const CancelMode = {
  /** Cancel now: the run is CANCELLED at once and its AbortSignal fires. */
  Immediate: 0,
  /** Cancel at the next `ctx.safePoint('afterChatModel')`. */
  AfterChatModel: 1,
  /** Cancel at the next `ctx.safePoint('afterToolCalls')`. */
  AfterToolCalls: 2,
  /** Cancel at whichever safe point comes first. */
  AnySafePoint: 3,
} as const;

/** A value of {@link CancelMode}, or an OR of its safe-point bits. */
export type CancelModeValue = number;

/** The two safe points an agent can report (docs/architecture.md, "Use and vocabulary"). */
export type SafePointKind = 'afterChatModel' | 'afterToolCalls';

/** Why a run was cancelled, as reported in its outcome and its `run.cancelled` event. */
export type CancelCause = 'cancel' | 'timeout' | 'signal' | 'preempt' | 'shutdown';

/**
 * Who asked for a run's cancel or interrupt: the `initiator` of its `run.cancelled` event, and of
 * its `run.completed` event when it ended interrupted (README "Events").
 *
 * - `user`: the caller (`run.cancel()`, `runs.cancel/interrupt`, `user.interrupt` over HTTP, a
 *   TurnLoop's `stop`), or an `AbortSignal` the caller passed at prepare time;
 * - `strategy`: the session's multitask strategy for a newer run (`reject`, or `interrupt` and
 *   its cancel once `graceMs` is over);
 * - `preempt`: a newer run or pushed item that preempts (`strategy: 'preempt'`, TurnLoop
 *   `push(item, { preempt: true })`);
 * - `timeout`: the run's own total deadline;
 * - `shutdown`: the runtime shutting down, or a TurnLoop stopped with `initiator: 'shutdown'`;
 * - `parent`: the nested run's parent run (its cancel flowed down, or it ended).
 */
export type RunInitiator = 'user' | 'strategy' | 'preempt' | 'timeout' | 'shutdown' | 'parent';

/**
 * A pending cancel as the run machine keeps it: every field is the merge of all requests so far.
 */
export interface CancelRequest {
  /** `0` for immediate, else an OR of safe-point bits. */
  readonly mode: CancelModeValue;
  /** Absolute time (clock ms) at which a safe-point cancel escalates to immediate. */
  readonly deadlineAt: number | undefined;
  /** Whether the cancel flows into nested runs started with `ctx.spawn`. */
  readonly recursive: boolean;
  /** The first request's cause wins. */
  readonly cause: CancelCause;
  /** The first non-empty reason wins. */
  readonly reason: string | undefined;
  /** Who asked; the first request's wins, as its cause does. Data, never read from `reason`. */
  readonly initiator: RunInitiator;
}

const safePointBit: Record<SafePointKind, number> = {
  afterChatModel: CancelMode.AfterChatModel,
  afterToolCalls: CancelMode.AfterToolCalls,
};

/** Whether a pending cancel with `mode` lands at a safe point of `kind`. */
export function isSafePointMatch(mode: CancelModeValue, kind: SafePointKind): boolean {
  return (mode & safePointBit[kind]) !== 0;
}

/** Whether `mode` is a valid cancel mode: 0 (immediate) or a non-empty OR of safe-point bits. */
export function isCancelMode(mode: unknown): mode is CancelModeValue {
  return (
    typeof mode === 'number' &&
    Number.isInteger(mode) &&
    mode >= 0 &&
    mode <= CancelMode.AnySafePoint
  );
}

/**
 * Merges a new request into the pending one.
 *
 * @returns the merged request, or the very same `pending` object when `next` adds nothing
 * (so a caller can tell whether a request contributed by identity).
 */
export function mergeCancelRequests(
  pending: CancelRequest | undefined,
  next: CancelRequest,
): CancelRequest {
  if (pending === undefined) return next;
  const mode =
    pending.mode === CancelMode.Immediate || next.mode === CancelMode.Immediate
      ? CancelMode.Immediate
      : pending.mode | next.mode;
  const deadlineAt =
    pending.deadlineAt === undefined
      ? next.deadlineAt
      : next.deadlineAt === undefined
        ? pending.deadlineAt
        : Math.min(pending.deadlineAt, next.deadlineAt);
  const recursive = pending.recursive || next.recursive;
  const reason = pending.reason ?? next.reason;
  if (
    mode === pending.mode &&
    deadlineAt === pending.deadlineAt &&
    recursive === pending.recursive &&
    reason === pending.reason
  ) {
    return pending;
  }
  return {
    mode,
    deadlineAt,
    recursive,
    cause: pending.cause,
    reason,
    initiator: pending.initiator,
  };
}
