/**
 * The runtime-wide run gate behind `maxConcurrentRuns`: sessions ask for a slot before they
 * admit a run, and are granted slots in request order.
 *
 * @module
 */

/** Something that can be granted a slot (a session host). */
export interface SlotWaiter {
  grantSlot(): void;
}

/** @internal A counting gate with a FIFO of waiters (O(1) withdraw). */
export class RunSlots {
  #free: number;
  readonly #waiting = new Set<SlotWaiter>();

  /** @param max - the cap on concurrently running top-level runs (`Infinity` for none) */
  constructor(max: number) {
    this.#free = max;
  }

  /** Whether a slot is free now (no waiter can be waiting then). */
  hasFree(): boolean {
    return this.#free > 0;
  }

  /** Takes a free slot. @throws Error when none is free (a caller bug: check {@link RunSlots.hasFree}). */
  take(): void {
    if (this.#free <= 0) throw new Error('RunSlots.take() without a free slot');
    this.#free--;
  }

  /** Grants at once when a slot is free, else queues the waiter. */
  request(waiter: SlotWaiter): void {
    if (this.#free > 0) {
      this.#free--;
      waiter.grantSlot();
    } else {
      this.#waiting.add(waiter);
    }
  }

  /** The waiter no longer needs a slot. */
  withdraw(waiter: SlotWaiter): void {
    this.#waiting.delete(waiter);
  }

  /** A slot comes back: the longest waiter gets it. */
  release(): void {
    for (const next of this.#waiting) {
      this.#waiting.delete(next);
      next.grantSlot();
      return;
    }
    this.#free++;
  }
}
