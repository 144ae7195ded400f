/**
 * The TurnLoop's turn rules: pure functions of the loop's context that both its setup's actions
 * and guards (`turn-loop.base-setup.ts`, `turn-loop.setup.ts`) and the chart's own inline
 * actions (`turn-loop.machine.ts`) apply: how a turn's ending leaves the loop, what the next turn
 * takes, what releasing a turn does (docs/architecture.md, "TurnLoop").
 *
 * @module
 */
import type { TurnEnding, TurnLoopContext, TurnRecord } from './turn-loop.types.js';

/**
 * How a turn's ending leaves the loop (the rule `endTurn` applies): whether the loop's own
 * preempt or stop cancelled the run, whether the agent never ran (the turn is unplanned), and
 * whether the loop exits after it (an error, a suspension, a stop's cancel, or a cancel by
 * someone else). @internal
 */
export function turnEndingEffect(ending: TurnEnding, closed: boolean) {
  const cancelled = ending.status === 'CANCELLED' && ending.cancelledBy !== 'handler';
  const neverRan = cancelled && !ending.agentStarted;
  const exits =
    ending.error !== undefined ||
    ending.suspension !== undefined ||
    (cancelled && (closed || ending.cancelledBy !== 'preempt'));
  return { cancelled, neverRan, exits };
}

/**
 * The fields that start planning the next turn: its record takes the buffer (and the requeued
 * items or the pending resume), which the loop empties. @internal
 */
export function planNextTurn(context: TurnLoopContext) {
  const turnSeq = context.turnSeq + 1;
  const turn: TurnRecord = {
    turnId: `turn-${turnSeq}`,
    kind: context.resume === undefined ? 'input' : 'resume',
    phase: 'planning',
    taken: context.buffer,
    takenRequeued: context.resume === undefined ? context.requeued : [],
    resume: context.resume,
    plan: undefined,
    runId: undefined,
    pendingPreempt: undefined,
    waitingAcks: [],
  };
  return {
    turnSeq,
    turn,
    buffer: [],
    requeued: context.resume === undefined ? [] : context.requeued,
    resume: undefined,
    needsPlanning: false,
  };
}

/**
 * What releasing the current turn does (`releaseTurn`; `endTurn` applies it in its own step): the
 * delayed-preempt timers bound to the turn to stop, the context to write (with `also` last, which
 * may hold the next turn's record), and the pushes whose acks resolve. `undefined` with no turn.
 * @internal
 */
export function turnRelease(context: TurnLoopContext, also: Partial<TurnLoopContext> | undefined) {
  const turn = context.turn;
  if (turn === undefined) return undefined;
  const { pending } = context.delayed;
  const bound = pending.filter((d) => d.turnId === turn.turnId);
  return {
    stopped: bound.map((d) => `preempt-${d.id}`),
    patch: {
      turn: undefined,
      ...(bound.length === 0
        ? {}
        : {
            delayed: {
              seq: context.delayed.seq,
              pending: pending.filter((d) => d.turnId !== turn.turnId),
            },
          }),
      // Last: it may start the next turn's record (`endTurn` straight into the next turn).
      ...also,
    } satisfies Partial<TurnLoopContext>,
    acks:
      bound.length === 0 ? turn.waitingAcks : [...turn.waitingAcks, ...bound.map((d) => d.pushId)],
  };
}
