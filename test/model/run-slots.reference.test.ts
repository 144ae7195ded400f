/**
 * The runtime's slot gate (`maxConcurrentRuns`, `maxRunningRunsPerOwner`) compared step by step
 * with an independent reference written from the README's rules ("Limits": over a cap a run
 * waits; a freed slot goes to the waiting owner running the fewest runs, owners taking turns,
 * each owner's sessions in request order, owners at their own cap skipped) and
 * docs/architecture.md ("Data lifecycle"): random requests, withdrawals and releases by several
 * owners under both caps. After every step the sessions granted, and whether each owner may take a
 * slot at once, must be what the reference says.
 */
import fc from 'fast-check';
import { resolveRaceRuns } from '../../src/testing/index.js';
import { describe, it } from 'vitest';
import { RunSlots, type SlotWaiter } from '../../src/runtime/run-slots.js';

type Step =
  | { readonly kind: 'request'; readonly owner: string }
  | { readonly kind: 'withdraw'; readonly pick: number }
  | { readonly kind: 'release'; readonly pick: number };

const owners = ['ann', 'bob', 'cy'];

/** The reference gate: plain arrays, no index tables. */
class SlotsReference {
  #free: number;
  readonly #running = new Map<string, number>();
  /** Waiting sessions, each with its owner, in request order. */
  #waiting: Array<{ session: string; owner: string }> = [];
  /** Owners in turn order: the order they first waited in, an owner served moving to the end. */
  #turns: string[] = [];

  constructor(
    max: number,
    readonly perOwner: number,
  ) {
    this.#free = max;
  }

  mayTake(owner: string): boolean {
    return this.#free > 0 && (this.#running.get(owner) ?? 0) < this.perOwner;
  }

  /** @returns the sessions granted by this step, in grant order */
  request(session: string, owner: string): string[] {
    if (this.mayTake(owner)) {
      this.#take(owner);
      return [session];
    }
    this.#waiting.push({ session, owner });
    if (!this.#turns.includes(owner)) this.#turns.push(owner);
    return [];
  }

  withdraw(session: string): string[] {
    this.#waiting = this.#waiting.filter((w) => w.session !== session);
    this.#turns = this.#turns.filter((owner) => this.#waiting.some((w) => w.owner === owner));
    return [];
  }

  release(owner: string): string[] {
    this.#running.set(owner, (this.#running.get(owner) ?? 0) - 1);
    this.#free++;
    const granted: string[] = [];
    for (;;) {
      if (this.#free === 0) return granted;
      const eligible = this.#turns.filter((o) => (this.#running.get(o) ?? 0) < this.perOwner);
      if (eligible.length === 0) return granted;
      const fewest = Math.min(...eligible.map((o) => this.#running.get(o) ?? 0));
      const chosen = eligible.find((o) => (this.#running.get(o) ?? 0) === fewest) as string;
      const next = this.#waiting.find((w) => w.owner === chosen) as { session: string };
      this.#waiting = this.#waiting.filter((w) => w !== next);
      this.#turns = this.#turns.filter((o) => o !== chosen);
      if (this.#waiting.some((w) => w.owner === chosen)) this.#turns.push(chosen);
      this.#take(chosen);
      granted.push(next.session);
    }
  }

  #take(owner: string): void {
    this.#free--;
    this.#running.set(owner, (this.#running.get(owner) ?? 0) + 1);
  }
}

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('request' as const),
      owner: fc.constantFrom(...owners),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('withdraw' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }) },
);

/** Plays `steps` on a real gate and the reference; the first disagreement, if any. */
function divergence(max: number, perOwner: number, steps: readonly Step[]): string | undefined {
  const gate = new RunSlots(max, perOwner);
  const model = new SlotsReference(max, perOwner);
  let granted: string[] = [];
  const waiters: SlotWaiter[] = [];
  const waiting = new Set<SlotWaiter>();
  const runningBy: string[] = []; // one entry per slot held, by owner
  const done: string[] = [];
  for (const [index, s] of steps.entries()) {
    granted = [];
    let expected: string[];
    if (s.kind === 'request') {
      const session = `s${index}`;
      const waiter: SlotWaiter = {
        key: { ownerId: s.owner, sessionId: session },
        grantSlot: () => {
          granted.push(session);
          waiting.delete(waiter);
          runningBy.push(s.owner);
        },
      };
      waiters.push(waiter);
      waiting.add(waiter);
      gate.request(waiter);
      expected = model.request(session, s.owner);
      done.push(`${s.owner} requests (${session})`);
    } else if (s.kind === 'withdraw') {
      // Any session that ever asked: withdrawing one that is not waiting (granted, or withdrawn
      // already) changes nothing.
      const waiter = waiters[s.pick % Math.max(1, waiters.length)];
      if (waiter === undefined) continue;
      waiting.delete(waiter);
      gate.withdraw(waiter);
      expected = model.withdraw(waiter.key.sessionId);
      done.push(`${waiter.key.sessionId} withdraws`);
    } else {
      const slot = s.pick % Math.max(1, runningBy.length);
      const owner = runningBy[slot];
      if (owner === undefined) continue;
      runningBy.splice(slot, 1);
      gate.release(owner);
      expected = model.release(owner);
      done.push(`${owner} releases`);
    }
    const mayTake = owners.map((o) => `${o}:${gate.hasFree(o)}`).join(' ');
    const modelMayTake = owners.map((o) => `${o}:${model.mayTake(o)}`).join(' ');
    if (granted.join() !== expected.join() || mayTake !== modelMayTake) {
      return (
        `[slot-grant-reference] maxConcurrentRuns ${max}, maxRunningRunsPerOwner ${perOwner}, ` +
        `after ${done.join(', ')}: the gate granted [${granted.join(', ')}] (${mayTake}), ` +
        `the rules say [${expected.join(', ')}] (${modelMayTake})`
      );
    }
  }
  return undefined;
}

describe('slot gate against an independent reference', () => {
  it('requests, withdrawals and releases of three owners: every grant as the rules say', () => {
    // Pure and fast (well under a millisecond a sequence): 25 times the race properties' count.
    const numRuns = resolveRaceRuns(200) * 25;
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 4 }),
        fc.constantFrom(1, 2, Number.POSITIVE_INFINITY),
        fc.array(step, { minLength: 1, maxLength: 30 }),
        (max, perOwner, steps) => {
          const found = divergence(max, perOwner, steps);
          if (found !== undefined) throw new Error(found);
        },
      ),
      { numRuns },
    );
  });
});
