/**
 * The runtime-wide run gate behind `maxConcurrentRuns` and `maxRunningRunsPerOwner`: sessions
 * ask for a slot before they admit a run; a freed slot goes to the waiting owner that runs the
 * fewest runs, ties round-robin (each owner's sessions in request order), skipping owners at
 * their own cap: one owner's flood never keeps another owner waiting behind it.
 *
 * @module
 */
import type { SessionKey } from '../events/event-log.js';

/** Something that can be granted a slot (a session host). */
export interface SlotWaiter {
  readonly key: SessionKey;
  grantSlot(): void;
}

/** @internal A counting gate with per-owner caps and a fair queue of waiters (O(1) withdraw). */
export class RunSlots {
  #free: number;
  readonly #perOwner: number;
  /** Running runs per owner (owners with none are not kept). */
  readonly #running = new Map<string, number>();
  /** Waiters per owner, each in request order; the map's order is the owners' turn order. */
  readonly #waiting = new Map<string, Set<SlotWaiter>>();

  /**
   * @param max - the cap on concurrently running top-level runs (`Infinity` for none)
   * @param perOwner - the cap on one owner's running top-level runs (`Infinity` for none)
   */
  constructor(max: number, perOwner = Number.POSITIVE_INFINITY) {
    this.#free = max;
    this.#perOwner = perOwner;
  }

  /** Whether `ownerId` may take a slot now (no waiter that could take it is waiting then). */
  hasFree(ownerId: string): boolean {
    return this.#free > 0 && (this.#running.get(ownerId) ?? 0) < this.#perOwner;
  }

  /** Takes a free slot. @throws Error when none is free (a caller bug: check {@link RunSlots.hasFree}). */
  take(ownerId: string): void {
    if (!this.hasFree(ownerId)) throw new Error('RunSlots.take() without a free slot');
    this.#free--;
    this.#running.set(ownerId, (this.#running.get(ownerId) ?? 0) + 1);
  }

  /** Grants at once when a slot is free for the waiter's owner, else queues the waiter. */
  request(waiter: SlotWaiter): void {
    const ownerId = waiter.key.ownerId;
    if (this.hasFree(ownerId)) {
      this.take(ownerId);
      waiter.grantSlot();
      return;
    }
    let queue = this.#waiting.get(ownerId);
    if (queue === undefined) this.#waiting.set(ownerId, (queue = new Set()));
    queue.add(waiter);
  }

  /** The waiter no longer needs a slot. */
  withdraw(waiter: SlotWaiter): void {
    const ownerId = waiter.key.ownerId;
    const queue = this.#waiting.get(ownerId);
    if (queue === undefined) return;
    queue.delete(waiter);
    if (queue.size === 0) this.#waiting.delete(ownerId);
  }

  /** A slot of `ownerId` comes back: the next owner in turn that may run gets one. */
  release(ownerId: string): void {
    const left = (this.#running.get(ownerId) ?? 1) - 1;
    if (left > 0) this.#running.set(ownerId, left);
    else this.#running.delete(ownerId);
    this.#free++;
    this.#grant();
  }

  /**
   * Grants free slots to waiting owners: the owner running the fewest runs first, ties in turn
   * order; an owner served goes to the end of the turn.
   */
  #grant(): void {
    while (this.#free > 0) {
      let chosen: string | undefined;
      let fewest = Number.POSITIVE_INFINITY;
      for (const owner of this.#waiting.keys()) {
        const running = this.#running.get(owner) ?? 0;
        if (running < fewest && running < this.#perOwner) {
          chosen = owner;
          fewest = running;
        }
      }
      const queue = chosen === undefined ? undefined : this.#waiting.get(chosen);
      const [next] = queue ?? [];
      if (chosen === undefined || queue === undefined || next === undefined) return;
      queue.delete(next);
      this.#waiting.delete(chosen);
      if (queue.size > 0) this.#waiting.set(chosen, queue); // its next turn is after the others
      this.take(chosen);
      next.grantSlot();
    }
  }
}
