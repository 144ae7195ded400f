/**
 * Model-based testing: generate paths through a machine with `xstate/graph` and replay each one
 * against the real system, comparing what the system shows with what the machine predicts.
 *
 * @module
 */
import { isDeepStrictEqual, inspect as formatValue } from 'node:util';
import {
  transition,
  type AnyActorLogic,
  type EventFromLogic,
  type EventObject,
  type SnapshotFrom,
} from 'xstate';
import { getShortestPaths, getSimplePaths } from 'xstate/graph';
import { eventsIn, resolveTraversal, type PathOptions } from './path-traversal.js';

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
