/**
 * A FIFO of run ids with O(1) add at either end, remove-anywhere and take-first.
 *
 * @remarks
 * A doubly linked list indexed by a `Map`. The session machine keeps one in its context and
 * mutates it in place: copying a 10,000-entry queue on every event would make a long queue
 * quadratic, which is exactly what docs/architecture.md, "Sessions and the busy-session rule" rules out ("queue removal is O(1)").
 *
 * @module
 */

/** One queued run, linked to its neighbours. */
interface Node {
  readonly runId: string;
  prev: Node | undefined;
  next: Node | undefined;
}

/**
 * The session's FIFO of run ids (see the module note): O(1) at both ends and anywhere between.
 *
 * @example
 * ```ts
 * const queue = new RunQueue();
 * queue.add('a'); queue.add('b'); queue.addFirst('urgent');
 * queue.delete('a');
 * queue.shift(); // 'urgent'
 * ```
 */
export class RunQueue {
  readonly #nodes = new Map<string, Node>();
  #head: Node | undefined;
  #tail: Node | undefined;

  /** Number of runs waiting. */
  get size(): number {
    return this.#nodes.size;
  }

  /** Appends `runId` (a no-op if it is already queued). */
  add(runId: string): void {
    if (this.#nodes.has(runId)) return;
    const node: Node = { runId, prev: this.#tail, next: undefined };
    if (this.#tail) this.#tail.next = node;
    else this.#head = node;
    this.#tail = node;
    this.#nodes.set(runId, node);
  }

  /** Puts `runId` first in line (moving it there if it is already queued). */
  addFirst(runId: string): void {
    this.delete(runId);
    const node: Node = { runId, prev: undefined, next: this.#head };
    if (this.#head) this.#head.prev = node;
    else this.#tail = node;
    this.#head = node;
    this.#nodes.set(runId, node);
  }

  /** Removes `runId` wherever it stands. @returns whether it was queued. */
  delete(runId: string): boolean {
    const node = this.#nodes.get(runId);
    if (node === undefined) return false;
    if (node.prev) node.prev.next = node.next;
    else this.#head = node.next;
    if (node.next) node.next.prev = node.prev;
    else this.#tail = node.prev;
    this.#nodes.delete(runId);
    return true;
  }

  /** Whether `runId` is waiting. */
  has(runId: string): boolean {
    return this.#nodes.has(runId);
  }

  /** Removes and returns the first run id, or `undefined` when empty. */
  shift(): string | undefined {
    const head = this.#head;
    if (head === undefined) return undefined;
    this.delete(head.runId);
    return head.runId;
  }

  /** The waiting run ids, first in line first (a copy). */
  toArray(): string[] {
    const ids: string[] = [];
    for (let node = this.#head; node; node = node.next) ids.push(node.runId);
    return ids;
  }
}
