/**
 * The world one TurnLoop race sequence runs against: loops on a runtime you build, a scripted
 * agent, a memory checkpoint store, runs of other callers in the loop's session, and the checks
 * of every step and of every loop's exit (see runTurnLoopRaceProperty).
 *
 * @internal
 * @module
 */
import type { AnyActorRef, InspectionEvent } from 'xstate';
import type { TurnEnding, TurnLoopContext } from '../../machines/turn-loop.types.js';
import type { RunplaneEvent } from '../events/event-log.js';
import { LateItemsTakenError, RunplaneError } from '../errors.js';
import type { Runtime } from '../runtime/create-runtime.js';
import type { CheckpointStore } from '../stores/checkpoint-store.js';
import { createMemoryCheckpointStore } from '../stores/memory-checkpoint-store.js';
import { jsonCheckpointCodec, type Checkpoint } from '../turn-loop/checkpoint.js';
import { createTurnLoop } from '../turn-loop/create-turn-loop.js';
import type { TurnContext, TurnLoop, TurnLoopExit } from '../turn-loop/turn-loop-types.js';
import { RaceInvariantError, type RaceAgentKind, type RaceRuntimeFactory } from './race-world.js';
import { createScriptedAgent, type ScriptedAgent } from './scripted-agent.js';
import { createTestClock, type TestClock } from './test-clock.js';
import { TurnLoopLedger } from './turn-loop-ledger.js';

export const ownerId = 'owner';
export const sessionId = 'loop';
export const checkpointId = 'race';

/** One TurnLoop between two restarts. */
interface Generation {
  readonly index: number;
  readonly loop: TurnLoop<number>;
  readonly accepted: number[];
  readonly refused: number[];
  /** Items of the checkpoint the loop started from. */
  readonly carriedIn: number[];
  /** The stored bytes when the loop started. */
  readonly storedAtStart: string | undefined;
  readonly history: Array<{ item: number; event: 'reoffered' | 'consumed'; turnId: string }>;
  readonly turnRuns: string[];
  readonly acks: Array<{ item: number; settled: boolean }>;
  /** The reference model of this loop's items and preempts. */
  readonly ledger: TurnLoopLedger;
  /** Run ids of the loop's turns, by turn id. */
  readonly runOfTurn: Map<string, string>;
  /** Whether a stop that can hit a turn (not an idle stop) was called on this loop. */
  stopped: boolean;
  /** Clock ms of the first `stop({ mode: 'immediate' })` on this loop. */
  immediateAt: number | undefined;
  /** Whether `[stop-immediate-prompt]` was already reported for this loop. */
  latenessReported: boolean;
  exit: TurnLoopExit<number> | undefined;
  /** Clock ms when `wait()` resolved. */
  exitAt: number | undefined;
  /** Whether `closeGeneration` checked this loop's exit. */
  closed: boolean;
}

const stored = async (store: CheckpointStore): Promise<string | undefined> => {
  const data = await store.get({}, checkpointId);
  return data === undefined ? undefined : new TextDecoder().decode(data);
};

const decode = (text: string): Checkpoint<number> =>
  jsonCheckpointCodec.decode(new TextEncoder().encode(text)) as Checkpoint<number>;

const count = (list: readonly number[], item: number) => list.filter((x) => x === item).length;

const increasing = (list: readonly number[]) => list.every((x, i) => i === 0 || list[i - 1]! < x);

/** @internal The system one sequence runs against. */
export class TurnLoopWorld {
  readonly clock: TestClock = createTestClock();
  readonly runtime: Runtime;
  readonly store = createMemoryCheckpointStore();
  readonly agent: ScriptedAgent<unknown>;
  readonly generations: Generation[] = [];
  readonly violations: string[] = [];
  readonly reported: unknown[] = [];
  readonly trace: string[] = [];
  /** Every actor of the runtime and of the loops, to check none is left active at the end. */
  readonly actors: AnyActorRef[] = [];
  /**
   * Runs that are not the loop's: in the loop's session (its turns wait behind them) or in
   * another session (they hold a runtime slot the turns may wait for).
   */
  readonly foreign: Array<{ readonly runId: string; readonly sessionId: string }> = [];
  /** Set once a `shutdown` command ran: the sequence's other commands no longer apply. */
  shutDown = false;
  nextItem = 1;

