/**
 * What the path tools share: the options of a traversal through a machine, their defaults (how a
 * state is serialized and named), and the states it reaches (`xstate/graph`'s adjacency map).
 *
 * @module
 */
import type {
  AnyActorLogic,
  EventFromLogic,
  EventObject,
  InputFrom,
  SnapshotFrom,
  StateValue,
} from 'xstate';
import { getAdjacencyMap } from 'xstate/graph';

/** A machine's snapshot, as the path tools see it. @internal */
export interface AnySnapshot {
  readonly value: StateValue;
  readonly context: unknown;
  can(event: EventObject): boolean;
}

/** Options shared by the path generators. */
export interface PathOptions<TLogic extends AnyActorLogic> {
  /** The events to explore: a list, or a function of the snapshot. */
  readonly events:
    | readonly EventFromLogic<TLogic>[]
    | ((snapshot: SnapshotFrom<TLogic>) => readonly EventFromLogic<TLogic>[]);
  /**
   * Keeps only the events the real system can actually produce in `snapshot` (a deadline only
   * after a deadline was armed, an agent result only while it runs). @default every event
   */
  readonly filterEvents?: (
    snapshot: SnapshotFrom<TLogic>,
    event: EventFromLogic<TLogic>,
  ) => boolean;
  /**
   * The identity of a state for the traversal. Include the context fields that matter and leave
   * out the rest: this is what bounds the graph. @default the state value and the whole context
   */
  readonly serializeState?: (snapshot: SnapshotFrom<TLogic>) => string;
  /** Machine input. */
  readonly input?: InputFrom<TLogic>;
  /** Traversal bound: the most states to visit before giving up with an error. @default 10_000 */
  readonly limit?: number;
  /** A state's name in path names. @default its state value, dotted (`CANCELLED.unwinding`) */
  readonly describeState?: (snapshot: SnapshotFrom<TLogic>) => string;
  /** An event's name in path names. @default its `type` */
  readonly describeEvent?: (event: EventFromLogic<TLogic>) => string;
}

/**
 * Flattens a state value into dotted paths of every active state node: `{ CANCELLED: 'unwinding' }`
 * → `['CANCELLED', 'CANCELLED.unwinding']`.
 *
 * @remarks Parallel regions are all listed (`{ loop: 'idle', stop: 'open' }` →
 * `['loop', 'loop.idle', 'stop', 'stop.open']`); the paths match `stateNode.path.join('.')`.
 *
 * @param value - a snapshot's `value`
 * @returns the dotted paths, parents first
 * @throws nothing
 */
export function getStatePaths(value: StateValue): string[] {
  if (typeof value === 'string') return [value];
  return Object.entries(value).flatMap(([key, child]) => [
    key,
    ...(child === undefined ? [] : getStatePaths(child).map((inner) => `${key}.${inner}`)),
  ]);
}

const leafName = (value: StateValue): string => {
  const paths = getStatePaths(value);
  const leaves = paths.filter((path) => !paths.some((other) => other.startsWith(`${path}.`)));
  return leaves.join('|');
};

const defaultSerialize = (snapshot: AnySnapshot): string =>
  JSON.stringify({ value: snapshot.value, context: snapshot.context });

interface Traversal<TLogic extends AnyActorLogic> {
  readonly serialize: (snapshot: SnapshotFrom<TLogic>) => string;
  readonly describeState: (snapshot: SnapshotFrom<TLogic>) => string;
  readonly describeEvent: (event: EventFromLogic<TLogic>) => string;
  readonly traversal: {
    events: PathOptions<TLogic>['events'];
    filterEvents: PathOptions<TLogic>['filterEvents'];
    serializeState: (snapshot: SnapshotFrom<TLogic>) => string;
    input: InputFrom<TLogic> | undefined;
    limit: number;
  };
}

/** Resolves the defaults of {@link PathOptions}. @internal */
export function resolveTraversal<TLogic extends AnyActorLogic>(
  options: PathOptions<TLogic>,
): Traversal<TLogic> {
  const serialize =
    options.serializeState ?? ((snapshot: SnapshotFrom<TLogic>) => defaultSerialize(snapshot));
  return {
    serialize,
    describeState:
      options.describeState ??
      ((snapshot: SnapshotFrom<TLogic>) => leafName((snapshot as AnySnapshot).value)),
    describeEvent:
      options.describeEvent ?? ((event: EventFromLogic<TLogic>) => (event as EventObject).type),
    traversal: {
      events: options.events,
      filterEvents: options.filterEvents,
      serializeState: serialize,
      input: options.input,
      limit: options.limit ?? 10_000,
    },
  };
}

/** The events to explore in `snapshot`. @internal */
export const eventsIn = <TLogic extends AnyActorLogic>(
  options: Pick<PathOptions<TLogic>, 'events'>,
  snapshot: SnapshotFrom<TLogic>,
): readonly EventFromLogic<TLogic>[] =>
  typeof options.events === 'function' ? options.events(snapshot) : options.events;

/**
 * Every state the traversal reaches, keyed by its serialization.
 *
 * @remarks A breadth-first walk of `xstate/graph`'s adjacency map over the realizable events
 * (`filterEvents`); one snapshot is kept per serialized state.
 *
 * @param logic - a machine, or a machine composed with {@link withReactions}
 * @param options - {@link PathOptions}
 * @returns the reachable snapshots, in breadth-first order
 * @throws Error when the traversal visits more than `limit` states
 */
export function getReachableSnapshots<TLogic extends AnyActorLogic>(
  logic: TLogic,
  options: PathOptions<TLogic>,
): Map<string, SnapshotFrom<TLogic>> {
  const { traversal } = resolveTraversal(options);
  const adjacency = getAdjacencyMap(logic, traversal);
  const reachable = new Map<string, SnapshotFrom<TLogic>>();
  for (const [key, value] of Object.entries(adjacency)) {
    reachable.set(key, (value as { state: unknown }).state as SnapshotFrom<TLogic>);
  }
  return reachable;
}
