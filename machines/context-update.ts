/**
 * `updateContext`: XState's `assign` for the run's per-step status fields, without the rebuilt
 * snapshot (docs/architecture.md, "A run's life").
 *
 * @remarks XState's `assign` copies the context and then rebuilds the whole snapshot with
 * `cloneMachineSnapshot`, which recomputes the state value and the tag set from the active state
 * nodes: about 2.3 KB of garbage per assign, and a run took two on its way (into RUNNING, into its
 * terminal status). An assign changes neither the state nodes nor the children, so this action
 * copies the context the same way and the snapshot's fields as they are: the value, tags and
 * state nodes of the new snapshot are the old one's, which they equal. It is pure, like `assign`:
 * nothing is mutated, so a pure `transition()` applies it too.
 *
 * It uses the protocol of XState's built-in actions (xstate 5.33.3, pinned in package.json): an
 * action with a `resolve` function is resolved inside the transition into the next snapshot
 * (`[snapshot, params, actions]`), never executed. Were that protocol to change, the action would
 * run as a plain no-op function and every test of a run's status would fail.
 *
 * @module
 */
import type { EventObject } from 'xstate';

/** What `updateContext`'s function is called with, as `assign`'s is. */
export interface ContextUpdateArgs<TContext, TEvent extends EventObject> {
  readonly context: TContext;
  readonly event: TEvent;
}

/** The machine snapshot fields this action reads and writes. */
interface SnapshotLike<TContext> {
  readonly context: TContext;
}

/**
 * An action that sets context fields, as `assign(update)` does, without rebuilding the
 * snapshot's state value and tags (see the module note).
 *
 * @param update - the fields to set, from the context and the event (a partial context)
 * @returns the action, for `setup({ actions })`
 * @example
 * ```ts
 * setup({ actions: { enterRunning: updateContext(() => ({ status: 'RUNNING' })) } });
 * ```
 */
export function updateContext<TContext extends object, TEvent extends EventObject>(
  update: (args: ContextUpdateArgs<TContext, TEvent>) => Partial<TContext>,
): (args: ContextUpdateArgs<TContext, TEvent>) => void {
  // Never called: XState resolves an action that has `resolve` instead of executing it.
  const action = (_args: ContextUpdateArgs<TContext, TEvent>): void => undefined;
  return Object.assign(action, {
    type: 'runplane.updateContext',
    resolve(
      _actorScope: unknown,
      snapshot: SnapshotLike<TContext>,
      args: ContextUpdateArgs<TContext, TEvent>,
    ): [SnapshotLike<TContext>, undefined, undefined] {
      const context = Object.assign({}, snapshot.context, update(args));
      return [{ ...snapshot, context }, undefined, undefined];
    },
  });
}
