/**
 * Child actor ids taken from a small recycled set, one per live child, mapped to run ids.
 *
 * @remarks XState memoizes its transition candidates per state node **per event type**, for the
 * life of the machine. A child's end arrives as `xstate.done.actor.<childId>`, so a child id per
 * run id would add one cache entry per run, never freed: about 450 bytes leaked by every run.
 * Child ids are therefore reused (`c0`, `c1`, … up to the number of children alive at once),
 * and a run is addressed by its id through this table; its `systemId` stays `run:<runId>`.
 * Kept in a machine's context and mutated in place, like the session's queue.
 *
 * @module
 */

/** The live children of one actor: child id ↔ run id, with freed child ids reused. */
export class ChildIds {
  readonly #runOf = new Map<string, string>();
  readonly #childOf = new Map<string, string>();
  readonly #free: string[] = [];

  /** Number of live children. */
  get size(): number {
    return this.#runOf.size;
  }

  /** Takes a child id for run `runId` (a freed one first). */
  take(runId: string): string {
    const childId = this.#free.pop() ?? `c${this.#runOf.size}`;
    this.#runOf.set(childId, runId);
    this.#childOf.set(runId, childId);
    return childId;
  }

  /** Frees `childId`. @returns the run id it stood for, if any */
  release(childId: string): string | undefined {
    const runId = this.#runOf.get(childId);
    if (runId === undefined) return undefined;
    this.#runOf.delete(childId);
    this.#childOf.delete(runId);
    this.#free.push(childId);
    return runId;
  }

  /** The run id of a live child. */
  runOf(childId: string): string | undefined {
    return this.#runOf.get(childId);
  }

  /** The child id of a live run. */
  childOf(runId: string): string | undefined {
    return this.#childOf.get(runId);
  }

  /** The child ids of every live child. */
  childIds(): string[] {
    return [...this.#runOf.keys()];
  }
}
