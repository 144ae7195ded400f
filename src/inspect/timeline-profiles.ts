/**
 * How the timeline reads each machine it follows: who an actor is (from its context) and why a
 * transition happened. Keyed by machine id; a machine without a profile is not followed.
 *
 * @remarks Adding a machine to the timeline is one entry here (and its id in
 * {@link TimelineActorKind}).
 *
 * @module
 */
import type { AnyEventObject } from 'xstate';
import type { TimelineActorKind } from './timeline-transition.js';

/** Who an actor is on the timeline. */
export interface TimelineIdentity {
  /** Timeline id: run id, session key or turn loop id. */
  readonly id: string;
  /** Timeline id of the parent, or `null` for a root. */
  readonly parentId: string | null;
  /** The owner the actor's transitions belong to (scopes the live hub); `undefined` if none. */
  readonly ownerId: string | undefined;
}

/** A transition as a profile sees it, to name its cause. */
export interface TimelineStep {
  readonly event: AnyEventObject;
  /** Dotted state path before (`null` for the first snapshot). */
  readonly from: string | null;
  /** Dotted state path after. */
  readonly to: string;
  /** The actor's context after the transition. */
  readonly context: Readonly<Record<string, unknown>>;
}

/** How one machine appears on the timeline. */
export interface TimelineProfile {
  readonly actor: TimelineActorKind;
  /** The actor's identity from its context; `undefined` to leave the actor out. */
  identify(
    context: Readonly<Record<string, unknown>>,
    actorRef: object,
  ): TimelineIdentity | undefined;
  /**
   * The cause of a step, or `undefined`. A step that changes no state is recorded only when
   * this returns a cause (an interrupt, a merged cancel, a preempt).
   */
  cause(step: TimelineStep): string | undefined;
  /**
   * The path the timeline shows for the actor's dotted state `path`. @default the path itself
   *
   * @remarks A run shows its status: its actor's final state `settled` (reached once the agent
   * and nested runs settled) reads as the terminal status it settled in.
   */
  statePath?(path: string, context: Readonly<Record<string, unknown>>): string;
  /**
   * Whether a step that changed the state is recorded. @default every state change
   *
   * @remarks The actor's `from` always stays true: a skipped step still moves it.
   */
  keep?(step: TimelineStep, cause: string | undefined): boolean;
}

const str = (value: unknown): string | undefined =>
  typeof value === 'string' && value !== '' ? value : undefined;

/**
 * The timeline id of a session: `ownerId/sessionId`.
 *
 * @param ownerId - the owner
 * @param sessionId - the session
 * @returns the session key used as `id` of a session and `parentId` of its top-level runs
 * @throws never
 */
export function toSessionKey(ownerId: string, sessionId: string): string {
  return `${ownerId}/${sessionId}`;
}

const runProfile: TimelineProfile = {
  actor: 'run',
  statePath(path, context) {
    if (path !== 'settled' && path !== 'CANCELLED.draining') return path;
    const status = str(context.status) ?? 'CANCELLED';
    if (status !== 'CANCELLED') return status;
    return context.executor === 'abandoned' ? 'CANCELLED.abandoned' : 'CANCELLED.settled';
  },
  identify(context) {
    const runId = str(context.runId);
    const ownerId = str(context.ownerId);
    const sessionId = str(context.sessionId);
    if (runId === undefined || ownerId === undefined || sessionId === undefined) return undefined;
    return {
      id: runId,
      parentId: str(context.parentRunId) ?? toSessionKey(ownerId, sessionId),
      ownerId,
    };
  },
  cause({ event, from, to, context }) {
    switch (event.type) {
      case 'run.cancel': {
        // From a pending safe-point cancel straight to CANCELLED: a later immediate request won.
        if (from === 'cancelling' && to.startsWith('CANCELLED')) return 'escalation';
        const request = (event as { request?: { cause?: unknown } }).request;
        return str(request?.cause) ?? 'cancel';
      }
      case 'run.interrupt':
        return 'interrupt';
      case 'run.deadline':
        return 'timeout';
      case 'run.cancel_deadline':
        return 'escalation';
      case 'run.safe_point':
        return str(context.cause);
      case 'agent.done':
        return to === 'COMPLETED' && context.interruptRequested === true
          ? 'interrupted'
          : undefined;
      default:
        return to === 'CANCELLED.abandoned' ? 'unwind_timeout' : undefined;
    }
  },
};

