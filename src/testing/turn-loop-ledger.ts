/**
 * An independent reference model of a TurnLoop's item accounting and preempt targeting, written
 * from the README's rules ("TurnLoop: push, preempt, stop, resume"), not from the loop's machine.
 * The TurnLoop race world feeds it what it observes (pushes, what genInput was offered and
 * answered, which turn started and how it ended, whether the turn's agent ever executed) and it
 * names the rule a step broke.
 *
 * @remarks
 * The rules it holds the loop to:
 * - `[item-offered-once]`: an item reaches genInput only while it waits (pushed, handed back by
 *   a planned turn's `remaining`, undone with a turn whose agent never ran, or requeued from a
 *   preempted turn), and at most once per call (`items` and `preemptedItems` together).
 * - `[item-consumed-once]`: every accepted item is consumed by at most one turn that finished or
 *   was preempted (a requeued item's next turn takes the count over).
 * - `[preempt-hits-its-turn]`: a turn ends cancelled by a preempt only when a preempt was aimed at
 *   it: pushed while it was the current turn (`preemptDelayMs` preempts "only the turn current
 *   at push time"), and, for a delayed one, due by the time the turn ended.
 *
 * @internal
 * @module
 */

/** Where the model has an item. */
type ItemState =
  | { readonly at: 'waiting' }
  | { readonly at: 'taken'; readonly turnId: string }
  | { readonly at: 'done'; readonly how: 'consumed' | 'dropped' | 'interrupted' };

/** A push with a preempt, as the model remembers it. */
interface AimedPreempt {
  readonly turnId: string;
  /** Clock time from which it may cancel its turn (push time, plus its delay). */
  readonly dueAt: number;
}

/** How a turn ended, as the world observed it. */
export interface LedgerTurnEnd {
  readonly status: 'COMPLETED' | 'FAILED' | 'CANCELLED';
  readonly cancelledBy: string | undefined;
  /** Whether the scripted agent ever executed for the turn's run (observed on the agent). */
  readonly agentRan: boolean;
  /** Whether a stop had been called on the loop when the turn ended. */
  readonly stopped: boolean;
}

/** @internal The reference model; every method returns the broken rules it found, if any. */
export class TurnLoopLedger {
  readonly #items = new Map<number, ItemState>();
  readonly #plans = new Map<string, { consumed: number[]; dropped: number[] }>();
  readonly #taken = new Map<string, number[]>();
  readonly #aimed: AimedPreempt[] = [];
  /** The turn being planned or running, as far as the world has seen. */
  #current: string | undefined;

  constructor(readonly requeuePreempted: boolean) {}

  /** The turn a push would aim at now: the current turn, if any. */
  get currentTurn(): string | undefined {
    return this.#current;
  }

  /** Whether a turn that finished or was preempted (and not requeued) consumed `item`. */
  isConsumed(item: number): boolean {
    const state = this.#items.get(item);
    return state?.at === 'done' && state.how === 'consumed';
  }

  /** The loop's current turn (planning or running) is now `turnId`, or none. */
  observeCurrent(turnId: string | undefined): void {
    this.#current = turnId;
  }

  /** An accepted push (or an item carried in by a checkpoint): it waits for a turn. */
  accepted(item: number, preempt?: { at: number; delayMs: number | undefined }): void {
    this.#items.set(item, { at: 'waiting' });
    if (preempt !== undefined && this.#current !== undefined) {
      this.#aimed.push({ turnId: this.#current, dueAt: preempt.at + (preempt.delayMs ?? 0) });
    }
  }

  /** genInput was called for `turnId` and answered `consumed` (the rest it kept or dropped). */
  offered(
    turnId: string,
    offered: readonly number[],
    consumed: readonly number[],
    dropped: readonly number[],
  ): string[] {
    const broken: string[] = [];
    const seen = new Set<number>();
    for (const item of offered) {
      const state = this.#items.get(item);
      if (seen.has(item)) {
        broken.push(`[item-offered-once] ${turnId} was offered item ${item} twice`);
      } else if (state !== undefined && state.at !== 'waiting') {
        broken.push(
          `[item-offered-once] ${turnId} was offered item ${item}, which is ${state.at === 'taken' ? `taken by ${state.turnId}` : state.how}`,
        );
      }
      seen.add(item);
    }
    this.#plans.set(turnId, { consumed: [...consumed], dropped: [...dropped] });
    return broken;
  }

  /** The turn's run started: its plan applies (consumed items are the turn's, dropped ones done). */
  started(turnId: string): string[] {
    const plan = this.#plans.get(turnId);
    if (plan === undefined) return [];
    const broken: string[] = [];
    for (const item of plan.consumed) {
      const state = this.#items.get(item);
      if (state?.at === 'done' && state.how === 'consumed') {
        broken.push(
          `[item-consumed-once] ${turnId} consumed item ${item}, already consumed by an earlier turn`,
        );
      }
      this.#items.set(item, { at: 'taken', turnId });
    }
    for (const item of plan.dropped) this.#items.set(item, { at: 'done', how: 'dropped' });
    this.#taken.set(turnId, plan.consumed);
    return broken;
  }

  /**
   * The turn ended, at clock time `now`.
   *
   * @returns the broken rules (`[preempt-hits-its-turn]`)
   */
  ended(turnId: string, end: LedgerTurnEnd, now: number): string[] {
    const broken: string[] = [];
    const taken = this.#taken.get(turnId) ?? [];
    const cancelled = end.status === 'CANCELLED' && end.cancelledBy !== 'handler';
    let next: ItemState;
    if (cancelled && !end.agentRan) next = { at: 'waiting' };
    else if (!cancelled) next = { at: 'done', how: 'consumed' };
    else if (end.cancelledBy === 'preempt' && !end.stopped)
      next = this.requeuePreempted ? { at: 'waiting' } : { at: 'done', how: 'consumed' };
    else next = { at: 'done', how: 'interrupted' };
    for (const item of taken) this.#items.set(item, next);
    // An undone turn is undone whole: what its plan dropped waits again too.
    if (cancelled && !end.agentRan) {
      for (const item of this.#plans.get(turnId)?.dropped ?? []) this.#items.set(item, next);
    }
    if (end.status === 'CANCELLED' && end.cancelledBy === 'preempt') {
      const aimed = this.#aimed.filter((p) => p.turnId === turnId);
      if (!aimed.some((p) => p.dueAt <= now)) {
        broken.push(
          aimed.length === 0
            ? `[preempt-hits-its-turn] ${turnId} was cancelled by a preempt, but none was pushed while it was current`
            : `[preempt-hits-its-turn] ${turnId} was cancelled by a preempt at ${now} ms, before its delayed preempt was due (${aimed.map((p) => p.dueAt).join(', ')} ms)`,
        );
      }
    }
    return broken;
  }
}
