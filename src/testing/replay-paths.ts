/**
 * Model-based testing: generate paths through a machine with `xstate/graph` and replay each one
 * against the real system, comparing what the system shows with what the machine predicts.
 *
 * @module
 */
import { isDeepStrictEqual, inspect as formatValue } from 'node:util';
import {
  initialTransition,
  transition,
  type ActorLogic,
  type AnyActorLogic,
  type AnyStateMachine,
  type EventFromLogic,
  type EventObject,
  type InputFrom,
  type SnapshotFrom,
  type StateValue,
} from 'xstate';
import { getAdjacencyMap, getShortestPaths, getSimplePaths, getStateNodes } from 'xstate/graph';

/** A machine's snapshot, as the path tools see it. */
interface AnySnapshot {
  readonly value: StateValue;
  readonly context: unknown;
  can(event: EventObject): boolean;
}

/**
 * How one real system is built, driven and observed while a path is replayed.
 *
 * @remarks `observe` and `expected` must return comparable plain data (compared with
 * `util.isDeepStrictEqual`): pick what a user of the system can see (statuses, ids, outcomes).
 */
export interface PathAdapter<TSnapshot, TEvent extends EventObject, TSystem> {
  /** Builds a fresh real system for one path (a runtime on a test clock, say). */
  setup(): TSystem | Promise<TSystem>;
  /**
   * Makes the real system do what the machine event means (call an API, complete an agent,
   * advance the clock), then lets it settle.
   *
   * @param system - the system built by `setup`
   * @param event - the machine event of this step
   * @param step - the machine snapshots before (`from`) and after (`to`) the event
   */
  execute(
    system: TSystem,
    event: TEvent,
    step: { readonly from: TSnapshot; readonly to: TSnapshot },
  ): void | Promise<void>;
  /** What the real system shows now (plain data). */
  observe(system: TSystem): unknown;
  /** What the system should show when the machine is in `snapshot` (same shape as `observe`). */
  expected(snapshot: TSnapshot): unknown;
  /** Releases the system (shut a runtime down, stop timers). */
  teardown?(system: TSystem): void | Promise<void>;
}

/** Which paths to generate. */
export type PathKind = 'shortest' | 'simple' | 'ignored';

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

/** Options of {@link getReplayPaths} and {@link replayPaths}. */
export interface ReplayPathsOptions<
  TLogic extends AnyActorLogic,
  TSystem,
> extends PathOptions<TLogic> {
  /** Builds, drives and observes the real system. */
  readonly adapter: PathAdapter<SnapshotFrom<TLogic>, EventFromLogic<TLogic>, TSystem>;
  /**
   * Which paths: `shortest` (one per state), `simple` (every path that visits no state twice),
   * `ignored` (the shortest path to each state, then one event the machine ignores there: the
   * real system must ignore it too). @default ['shortest', 'simple', 'ignored']
   */
  readonly kinds?: readonly PathKind[];
}

/** One generated path, ready to replay. */
export interface ReplayablePath<TEvent extends EventObject = EventObject> {
  /** The path as text: `CREATED -run.start-> QUEUED -run.cancel-> CANCELLED.settled`. */
  readonly name: string;
  readonly kind: PathKind;
  /** The machine events of the path, in order. */
  readonly events: readonly TEvent[];
  /**
   * Replays the path against a fresh real system.
   *
   * @returns a promise that resolves when every step matched
   * @throws {@link PathMismatchError} (as a rejection) at the first step where the real system
   *   shows something else than the machine predicts
   */
  replay(): Promise<void>;
}

/**
 * A replayed path diverged: after `step` events the real system showed `observed` where the
 * machine predicted `expected`.
 */
export class PathMismatchError extends Error {
  override readonly name = 'PathMismatchError';

