/**
 * Machine coverage ({@link getMachineCoverage}): which of a machine's states a traversal reaches,
 * and whether each reachable state handles or ignores each event.
 *
 * @module
 */
import {
  transition,
  type AnyActorLogic,
  type AnyStateMachine,
  type EventFromLogic,
  type SnapshotFrom,
} from 'xstate';
import { getStateNodes } from 'xstate/graph';
import {
  eventsIn,
  getReachableSnapshots,
  getStatePaths,
  resolveTraversal,
  type AnySnapshot,
  type PathOptions,
} from './path-traversal.js';

/** One (state, event) pair of a {@link MachineCoverage}. */
export interface EventHandling<TSnapshot = unknown, TEvent = unknown> {
  /** The state's name (`describeState`). */
  readonly state: string;
  /** The event's name (`describeEvent`). */
  readonly event: string;
  /** `handled`: `snapshot.can(event)`, an enabled transition exists; else `ignored`. */
  readonly verdict: 'handled' | 'ignored';
  readonly snapshot: TSnapshot;
  readonly eventObject: TEvent;
}

/** What {@link getMachineCoverage} found. */
export interface MachineCoverage<TSnapshot = unknown, TEvent = unknown> {
  /**
   * Dotted paths of the machine's state nodes that no reachable snapshot has active (transient
   * states excepted). Should be empty.
   */
  readonly unreachableStates: readonly string[];
  /**
   * Dotted paths of transient states: an unguarded `always` transition leaves them in the same
   * step, so no snapshot ever rests there (e.g. a `deciding` state that picks a branch).
   */
  readonly transientStates: readonly string[];
  /** Every reachable snapshot paired with every event, and whether the machine handles it. */
  readonly handling: readonly EventHandling<TSnapshot, TEvent>[];
  /**
   * Pairs the machine ignores that still change the snapshot's serialization (an "ignored"
   * event that is not a no-op), as `state / event`. Should be empty.
   */
  readonly ignoredButChanging: readonly string[];
}

/**
 * Checks a machine's coverage: which states are reachable, and how every event is handled in
 * every reachable state.
 *
 * @remarks Reachability uses `filterEvents` (what the real system can produce); handling is
 * asked for **every** event in every reachable state, filtered or not, so that a test can
 * compare it with an explicit handled-or-ignored table.
 *
 * @param machine - the machine whose state nodes must all be reachable
 * @param logic - what to traverse: the machine itself, or it composed {@link withReactions}
 * @param options - {@link PathOptions}
 * @returns a {@link MachineCoverage}
 * @throws Error when the traversal visits more than `limit` states
 */
export function getMachineCoverage<TLogic extends AnyActorLogic>(
  machine: AnyStateMachine,
  logic: TLogic,
  options: PathOptions<TLogic> & {
    /**
     * The events of the handled-or-ignored table, when not all of `events` (e.g. only the
     * external ones; an invocation's result only ever reaches the state that invoked it).
     * @default `events`
     */
    readonly tableEvents?: PathOptions<TLogic>['events'];
  },
): MachineCoverage<SnapshotFrom<TLogic>, EventFromLogic<TLogic>> {
  const { describeState, describeEvent, serialize } = resolveTraversal(options);
  const reachable = getReachableSnapshots(logic, options);
  const active = new Set<string>();
  const handling: EventHandling<SnapshotFrom<TLogic>, EventFromLogic<TLogic>>[] = [];
  const ignoredButChanging: string[] = [];
  for (const snapshot of reachable.values()) {
    const machineSnapshot = snapshot as AnySnapshot;
    for (const path of getStatePaths(machineSnapshot.value)) active.add(path);
    const state = describeState(snapshot);
    const table = { events: options.tableEvents ?? options.events };
    for (const eventObject of eventsIn(table, snapshot)) {
      const verdict = machineSnapshot.can(eventObject) ? 'handled' : 'ignored';
      const event = describeEvent(eventObject);
      handling.push({ state, event, verdict, snapshot, eventObject });
      if (verdict === 'ignored') {
        const [next] = transition(logic, snapshot, eventObject) as [SnapshotFrom<TLogic>, unknown];
        if (serialize(next) !== serialize(snapshot)) ignoredButChanging.push(`${state} / ${event}`);
      }
    }
  }
  const nodes = getStateNodes(machine.root);
  const transientStates = nodes
    .filter((node) => node.always?.some((t) => t.guard === undefined) === true)
    .map((node) => node.path.join('.'));
  const unreachableStates = nodes
    .map((node) => node.path.join('.'))
    .filter((path) => !active.has(path) && !transientStates.includes(path));
  return { unreachableStates, transientStates, handling, ignoredButChanging };
}
