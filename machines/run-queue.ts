/**
 * A FIFO of run ids with O(1) add, remove-anywhere and take-first.
 *
 * @remarks
 * Backed by an insertion-ordered `Map`. The session machine keeps one in its context and
 * mutates it in place: copying a 10,000-entry queue on every event would make a long queue
 * quadratic, which is exactly what DESIGN.md §6 rules out ("queue removal is O(1)").
 */
export class RunQueue {
  readonly #ids = new Map<string, true>();

  /** Number of runs waiting. */
  get size(): number {
    return this.#ids.size;
  }

  /** Appends `runId` (a no-op if it is already queued). */
  add(runId: string): void {
    this.#ids.set(runId, true);
  }

  /** Removes `runId` wherever it stands. @returns whether it was queued. */
  delete(runId: string): boolean {
    return this.#ids.delete(runId);
  }

  /** Whether `runId` is waiting. */
  has(runId: string): boolean {
    return this.#ids.has(runId);
  }

  /** Removes and returns the oldest run id, or `undefined` when empty. */
  shift(): string | undefined {
    for (const runId of this.#ids.keys()) {
      this.#ids.delete(runId);
      return runId;
    }
    return undefined;
  }

  /** The waiting run ids, oldest first (a copy). */
  toArray(): string[] {
    return [...this.#ids.keys()];
  }
}
