/**
 * The TurnLoop's requests as pure functions: how stop calls merge, and the cancel requests a
 * stop or a preempt sends to the running turn (docs/architecture.md, "TurnLoop").
 *
 * @module
 */
import { CancelMode, type CancelRequest } from './cancel-request.js';
import type {
  PreemptDraft,
  TurnCancelInfo,
  TurnEnding,
  TurnLoopContext,
  PreemptSpec,
  StopCall,
  StopMode,
  StopRequest,
} from './turn-loop.types.js';

const stopRank: Record<StopMode, number> = { afterTurn: 0, graceful: 1, immediate: 2 };

const earliest = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined ? b : b === undefined ? a : Math.min(a, b);

/** Merges one stop call into the pending request: escalates, never de-escalates. */
export function mergeStop(
  pending: StopRequest | undefined,
  call: StopCall,
  at: number,
): StopRequest {
  const graceDeadlineAt = call.graceMs === undefined ? undefined : at + call.graceMs;
  if (pending === undefined) {
    return {
      mode: call.mode,
      graceDeadlineAt,
      idleForMs: call.idleForMs,
      cause: call.cause === '' ? undefined : call.cause,
      skipCheckpoint: call.skipCheckpoint,
      initiator: call.initiator,
    };
  }
  return {
    mode: stopRank[call.mode] > stopRank[pending.mode] ? call.mode : pending.mode,
    graceDeadlineAt: earliest(pending.graceDeadlineAt, graceDeadlineAt),
    idleForMs: pending.idleForMs ?? call.idleForMs,
    cause: pending.cause ?? (call.cause === '' ? undefined : call.cause),
    skipCheckpoint: pending.skipCheckpoint || call.skipCheckpoint,
    // A shutdown escalates: an earlier idle stop (the user's) must not hide it.
    initiator: call.initiator === 'shutdown' ? 'shutdown' : pending.initiator,
  };
}

/** Why a stop cancels: `turn loop stopped`, with the stop's cause when it has one. */
function stopReason(stop: StopRequest | undefined): string {
  return stop?.cause === undefined ? 'turn loop stopped' : `turn loop stopped: ${stop.cause}`;
}

/** The cancel a committed stop sends to the running turn, or `undefined` for `afterTurn`. */
export function stopCancelRequest(stop: StopRequest): CancelRequest | undefined {
  if (stop.mode === 'afterTurn') return undefined;
  const reason = stopReason(stop);
  return stop.mode === 'immediate'
    ? {
        mode: CancelMode.Immediate,
        deadlineAt: undefined,
        recursive: true,
        cause: 'cancel',
        reason,
        initiator: stop.initiator,
      }
    : {
        mode: CancelMode.AnySafePoint,
        deadlineAt: stop.graceDeadlineAt,
        recursive: true,
        cause: 'cancel',
        reason,
        initiator: stop.initiator,
      };
}

/**
 * A pushed preempt as a draft: its escalation deadline is fixed now, at the push, counting the
 * delay (Eino's preempt timeout), so neither planning nor a parked delivery stretches it.
 */
export function toPreemptDraft(spec: PreemptSpec, pushedAt: number): PreemptDraft {
  return {
    mode: spec.mode,
    deadlineAt:
      spec.timeoutMs === undefined ? undefined : pushedAt + (spec.delayMs ?? 0) + spec.timeoutMs,
  };
}

/** A preempt's cancel request: a deadline makes it escalate and recursive. */
export function preemptCancelRequest(draft: PreemptDraft): CancelRequest {
  return {
    mode: draft.mode,
    deadlineAt: draft.deadlineAt,
    recursive: draft.deadlineAt !== undefined,
    cause: 'preempt',
    reason: 'preempted by a pushed item',
    initiator: 'preempt',
  };
}

/** Merges two undelivered preempts: bits OR, the earliest deadline wins. */
export function mergeDrafts(pending: PreemptDraft | undefined, next: PreemptDraft): PreemptDraft {
  if (pending === undefined) return next;
  return {
    mode: pending.mode | next.mode,
    deadlineAt: earliest(pending.deadlineAt, next.deadlineAt),
  };
}

/**
 * Why a cancelled turn ended the loop, as data (the runtime makes it a `TurnCancelledError` at
 * exit). When the loop's stop took part in the run's cancel, it tells the stop's story, even if
 * a preempt asked first; otherwise it is the cancel that happened.
 */
export function cancelReason(
  ending: TurnEnding,
  context: TurnLoopContext,
): TurnCancelInfo | undefined {
  if (ending.cancel === undefined || ending.cancelledBy !== 'stop') return ending.cancel;
  return { ...ending.cancel, cause: 'cancel', reason: stopReason(context.stop) };
}