const sessionProfile: TimelineProfile = {
  actor: 'session',
  identify(context) {
    const ownerId = str(context.ownerId);
    const sessionId = str(context.sessionId);
    if (ownerId === undefined || sessionId === undefined) return undefined;
    return { id: toSessionKey(ownerId, sessionId), parentId: null, ownerId };
  },
  cause({ event, from, to }) {
    if (event.type === 'session.start') {
      const { strategy } = event as { strategy?: unknown };
      if (strategy === 'preempt') return 'preempt';
      if (strategy === 'interrupt' && to === 'interrupting' && from !== to) return 'interrupt';
      return undefined;
    }
    // The interrupt strategy's grace ran out: the active run is cancelled.
    if (from === 'interrupting' && event.type.startsWith('xstate.after.')) return 'escalation';
    return undefined;
  },
  /**
   * The admission cycle (`waiting` ⇄ `active`, once per run) is left out: each run's
   * own `QUEUED → RUNNING` line (`run.admit`) records that moment, and two session lines per run
   * would be a third of a trace. Kept: the first line, entering or leaving `idle` or
   * `interrupting`, and every step with a cause.
   */
  keep({ from, to }, cause) {
    if (cause !== undefined || from === null) return true;
    const marked = (state: string) => state === 'idle' || state === 'interrupting';
    return marked(from) || marked(to);
  },
};

/** The `loop` region of a turn loop's dotted path (`loop.turn.running,stop.open` → `turn.running`). */
const loopRegion = (path: string): string => /(?:^|,)loop\.([^,]+)/.exec(path)?.[1] ?? path;

/** The turn loop's cause for a step the loop machine took: what was pushed, stopped, saved. */
function turnLoopCause(event: AnyEventObject, context: Readonly<Record<string, unknown>>) {
  switch (event.type) {
    case 'loop.push': {
      const receipt = context.lastPush as { outcome?: unknown; preempt?: unknown } | undefined;
      if (receipt?.outcome === 'refused') return 'late';
      if (receipt?.outcome !== 'accepted') return undefined;
      return receipt.preempt === undefined ? 'push' : 'preempt';
    }
    case 'loop.preempt_due':
      return 'preempt';
    case 'loop.stop':
      return str((event as { call?: { cause?: unknown } }).call?.cause) ?? 'stop';
    case 'turn.ended': {
      const ending = (event as { ending?: { cancelledBy?: unknown; error?: unknown } }).ending;
      if (ending?.error !== undefined) return 'error';
      return str(ending?.cancelledBy);
    }
    case 'turn.failed':
      return 'error';
    case 'xstate.done.actor.loadCheckpoint':
      return (event as { output?: unknown }).output === undefined ? undefined : 'checkpoint';
    case 'xstate.done.actor.saveCheckpoint':
    case 'xstate.done.actor.deleteCheckpoint':
    case 'xstate.done.actor.discardCheckpoint':
      return 'checkpoint';
    default:
      return event.type.startsWith('xstate.error.actor.') ? 'error' : undefined;
  }
}

/**
 * A TurnLoop (`machines/turn-loop.machine.ts`, docs/architecture.md, "TurnLoop"): one lane per
 * loop, under its session. It shows the `loop` region with the turn's id in place of `turn`
 * (`turn-3.planning → turn-3.running → waiting → exiting.saving → exited`), and as causes the
 * pushes (`push`, `preempt`, `late`), stops (`stop` or the stop's cause), who ended a turn
 * (`preempt`, `stop`, `handler`, `error`) and checkpoint reads and writes (`checkpoint`).
 */
const turnLoopProfile: TimelineProfile = {
  actor: 'turn-loop',
  identify(context) {
    const settings = context.settings as Record<string, unknown> | undefined;
    const loopId = str(settings?.loopId);
    const ownerId = str(settings?.ownerId);
    const sessionId = str(settings?.sessionId);
    if (loopId === undefined || ownerId === undefined || sessionId === undefined) return undefined;
    return { id: loopId, parentId: toSessionKey(ownerId, sessionId), ownerId };
  },
  statePath(path, context) {
    const region = loopRegion(path);
    const turnId = str((context.turn as { turnId?: unknown } | undefined)?.turnId);
    return turnId !== undefined && region.startsWith('turn.')
      ? `${turnId}${region.slice('turn'.length)}`
      : region;
  },
  cause: ({ event, context }) => turnLoopCause(event, context),
};

/** The profiles the timeline uses, by machine id (`run`, `session`, `turnLoop`). */
export const timelineProfiles: Readonly<Record<string, TimelineProfile>> = {
  run: runProfile,
  session: sessionProfile,
  turnLoop: turnLoopProfile,
};