  constructor(
    factory: RaceRuntimeFactory,
    readonly settings: {
      readonly agentKind: RaceAgentKind;
      readonly take: number;
      readonly requeuePreempted: boolean;
      /** Leave `onAgentEvents` to the loop's default (it only awaits the run's end). */
      readonly defaultHandler: boolean;
      /** Bound on the simulated clock from `stop({ mode: 'immediate' })` to the loop's exit. */
      readonly stopWithinMs: number;
      /** The `maxConcurrentRuns` the factory configured, checked as `[slot-cap]`. */
      readonly maxConcurrentRuns: number | undefined;
      readonly schedule: <T>(settlement: Promise<T>, label: string) => Promise<T>;
    },
  ) {
    this.runtime = factory({
      clock: this.clock,
      reportError: (error) => this.reported.push(error),
      inspect: (event) => this.#track(event),
    });
    this.agent = createScriptedAgent({
      onAbort: settings.agentKind === 'honours-signal' ? 'reject' : 'ignore',
      schedule: settings.schedule,
    });
  }

  #track(event: InspectionEvent): void {
    if (event.type === '@xstate.actor') this.actors.push(event.actorRef as AnyActorRef);
  }

  /** Feeds the loop's turn steps to the generation's reference model. */
  #observeTurn(generation: Generation, step: { type: string }): void {
    const { ledger } = generation;
    const turn = step as { type: string; turnId?: string; runId?: string; ending?: TurnEnding };
    if (turn.turnId === undefined) return;
    if (turn.type === 'turn.started' && turn.runId !== undefined) {
      generation.runOfTurn.set(turn.turnId, turn.runId);
      for (const broken of ledger.started(turn.turnId)) this.violation(broken);
    } else if (turn.type === 'turn.ended' && turn.ending !== undefined) {
      const runId = generation.runOfTurn.get(turn.turnId) ?? '';
      const end = {
        status: turn.ending.status,
        cancelledBy: turn.ending.cancelledBy,
        agentRan: this.agent.executed.includes(runId),
        stopped: generation.stopped,
      };
      for (const broken of ledger.ended(turn.turnId, end, this.clock.now())) this.violation(broken);
    }
  }

  get current(): Generation {
    const generation = this.generations.at(-1);
    if (generation === undefined) throw new Error('no loop yet');
    return generation;
  }

  /** The run of the current turn, if its agent is executing. */
  currentTurnRun(): string | undefined {
    return this.current.turnRuns.findLast((runId) => this.agent.isExecuting(runId));
  }

  violation(message: string): void {
    this.violations.push(message);
  }

  throwIfViolated(step: string): void {
    if (this.reported.length > 0) {
      this.violation(
        `[no-reported-errors] the runtime reported errors: ${this.reported.map(String).join('; ')}`,
      );
      this.reported.length = 0;
    }
    if (this.violations.length === 0) return;
    const message = `after ${step}: ${this.violations.join('\n  ')}\n  steps: ${this.trace.join(', ')}`;
    this.violations.length = 0;
    throw new RaceInvariantError(message);
  }

  /** Starts a new loop on the store (the first one, or after a restart). */
  async startGeneration(): Promise<void> {
    const text = await stored(this.store);
    let checkpoint: Checkpoint<number> | undefined;
    try {
      checkpoint = text === undefined ? undefined : decode(text);
    } catch (error) {
      this.violation(
        `[checkpoint-holds-exit] loop ${this.generations.length + 1} cannot start: the stored checkpoint does not decode: ${String(error)}`,
      );
      this.throwIfViolated('checkpoint + restart');
    }
    const generation: Generation = {
      index: this.generations.length + 1,
      loop: undefined as unknown as TurnLoop<number>,
      accepted: [],
      refused: [],
      carriedIn:
        checkpoint === undefined ? [] : [...checkpoint.interrupted, ...checkpoint.unhandled],
      storedAtStart: text,
      history: [],
      turnRuns: [],
      acks: [],
      ledger: new TurnLoopLedger(this.settings.requeuePreempted),
      runOfTurn: new Map(),
      stopped: false,
      immediateAt: undefined,
      latenessReported: false,
      exit: undefined,
      exitAt: undefined,
      closed: false,
    };
    for (const item of generation.carriedIn) generation.ledger.accepted(item);
    const { schedule, take, requeuePreempted, defaultHandler } = this.settings;
    /** A turn's run started with these items: record them (once per turn). */
    const turnStarted = (turnId: string, runId: string, consumed: readonly number[]) => {
      generation.turnRuns.push(runId);
      for (const item of consumed) generation.history.push({ item, event: 'consumed', turnId });
    };
    const loop = createTurnLoop<number>({
      runtime: this.runtime,
      ownerId,
      sessionId,
      store: this.store,
      checkpointId,
      requeuePreempted,
      inspect: (event) => {
        this.#track(event);
        if (event.type === '@xstate.snapshot') {
          this.#observeTurn(generation, event.event);
          const { context } = event.snapshot as unknown as { context?: TurnLoopContext };
          if (context !== undefined && 'buffer' in context) {
            generation.ledger.observeCurrent(context.turn?.turnId);
          }
        }
        // With the default handler there is no onAgentEvents to see a turn start: read the
        // loop's own `turn.started` step and the consumed items of its planned turn.
        if (defaultHandler && event.type === '@xstate.snapshot') {
          const started = event.event as { type: string; turnId?: string; runId?: string };
          const { context } = event.snapshot as unknown as { context?: TurnLoopContext };
          const turn = context?.turn;
          if (
            started.type === 'turn.started' &&
            turn !== undefined &&
            turn.turnId === started.turnId
          ) {
            turnStarted(turn.turnId, started.runId ?? '', (turn.plan?.consumed ?? []) as number[]);
          }
        }
      },
      genInput: async (items, info) => {
        // "A turn's agent is cancelled and drained before the next turn starts."
        for (const runId of generation.turnRuns) {
          if (this.runtime.runs.find(ownerId, sessionId, runId) !== undefined) {
            this.violation(
              `[turn-after-settle] ${info.turnId} was planned while the run ${runId} of an earlier turn had not settled`,
            );
          }
        }
        // "N pushes in one tick are handled in push order."
        if (!increasing(items) || !increasing(info.preemptedItems)) {
          this.violation(
            `[push-order] ${info.turnId} was offered items out of push order: [${items.join(', ')}], preempted [${info.preemptedItems.join(', ')}]`,
          );
        }
        for (const item of info.preemptedItems) {
          generation.history.push({ item, event: 'reoffered', turnId: info.turnId });
        }
        await schedule(Promise.resolve(), `genInput ${info.turnId}`);
        const offered = [...info.preemptedItems, ...items];
        const consumed = offered.slice(0, take);
        // Multiples of 7 among the rest are dropped (reported in exit.droppedItems).
        const remaining = offered.slice(take).filter((item) => item % 7 !== 0);
        const dropped = offered.slice(take).filter((item) => item % 7 === 0);
        for (const broken of generation.ledger.offered(info.turnId, offered, consumed, dropped)) {
          this.violation(broken);
        }
        return { input: consumed, consumed, remaining };
      },
      prepareAgent: async (_consumed, info) => {
        await schedule(Promise.resolve(), `prepareAgent ${info.turnId}`);
        return this.agent;
      },
      ...(defaultHandler
        ? {}
        : {
            onAgentEvents: async (
              turn: TurnContext<number>,
              events: AsyncIterable<RunplaneEvent>,
            ) => {
              turnStarted(turn.turnId, turn.runId, turn.consumed);
              let failed = false;
              for await (const event of events) failed ||= event.type === 'run.failed';
              return failed ? new Error('the turn failed') : undefined;
            },
          }),
    });
    (generation as { loop: TurnLoop<number> }).loop = loop;
    void loop.wait().then((exit) => {
      generation.exit = exit;
      generation.exitAt = this.clock.now();
    });
    this.generations.push(generation);
    loop.run();
    await this.clock.flush();
  }

  /** Pushes `items` in one tick; records what the loop accepted and refused. */
  push(items: number[], options: Parameters<TurnLoop<number>['push']>[1]): void {
    const generation = this.current;
    for (const item of items) {
      try {
        const result = generation.loop.push(item, options);
        (result.accepted ? generation.accepted : generation.refused).push(item);
        if (result.accepted) {
          const aimed = options !== undefined && ('preempt' in options || 'strategy' in options);
          generation.ledger.accepted(
            item,
            aimed ? { at: this.clock.now(), delayMs: options.preemptDelayMs } : undefined,
          );
        }
        if (generation.exit !== undefined && result.accepted) {
          this.violation(`[no-push-after-exit] push(${item}) was accepted after the loop exited`);
        }
        const ack = { item, settled: false };
        generation.acks.push(ack);
        void result.ack.then(() => (ack.settled = true));
      } catch (error) {
        if (!(error instanceof LateItemsTakenError)) {
          this.violation(
            `[push-never-throws] push(${item}) threw ${error instanceof RunplaneError ? error.code : String(error)}`,
          );
        }
      }
    }
  }

  /** `stop({ mode: 'immediate' })` on `generation`, remembering when for `[stop-immediate-prompt]`. */
  stopImmediate(generation: Generation, cause: string): void {
    generation.stopped = true;
    generation.immediateAt ??= this.clock.now();
    generation.loop.stop({ mode: 'immediate', cause });
  }

  /**
   * The checks of every step that do not belong to one command: an immediate stop exits the
   * loop within `stopWithinMs` on the simulated clock, and at most `maxConcurrentRuns` runs
   * are RUNNING at once.
   */
  checkStep(): void {
    for (const generation of this.generations) {
      const { immediateAt } = generation;
      if (immediateAt === undefined || generation.latenessReported) continue;
      const end = generation.exitAt ?? this.clock.now();
      if (end - immediateAt > this.settings.stopWithinMs) {
        generation.latenessReported = true;
        this.violation(
          `[stop-immediate-prompt] loop ${generation.index} was stopped immediately at ${immediateAt} ms and ${generation.exitAt === undefined ? `has not exited at ${end} ms` : `exited only at ${end} ms`} (bound ${this.settings.stopWithinMs} ms)`,
        );
      }
    }
    const cap = this.settings.maxConcurrentRuns;
    if (cap === undefined) return;
    const running = this.knownRuns().filter(
      ({ runId, sessionId: session }) =>
        this.runtime.runs.find(ownerId, session, runId)?.status === 'RUNNING',
    );
    if (running.length > cap) {
      this.violation(
        `[slot-cap] ${running.length} runs RUNNING at once (${running.map((r) => r.runId).join(', ')}), above maxConcurrentRuns ${cap}`,
      );
    }
  }

  /** Every run of the sequence: the loops' turns and the foreign runs. */
  knownRuns(): Array<{ readonly runId: string; readonly sessionId: string }> {
    const turns = this.generations.flatMap((g) =>
      g.turnRuns.map((runId) => ({ runId, sessionId })),
    );
    return [...turns, ...this.foreign];
  }

  /** Drives time (and, through the outer scheduler, settlements) until the loop exited. */
  async untilExited(generation: Generation, releaseAll?: () => Promise<void>): Promise<void> {
    for (let round = 0; round < 300 && generation.exit === undefined; round++) {
      if (releaseAll !== undefined) await releaseAll();
      await this.clock.flush();
      if (generation.exit !== undefined) break;
      this.checkStep();
      if (generation.latenessReported) return;
      const next = this.clock.nextTimerAt;
      if (next !== undefined) await this.clock.advance(Math.max(0, next - this.clock.now()));
    }
    if (generation.exit === undefined) {
      this.violation(
        `[stop-exits] loop ${generation.index} never exited after stop({ mode: 'immediate' })`,
      );
    }
  }

  /** Item conservation for one loop, and what it left in the store. */
  async closeGeneration(generation: Generation): Promise<void> {
    const exit = generation.exit;
    if (exit === undefined || generation.closed) return;
    generation.closed = true;
    const late = exit.takeLateItems();
    if (exit.takeLateItems().length !== 0)
      this.violation('[late-items-once] takeLateItems() gave items twice');
    try {
      generation.loop.push(this.nextItem++);
      this.violation(
        '[late-items-once] push() after takeLateItems() did not throw LATE_ITEMS_TAKEN',
      );
    } catch (error) {
      if (!(error instanceof LateItemsTakenError)) {
        this.violation(
          `[late-items-once] push() after takeLateItems() threw ${String(error)}, not LATE_ITEMS_TAKEN`,
        );
      }
    }
    const last = new Map<number, { event: 'reoffered' | 'consumed'; turnId: string }>();
    for (const entry of generation.history) last.set(entry.item, entry);
    const owned = [...generation.accepted, ...generation.carriedIn];
    for (const item of new Set(owned)) {
      const interrupted = count(exit.interruptedItems, item);
      const where = {
        dropped: count(exit.droppedItems, item),
        unhandled: count(exit.unhandledItems, item),
        interrupted,
        consumed: generation.ledger.isConsumed(item) ? 1 : 0,
      };
      const total = where.dropped + where.unhandled + where.interrupted + where.consumed;
      if (total !== count(owned, item)) {
        this.violation(
          `[item-ends-once] loop ${generation.index}: item ${item} ended ${total} times (${JSON.stringify(where)}), it was given ${count(owned, item)} time(s)`,
        );
      }
    }
    for (const item of [
      ...exit.droppedItems,
      ...exit.unhandledItems,
      ...exit.interruptedItems,
      ...last.keys(),
    ]) {
      if (!owned.includes(item))
        this.violation(
          `[item-ends-once] loop ${generation.index}: item ${item} appeared from nowhere`,
        );
    }
    if (
      late.length !== generation.refused.length ||
      generation.refused.some((item) => count(late, item) !== 1)
    ) {
      this.violation(
        `[late-items-once] loop ${generation.index}: refused [${generation.refused.join(', ')}], late items [${late.join(', ')}]`,
      );
    }
    const open = generation.acks.filter((ack) => !ack.settled);
    if (open.length > 0) {
      this.violation(
        `[acks-resolve] loop ${generation.index}: acks of ${open.map((a) => a.item).join(', ')} never resolved`,
      );
    }
    // What a restart will find: exactly the exit's leftovers if they were saved, else nothing new.
    const text = await stored(this.store);
    if (exit.checkpointAttempted && exit.checkpointError === undefined) {
      let checkpoint: Checkpoint<number> | undefined;
      try {
        checkpoint = text === undefined ? undefined : decode(text);
      } catch (error) {
        this.violation(
          `[checkpoint-holds-exit] loop ${generation.index}: the saved checkpoint does not decode: ${String(error)}`,
        );
        return;
      }
      if (
        checkpoint === undefined ||
        checkpoint.unhandled.join() !== exit.unhandledItems.join() ||
        checkpoint.interrupted.join() !== exit.interruptedItems.join()
      ) {
        this.violation(
          `[checkpoint-holds-exit] loop ${generation.index}: the saved checkpoint does not hold what the exit left`,
        );
      }
    } else if (text !== undefined && text !== generation.storedAtStart) {
      this.violation(
        `[checkpoint-holds-exit] loop ${generation.index}: the store changed although no checkpoint was saved`,
      );
    }
  }
}