  /**
   * @param path - the path's name
   * @param step - how many events had been applied (0: before the first one)
   * @param expected - the machine's prediction
   * @param observed - what the real system showed
   */
  constructor(
    readonly path: string,
    readonly step: number,
    readonly expected: unknown,
    readonly observed: unknown,
  ) {
    super(
      `path "${path}" diverged after ${step} step(s):\n  expected ${formatValue(expected, {
        depth: 6,
        breakLength: Infinity,
      })}\n  observed ${formatValue(observed, { depth: 6, breakLength: Infinity })}`,
    );
  }
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

/** An executed action, as {@link withReactions} hands it to the environment. */
export interface ExecutedAction {
  readonly type: string;
  readonly params: unknown;
}

/** Options of {@link withReactions}. */
export interface ReactionOptions<TSnapshot, TEvent, TEnv> {
  /**
   * Environment state carried next to each snapshot (what the world knows that the machine's
   * context does not, e.g. "a preempt reached the running turn"). Read it with
   * {@link getEnvironment}; include it in `serializeState`.
   */
  readonly environment?: {
    readonly initial: TEnv;
    /**
     * The environment after one step of the machine (the event, then each reaction event).
     *
     * @param env - the environment before the step
     * @param step - the event, the actions it executed and the snapshot after it
     * @returns the environment after the step (return `env` itself when nothing changed)
     */
    update(
      env: TEnv,
      step: {
        readonly event: TEvent;
        readonly actions: readonly ExecutedAction[];
        /** The snapshot after the step. */
        readonly snapshot: TSnapshot;
        /** The snapshot before the step. */
        readonly previous: TSnapshot;
      },
    ): TEnv;
  };
  /**
   * Copies the parts of a snapshot that the machine's actions mutate in place (an array a
   * push appends to, say) before each step, so that snapshots the traversal keeps stay intact.
   * @default no copy
   */
  readonly copy?: (snapshot: TSnapshot) => TSnapshot;
}

const environments = new WeakMap<object, unknown>();

/**
 * The environment {@link withReactions} carries next to a snapshot.
 *
 * @remarks Kept in a `WeakMap` keyed by the snapshot object, so it follows the snapshots the
 * graph traversal keeps and costs nothing once they are gone.
 *
 * @param snapshot - a snapshot produced by a logic from {@link withReactions}
 * @returns its environment, or `undefined` for a snapshot made elsewhere
 * @throws nothing
 */
export function getEnvironment<TEnv>(snapshot: object): TEnv | undefined {
  return environments.get(snapshot) as TEnv | undefined;
}

/**
 * Composes a machine with the synchronous reactions of its environment, as one logic.
 *
 * @remarks
 * A machine whose actions are placeholders (bound with `machine.provide` by the runtime) does not
 * show what the world does in answer. When the world answers some action at once with an event
 * (a slot granted as soon as it is requested, a cancelled queued run leaving the queue, a turn
 * reported started as soon as its run is created), the real system never rests in the state in
 * between. `withReactions` applies those answers inside the same step, in order, so the graph
 * walks the states the real system can actually be seen in. With `environment`, it also carries
 * what the world knows beside the machine, updated after every step.
 *
 * @param machine - the machine
 * @param react - maps one executed action (its `type` and resolved `params`), the snapshot after
 *   the step and the environment to the events the world sends back at once
 * @param options - {@link ReactionOptions}: environment state, copy-on-write of mutable context
 * @returns actor logic with the machine's snapshots and events
 * @throws Error (from `transition`) when reactions keep producing events for more than 1,000 steps
 */
export function withReactions<TMachine extends AnyStateMachine, TEnv = undefined>(
  machine: TMachine,
  react: (
    action: ExecutedAction,
    snapshot: SnapshotFrom<TMachine>,
    env: TEnv,
  ) => readonly EventFromLogic<TMachine>[] | undefined,
  options: ReactionOptions<SnapshotFrom<TMachine>, EventFromLogic<TMachine>, TEnv> = {},
): ActorLogic<SnapshotFrom<TMachine>, EventFromLogic<TMachine>, InputFrom<TMachine>> {
  type TSnapshot = SnapshotFrom<TMachine>;
  type TEvent = EventFromLogic<TMachine>;
  const copy = options.copy ?? ((snapshot: TSnapshot) => snapshot);
  const environment = options.environment;
  const update = environment === undefined ? undefined : environment.update.bind(environment);
  const step = (
    snapshot: TSnapshot,
    event: TEvent,
    env: TEnv,
  ): { next: TSnapshot; actions: ExecutedAction[]; env: TEnv } => {
    const [next, executed] = transition(machine, copy(snapshot), event) as [
      TSnapshot,
      Array<{ type: string; params?: unknown }>,
    ];
    const actions = executed.map((a) => ({ type: a.type, params: a.params }));
    return {
      next,
      actions,
      env: update ? update(env, { event, actions, snapshot: next, previous: snapshot }) : env,
    };
  };
  const drain = (start: { next: TSnapshot; actions: ExecutedAction[]; env: TEnv }): TSnapshot => {
    let { next: current, env } = start;
    const pending: TEvent[] = [];
    const collect = (done: TSnapshot, actions: readonly ExecutedAction[]) => {
      for (const action of actions) pending.push(...(react(action, done, env) ?? []));
    };
    collect(current, start.actions);
    for (let steps = 0; pending.length > 0; steps++) {
      if (steps > 1_000) throw new Error('withReactions: reactions did not settle in 1,000 steps');
      const result = step(current, pending.shift() as TEvent, env);
      current = result.next;
      env = result.env;
      collect(current, result.actions);
    }
    environments.set(current, env);
    return current;
  };
  return {
    config: machine.config,
    transition: (snapshot, event) =>
      drain(step(snapshot, event, environments.get(snapshot) as TEnv)),
    getInitialSnapshot: (_scope, input) => {
      const [initial, executed] = initialTransition(machine, input) as [
        TSnapshot,
        Array<{ type: string; params?: unknown }>,
      ];
      const env = options.environment?.initial as TEnv;
      return drain({
        next: initial,
        actions: executed.map((a) => ({ type: a.type, params: a.params })),
        env,
      });
    },
    getPersistedSnapshot: (snapshot) => machine.getPersistedSnapshot(snapshot),
  };
}

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

function resolveTraversal<TLogic extends AnyActorLogic>(
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

const eventsIn = <TLogic extends AnyActorLogic>(
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

/**
 * Generates the paths to replay: shortest, simple and ignored-event paths, deduplicated by name
 * and sorted (shortest kind first, then by length and name).
 *
 * @remarks Paths come from `xstate/graph` (`getShortestPaths`, `getSimplePaths`) and are then
 * re-run through `logic` from the initial snapshot, so each step's expected snapshot is the one
 * that path really reaches even with a coarse `serializeState`; events whose payload depends on
 * the snapshot are re-derived by name (`describeEvent`), and a path whose re-run meets an
 * unrealizable step is left out. `replay()` builds a fresh system with `adapter.setup()`,
 * compares `adapter.observe` with `adapter.expected` before the first event and after each one,
 * and always calls `adapter.teardown`.
 *
 * @param logic - a machine, or a machine composed with {@link withReactions}
 * @param options - {@link ReplayPathsOptions}
 * @returns one {@link ReplayablePath} per distinct path; call `replay()` on each (e.g. one test
 *   per path, named by `path.name`)
 * @throws Error when the traversal visits more than `limit` states
 * @example
 * ```ts
 * for (const path of getReplayPaths(runMachine, { events, adapter })) {
 *   it(path.name, () => path.replay());
 * }
 * ```
 */
export function getReplayPaths<TLogic extends AnyActorLogic, TSystem>(
  logic: TLogic,
  options: ReplayPathsOptions<TLogic, TSystem>,
): ReplayablePath<EventFromLogic<TLogic>>[] {
  type TSnapshot = SnapshotFrom<TLogic>;
  type TEvent = EventFromLogic<TLogic>;
  const { serialize, describeState, describeEvent, traversal } = resolveTraversal(options);
  const kinds = new Set(options.kinds ?? ['shortest', 'simple', 'ignored']);
  const adapter = options.adapter;
  const step = (snapshot: TSnapshot, event: TEvent): TSnapshot =>
    (transition(logic, snapshot, event) as [TSnapshot, unknown])[0];

  type Plan = {
    kind: PathKind;
    initial: TSnapshot;
    steps: Array<{ event: TEvent; state: TSnapshot }>;
  };
  const plans = new Map<string, Plan>();
  const nameOf = (plan: Omit<Plan, 'kind'>, ignored: boolean) =>
    describeState(plan.initial) +
    plan.steps.map((s) => ` -${describeEvent(s.event)}-> ${describeState(s.state)}`).join('') +
    (ignored ? ' (ignored)' : '');
  /**
   * Re-runs a path's events from the initial snapshot. The graph keeps one snapshot per
   * serialized state, so with a coarse `serializeState` a path's later steps may have been
   * computed from another snapshot with the same identity; re-running makes every expected
   * snapshot the one the path really reaches, and re-derives by name (`describeEvent`) events
   * whose payload depends on the snapshot. A step that is not realizable there drops the path.
   */
  const toPlan = (path: {
    steps: Array<{ event: TEvent; state: TSnapshot }>;
  }): Omit<Plan, 'kind'> | undefined => {
    // xstate/graph paths start with an `xstate.init` step holding the initial snapshot.
    const [first, ...rest] = path.steps;
    if (first === undefined) throw new Error('getReplayPaths: empty path');
    const steps: Plan['steps'] = [];
    let current = first.state;
    for (const { event: planned } of rest) {
      const name = describeEvent(planned);
      const event = eventsIn(options, current).find((e) => describeEvent(e) === name) ?? planned;
      if (options.filterEvents && !options.filterEvents(current, event)) return undefined;
      current = step(current, event);
      steps.push({ event, state: current });
    }
    return { initial: first.state, steps };
  };
  const add = (kind: PathKind, plan: Omit<Plan, 'kind'> | undefined) => {
    if (plan === undefined) return;
    const name = nameOf(plan, kind === 'ignored');
    if (!plans.has(name)) plans.set(name, { kind, ...plan });
  };

  const graphOptions = traversal as unknown as Parameters<typeof getShortestPaths<TLogic>>[1];
  const shortest = getShortestPaths(logic, graphOptions).flatMap(
    (path) =>
      toPlan(path as unknown as { steps: Array<{ event: TEvent; state: TSnapshot }> }) ?? [],
  );
  if (kinds.has('shortest')) for (const plan of shortest) add('shortest', plan);
  if (kinds.has('simple')) {
    for (const path of getSimplePaths(logic, graphOptions)) {
      add(
        'simple',
        toPlan(path as unknown as { steps: Array<{ event: TEvent; state: TSnapshot }> }),
      );
    }
  }
  if (kinds.has('ignored')) {
    for (const plan of shortest) {
      const last = plan.steps.at(-1)?.state ?? plan.initial;
      for (const event of eventsIn(options, last)) {
        if (options.filterEvents && !options.filterEvents(last, event)) continue;
        const next = step(last, event);
        if (serialize(next) !== serialize(last)) continue;
        add('ignored', { initial: plan.initial, steps: [...plan.steps, { event, state: next }] });
      }
    }
  }

  const order: Record<PathKind, number> = { shortest: 0, simple: 1, ignored: 2 };
  return [...plans.entries()]
    .sort(
      ([nameA, a], [nameB, b]) =>
        order[a.kind] - order[b.kind] ||
        a.steps.length - b.steps.length ||
        (nameA < nameB ? -1 : nameA > nameB ? 1 : 0),
    )
    .map(([name, plan]) => ({
      name,
      kind: plan.kind,
      events: plan.steps.map((s) => s.event),
      async replay() {
        const system = await adapter.setup();
        try {
          const check = (index: number, snapshot: TSnapshot) => {
            const expected = adapter.expected(snapshot);
            const observed = adapter.observe(system);
            if (!isDeepStrictEqual(observed, expected)) {
              throw new PathMismatchError(name, index, expected, observed);
            }
          };
          check(0, plan.initial);
          let from = plan.initial;
          for (const [index, { event, state }] of plan.steps.entries()) {
            await adapter.execute(system, event, { from, to: state });
            check(index + 1, state);
            from = state;
          }
        } finally {
          await adapter.teardown?.(system);
        }
      },
    }));
}

/** What {@link replayPaths} did. */
export interface ReplayReport {
  /** Number of paths replayed, by kind. */
  readonly replayed: Readonly<Record<PathKind, number>>;
}

/**
 * Every path that diverged in one {@link replayPaths} call, grouped by cause: paths whose first
 * divergence shows the same expected and observed values are one group, named by its shortest
 * path (one bug in a machine usually breaks dozens of paths the same way).
 */
export class PathMismatchesError extends Error {
  override readonly name = 'PathMismatchesError';

  /**
   * @param groups - the divergences, one array per cause, shortest path first
   */
  constructor(readonly groups: readonly (readonly PathMismatchError[])[]) {
    const total = groups.reduce((sum, group) => sum + group.length, 0);
    super(
      [
        `${total} path(s) diverged, ${groups.length} distinct cause(s):`,
        ...groups.map((group, index) => {
          const [first] = group;
          const others = group.length - 1;
          return `${index + 1}. ${first?.message ?? ''}${others === 0 ? '' : `\n  (and ${others} longer path(s) the same way)`}`;
        }),
      ].join('\n'),
    );
  }
}

/**
 * Generates every path (see {@link getReplayPaths}) and replays them one after another.
 *
 * @remarks Use {@link getReplayPaths} instead to get one test per path in your test runner.
 * This form replays every path and reports the divergences once, grouped by cause.
 *
 * @param logic - a machine, or a machine composed with {@link withReactions}
 * @param options - {@link ReplayPathsOptions}
 * @returns how many paths of each kind were replayed
 * @throws {@link PathMismatchesError} (as a rejection) when any path diverges, its divergences
 *   grouped by the expected and observed values at the first diverging step
 */
export async function replayPaths<TLogic extends AnyActorLogic, TSystem>(
  logic: TLogic,
  options: ReplayPathsOptions<TLogic, TSystem>,
): Promise<ReplayReport> {
  const replayed: Record<PathKind, number> = { shortest: 0, simple: 0, ignored: 0 };
  const groups = new Map<string, PathMismatchError[]>();
  for (const path of getReplayPaths(logic, options)) {
    try {
      await path.replay();
    } catch (error) {
      if (!(error instanceof PathMismatchError)) throw error;
      const cause = formatValue([error.expected, error.observed], { depth: 6 });
      const group = groups.get(cause) ?? [];
      groups.set(cause, [...group, error]);
      continue;
    }
    replayed[path.kind]++;
  }
  if (groups.size > 0) {
    const byLength = (a: PathMismatchError, b: PathMismatchError) => a.path.length - b.path.length;
    throw new PathMismatchesError([...groups.values()].map((group) => group.sort(byLength)));
  }
  return { replayed };
}
