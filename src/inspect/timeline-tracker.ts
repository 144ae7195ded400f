/**
 * The core of the recorder and the hub: reduces XState inspection events to lifecycle
 * transitions.
 *
 * @remarks
 * Of the five inspection event types XState emits, two matter: `@xstate.microstep` says whether a
 * transition was taken at all (its `_transitions`), `@xstate.snapshot` gives the state once the
 * macrostep has settled (a state passed within one macrostep, such as QUEUED for a run admitted as it starts, never shows). A transition
 * is reported when the dotted state path changed, or when a transition that changed no state has
 * a cause (see {@link TimelineProfile.cause}). `@xstate.actor`, `@xstate.event` and
 * `@xstate.action` are ignored, which keeps the cost per event to a type check.
 *
 * @module
 */
import type { AnyEventObject, InspectionEvent, StateValue } from 'xstate';
import type { Clock } from '../clock.js';
import { timelineProfiles, type TimelineProfile } from './timeline-profiles.js';
import type { TimelineTransition } from './timeline-transition.js';

/** Receives each transition with the owner it belongs to. */
export type TimelineTransitionListener = (
  transition: TimelineTransition,
  ownerId: string | undefined,
) => void;

interface ActorTrack {
  readonly profile: TimelineProfile;
  readonly id: string;
  readonly parentId: string | null;
  readonly ownerId: string | undefined;
  state: string | undefined;
  /** A transition was taken since the last snapshot. */
  tookTransition: boolean;
}

interface InspectedMachineSnapshot {
  readonly status?: string;
  readonly value?: StateValue;
  readonly context?: unknown;
  readonly machine?: { readonly id?: string };
}

/**
 * A state value as a dotted path: `'QUEUED'`, `{ CANCELLED: 'unwinding' }` → `'CANCELLED.unwinding'`;
 * regions of a parallel state are joined with `,`.
 *
 * @param value - an XState state value
 * @returns the dotted path
 * @throws never
 */
export function toStatePath(value: StateValue): string {
  if (typeof value === 'string') return value;
  return Object.entries(value)
    .map(([key, child]) => {
      if (child === undefined) return key;
      if (typeof child === 'string') return `${key}.${child}`;
      const inner = toStatePath(child);
      return inner === '' ? key : `${key}.${inner}`;
    })
    .join(',');
}

/**
 * Creates an inspection observer that calls `listener` once per lifecycle transition.
 *
 * @param options.clock - stamps each transition with `clock.now()` (ms)
 * @param options.listener - receives the transition and its owner
 * @param options.onError - receives whatever the listener or a profile throws
 * @param options.profiles - machine id → profile @default {@link timelineProfiles}
 * @returns the function to pass as `inspect`
 * @throws never: errors go to `options.onError`, never into the actor being inspected
 */
export function createTimelineTracker(options: {
  readonly clock: Pick<Clock, 'now'>;
  readonly listener: TimelineTransitionListener;
  readonly onError: (error: unknown) => void;
  readonly profiles?: Readonly<Record<string, TimelineProfile>>;
}): (event: InspectionEvent) => void {
  const { clock, listener, onError } = options;
  const profiles = options.profiles ?? timelineProfiles;
  const tracks = new WeakMap<object, ActorTrack | null>();

  const trackOf = (actorRef: object, snapshot: InspectedMachineSnapshot): ActorTrack | null => {
    let track = tracks.get(actorRef);
    if (track !== undefined) return track;
    const machineId = snapshot.machine?.id;
    const profile = machineId === undefined ? undefined : profiles[machineId];
    const context = snapshot.context;
    const identity =
      profile === undefined || typeof context !== 'object' || context === null
        ? undefined
        : profile.identify(context as Record<string, unknown>, actorRef);
    track =
      profile === undefined || identity === undefined
        ? null
        : { profile, ...identity, state: undefined, tookTransition: false };
    tracks.set(actorRef, track);
    return track;
  };

  const onSnapshot = (
    actorRef: object,
    event: AnyEventObject,
    snapshot: InspectedMachineSnapshot,
  ) => {
    if (snapshot.value === undefined) return; // not a machine (a callback or promise actor)
    if (snapshot.status !== 'active' && snapshot.status !== 'done') return; // stopped, error
    const track = trackOf(actorRef, snapshot);
    if (track === null) return;
    const path = toStatePath(snapshot.value);
    const context = (snapshot.context ?? {}) as Record<string, unknown>;
    const to = track.profile.statePath?.(path, context) ?? path;
    const from = track.state ?? null;
    const took = track.tookTransition;
    track.tookTransition = false;
    track.state = to;
    if (from === to && !took) return;
    const step = { event, from, to, context };
    const cause = track.profile.cause(step);
    if (from === to ? cause === undefined : track.profile.keep?.(step, cause) === false) return;
    listener(
      {
        t: clock.now(),
        actor: track.profile.actor,
        id: track.id,
        parentId: track.parentId,
        from,
        to,
        event: event.type,
        cause: cause ?? null,
      },
      track.ownerId,
    );
  };

  return (inspection: InspectionEvent) => {
    try {
      if (inspection.type === '@xstate.microstep') {
        if (inspection._transitions.length === 0) return;
        const track = tracks.get(inspection.actorRef);
        if (track) track.tookTransition = true;
      } else if (inspection.type === '@xstate.snapshot') {
        onSnapshot(inspection.actorRef, inspection.event, inspection.snapshot);
      }
    } catch (error) {
      // An inspector must never break the actor it watches.
      onError(error);
    }
  };
}
