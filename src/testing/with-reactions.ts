/**
 * Composes a machine with the synchronous reactions of its environment ({@link withReactions}),
 * so that a traversal walks only the states the real system can be seen in, and carries the
 * environment's own state next to each snapshot ({@link getEnvironment}).
 *
 * @module
 */
import {
  initialTransition,
  transition,
  type ActorLogic,
  type AnyStateMachine,
  type EventFromLogic,
  type InputFrom,
  type SnapshotFrom,
} from 'xstate';

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
