/**
 * runTurnLoopRaceProperty: random interleavings of pushes (plain, preempt, strategy, bursts in one
 * tick, late), stops (each mode), time, agent results and checkpoint + restart against TurnLoops
 * on a runtime you build, with item conservation checked across restarts.
 *
 * @module
 */
import type fc from 'fast-check';
import type { AnyActorRef, InspectionEvent } from 'xstate';
import { CancelMode, type SafePointKind } from '../../machines/cancel-request.js';
import type { TurnLoopContext } from '../../machines/turn-loop.types.js';
import type { RunplaneEvent } from '../events/event-log.js';
import { LateItemsTakenError, RunplaneError } from '../errors.js';
import type { Runtime } from '../runtime/create-runtime.js';
import type { CheckpointStore } from '../stores/checkpoint-store.js';
import { createMemoryCheckpointStore } from '../stores/memory-checkpoint-store.js';
import { jsonCheckpointCodec, type Checkpoint } from '../turn-loop/checkpoint.js';
import { createTurnLoop } from '../turn-loop/create-turn-loop.js';
import type {
  StopOptions,
  TurnContext,
  TurnLoop,
  TurnLoopExit,
} from '../turn-loop/turn-loop-types.js';
import { loadFastCheck, type FastCheck } from './fast-check.js';
import { checkProperty, type PropertyRun, type RaceReport } from './race-property.js';
import { RaceInvariantError, type RaceAgentKind, type RaceRuntimeFactory } from './race-world.js';
import { createScriptedAgent, type ScriptedAgent } from './scripted-agent.js';
import { createTestClock, type TestClock } from './test-clock.js';

/** Options of {@link runTurnLoopRaceProperty}. Every field is optional. */
export interface TurnLoopRacePropertyOptions {
  /** Sequences to run when `RACE_RUNS` is not set (`RACE_RUNS` always wins). @default 200 */
  readonly numRuns?: number;
  /** Seed to replay. @default `RACE_SEED`, else random */
  readonly seed?: number;
  /** fast-check path to replay (with `seed`). @default `RACE_PATH` */
  readonly path?: string;
  /** fast-check `replayPath` of the command list. @default `RACE_REPLAY_PATH` */
  readonly replayPath?: string;
  /** Most commands per sequence. @default 40 */
  readonly maxCommands?: number;
  /** Also hands the failure report here (it is always the thrown error's message). @default none */
  readonly log?: (report: string) => void;
}

const ownerId = 'owner';
const sessionId = 'loop';
const checkpointId = 'race';

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
  exit: TurnLoopExit<number> | undefined;
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
class TurnLoopWorld {
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
  nextItem = 1;

  constructor(
    factory: RaceRuntimeFactory,
    readonly settings: {
      readonly agentKind: RaceAgentKind;
      readonly take: number;
      readonly requeuePreempted: boolean;
      /** Leave `onAgentEvents` to the loop's default (it only awaits the run's end). */
      readonly defaultHandler: boolean;
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
      this.violation(`the runtime reported errors: ${this.reported.map(String).join('; ')}`);
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
    const checkpoint = text === undefined ? undefined : decode(text);
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
      exit: undefined,
    };
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
              `${info.turnId} was planned while the run ${runId} of an earlier turn had not settled`,
            );
          }
        }
        // "N pushes in one tick are handled in push order."
        if (!increasing(items) || !increasing(info.preemptedItems)) {
          this.violation(
            `${info.turnId} was offered items out of push order: [${items.join(', ')}], preempted [${info.preemptedItems.join(', ')}]`,
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
    void loop.wait().then((exit) => (generation.exit = exit));
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
        if (generation.exit !== undefined && result.accepted) {
          this.violation(`push(${item}) was accepted after the loop exited`);
        }
        const ack = { item, settled: false };
        generation.acks.push(ack);
        void result.ack.then(() => (ack.settled = true));
      } catch (error) {
        if (!(error instanceof LateItemsTakenError)) {
          this.violation(
            `push(${item}) threw ${error instanceof RunplaneError ? error.code : String(error)}`,
          );
        }
      }
    }
  }

  /** Drives time (and, through the outer scheduler, settlements) until the loop exited. */
  async untilExited(generation: Generation, releaseAll?: () => Promise<void>): Promise<void> {
    for (let round = 0; round < 300 && generation.exit === undefined; round++) {
      if (releaseAll !== undefined) await releaseAll();
      await this.clock.flush();
      if (generation.exit !== undefined) break;
      const next = this.clock.nextTimerAt;
      if (next !== undefined) await this.clock.advance(Math.max(0, next - this.clock.now()));
    }
    if (generation.exit === undefined) {
      this.violation(`loop ${generation.index} never exited after stop({ mode: 'immediate' })`);
    }
  }

  /** Item conservation for one loop, and what it left in the store. */
  async closeGeneration(generation: Generation): Promise<void> {
    const exit = generation.exit;
    if (exit === undefined) return;
    const late = exit.takeLateItems();
    if (exit.takeLateItems().length !== 0) this.violation('takeLateItems() gave items twice');
    try {
      generation.loop.push(this.nextItem++);
      this.violation('push() after takeLateItems() did not throw LATE_ITEMS_TAKEN');
    } catch (error) {
      if (!(error instanceof LateItemsTakenError)) {
        this.violation(`push() after takeLateItems() threw ${String(error)}, not LATE_ITEMS_TAKEN`);
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
        consumed: last.get(item)?.event === 'consumed' && interrupted === 0 ? 1 : 0,
      };
      const total = where.dropped + where.unhandled + where.interrupted + where.consumed;
      if (total !== count(owned, item)) {
        this.violation(
          `loop ${generation.index}: item ${item} ended ${total} times (${JSON.stringify(where)}), it was given ${count(owned, item)} time(s)`,
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
        this.violation(`loop ${generation.index}: item ${item} appeared from nowhere`);
    }
    if (
      late.length !== generation.refused.length ||
      generation.refused.some((item) => count(late, item) !== 1)
    ) {
      this.violation(
        `loop ${generation.index}: refused [${generation.refused.join(', ')}], late items [${late.join(', ')}]`,
      );
    }
    const open = generation.acks.filter((ack) => !ack.settled);
    if (open.length > 0) {
      this.violation(
        `loop ${generation.index}: acks of ${open.map((a) => a.item).join(', ')} never resolved`,
      );
    }
    // What a restart will find: exactly the exit's leftovers if they were saved, else nothing new.
    const text = await stored(this.store);
    if (exit.checkpointAttempted && exit.checkpointError === undefined) {
      const checkpoint = text === undefined ? undefined : decode(text);
      if (
        checkpoint === undefined ||
        checkpoint.unhandled.join() !== exit.unhandledItems.join() ||
        checkpoint.interrupted.join() !== exit.interruptedItems.join()
      ) {
        this.violation(
          `loop ${generation.index}: the saved checkpoint does not hold what the exit left`,
        );
      }
    } else if (text !== undefined && text !== generation.storedAtStart) {
      this.violation(
        `loop ${generation.index}: the store changed although no checkpoint was saved`,
      );
    }
  }
}

type TurnLoopModel = { commands: number };
type Command = fc.AsyncCommand<TurnLoopModel, TurnLoopWorld>;

abstract class Step implements Command {
  check(): boolean {
    return true;
  }
  async run(_model: TurnLoopModel, world: TurnLoopWorld): Promise<void> {
    const label = await this.act(world);
    world.trace.push(label);
    await world.clock.flush();
    world.throwIfViolated(label);
  }
  protected abstract act(world: TurnLoopWorld): string | Promise<string>;
  abstract toString(): string;
}

class Push extends Step {
  constructor(
    readonly burst: number,
    readonly kind: 'plain' | 'preempt' | 'strategy',
    readonly mode: number,
    readonly timeoutMs: number | undefined,
    readonly delayMs: number | undefined,
  ) {
    super();
  }
  protected act(world: TurnLoopWorld): string {
    const items = Array.from({ length: this.burst }, () => world.nextItem++);
    const options =
      this.kind === 'plain'
        ? {}
        : this.kind === 'strategy'
          ? {
              strategy: (turn: { consumed: readonly number[] } | undefined) =>
                turn !== undefined && turn.consumed.length > 1 ? { preempt: this.mode } : undefined,
            }
          : {
              preempt: this.mode,
              ...(this.timeoutMs === undefined ? {} : { preemptTimeoutMs: this.timeoutMs }),
              ...(this.delayMs === undefined ? {} : { preemptDelayMs: this.delayMs }),
            };
    world.push(items, options);
    return `push(${items.join(', ')}${this.kind === 'plain' ? '' : `, ${this.describe()}`})`;
  }
  describe(): string {
    if (this.kind === 'strategy') return 'strategy';
    return `preempt ${this.mode}${this.timeoutMs === undefined ? '' : ` escalate ${this.timeoutMs}ms`}${this.delayMs === undefined ? '' : ` delay ${this.delayMs}ms`}`;
  }
  toString(): string {
    return `push(${this.burst} item(s)${this.kind === 'plain' ? '' : `, ${this.describe()}`})`;
  }
}

class Stop extends Step {
  constructor(readonly options: StopOptions) {
    super();
  }
  protected act(world: TurnLoopWorld): string {
    world.current.loop.stop(this.options);
    return this.toString();
  }
  toString(): string {
    return `stop(${JSON.stringify(this.options)})`;
  }
}

class Advance extends Step {
  constructor(readonly ms: number) {
    super();
  }
  protected async act(world: TurnLoopWorld): Promise<string> {
    await world.clock.advance(this.ms);
    return this.toString();
  }
  toString(): string {
    return `advance(${this.ms}ms)`;
  }
}

class AgentStep extends Step {
  constructor(readonly action: 'complete' | 'fail' | SafePointKind) {
    super();
  }
  protected act(world: TurnLoopWorld): string {
    const runId = world.currentTurnRun();
    if (runId === undefined) return `${this.toString()} (no turn running)`;
    if (this.action === 'complete') world.agent.complete(runId, 'done');
    else if (this.action === 'fail') world.agent.fail(runId, new Error('agent failed'));
    else world.agent.safePoint(runId, this.action);
    return `${this.toString()} on ${runId}`;
  }
  toString(): string {
    return `agent ${this.action}`;
  }
}

class Restart extends Step {
  protected async act(world: TurnLoopWorld): Promise<string> {
    const generation = world.current;
    generation.loop.stop({ mode: 'immediate', cause: 'restart' });
    await world.untilExited(generation);
    await world.closeGeneration(generation);
    await world.startGeneration();
    return `${this.toString()} (loop ${generation.index} exited, loop ${world.current.index} resumed with [${world.current.carriedIn.join(', ')}])`;
  }
  toString(): string {
    return 'checkpoint + restart';
  }
}

function commands(fc: FastCheck): fc.Arbitrary<Command>[] {
  const safeBits = fc.constantFrom(
    CancelMode.AfterChatModel,
    CancelMode.AfterToolCalls,
    CancelMode.AnySafePoint,
  );
  const push = fc
    .record({
      burst: fc.constantFrom(1, 1, 1, 2, 3),
      kind: fc.constantFrom<'plain' | 'preempt' | 'strategy'>(
        'plain',
        'plain',
        'preempt',
        'strategy',
      ),
      mode: safeBits,
      timeoutMs: fc.constantFrom<number | undefined>(undefined, 0, 20),
      delayMs: fc.constantFrom<number | undefined>(undefined, undefined, 10),
    })
    .map((p) => new Push(p.burst, p.kind, p.mode, p.timeoutMs, p.delayMs));
  const stop = fc
    .record({
      mode: fc.constantFrom<'afterTurn' | 'graceful' | 'immediate'>(
        'afterTurn',
        'graceful',
        'immediate',
      ),
      graceMs: fc.constantFrom<number | undefined>(undefined, 15),
      idleForMs: fc.constantFrom<number | undefined>(undefined, undefined, 10),
      skipCheckpoint: fc.boolean(),
      cause: fc.constantFrom<string | undefined>(undefined, 'race'),
    })
    .map(
      (s) =>
        new Stop({
          skipCheckpoint: s.skipCheckpoint,
          // An idle stop takes no mode or grace: no turn runs when it commits.
          ...(s.idleForMs === undefined
            ? {
                mode: s.mode,
                ...(s.mode === 'graceful' && s.graceMs !== undefined ? { graceMs: s.graceMs } : {}),
              }
            : { idleForMs: s.idleForMs }),
          ...(s.cause === undefined ? {} : { cause: s.cause }),
        }),
    );
  return [
    push,
    push,
    push,
    push,
    stop,
    fc.integer({ min: 1, max: 30 }).map((ms) => new Advance(ms)),
    fc.integer({ min: 1, max: 30 }).map((ms) => new Advance(ms)),
    fc.constant(new AgentStep('complete')),
    fc.constant(new AgentStep('complete')),
    fc.constant(new AgentStep('complete')),
    fc.constant(new AgentStep('fail')),
    fc.constant(new AgentStep('afterChatModel')),
    fc.constant(new AgentStep('afterToolCalls')),
    fc.constant(new Restart()),
  ];
}

/**
 * Runs random interleavings against TurnLoops on runtimes from `factory`: pushes (plain, with a
 * preempt of each safe-point mode, escalating and delayed, through a push strategy, several in
 * one tick, and after the stop: late), stops of each mode (with grace, idle wait, cause,
 * skipCheckpoint), time, agent completion, failure and safe points, and checkpoint + restart on
 * a memory store; fast-check's scheduler decides when planning, agent preparation and every
 * agent settlement land. Each sequence also picks whether its loops follow their turns' events
 * in `onAgentEvents` or leave it to the default (which only awaits the run's end).
 *
 * @remarks
 * Checked at every step: genInput sees items in push order and is never called while an
 * earlier turn's run is still live; the runtime reports no error. Checked at each loop's exit
 * (every restart and the end): every item the loop was given (pushed and accepted, or carried
 * in by the checkpoint it started from) ends in exactly one of consumed by a turn that
 * finished or was preempted, `droppedItems`, `unhandledItems` or `interruptedItems`; every
 * refused push is in `takeLateItems()`, once, and a push after that throws
 * `LATE_ITEMS_TAKEN`; every push's `ack` resolved; a saved checkpoint holds exactly the exit's
 * leftovers, and without a save the store is unchanged or empty. At the end the runtime shuts
 * down with no run live, no timer armed and no actor (runtime or loop) active.
 *
 * @param factory - builds the runtime the loops run their turns on (see {@link RaceHarness})
 * @param options - {@link TurnLoopRacePropertyOptions}
 * @returns what ran, once every sequence passed
 * @throws Error (as a rejection) when fast-check, an optional peer, is not installed
 * @throws Error (as a rejection) with the violated invariant, the steps, the seed and the path
 */
export async function runTurnLoopRaceProperty(
  factory: RaceRuntimeFactory,
  options: TurnLoopRacePropertyOptions = {},
): Promise<RaceReport> {
  const fc = await loadFastCheck();
  const property = ({ replayPath, maxCommands, settleRejections }: PropertyRun) =>
    fc.asyncProperty(
      fc.scheduler(),
      fc.commands(commands(fc), {
        maxCommands,
        size: 'max',
        ...(replayPath === undefined ? {} : { replayPath }),
      }),
      fc.constantFrom<RaceAgentKind>('honours-signal', 'ignores-signal'),
      fc.constantFrom(1, 2),
      fc.boolean(),
      fc.boolean(),
      async (scheduler, cmds, agentKind, take, requeuePreempted, defaultHandler) => {
        const world = new TurnLoopWorld(factory, {
          agentKind,
          take,
          requeuePreempted,
          defaultHandler,
          schedule: (settlement, label) => scheduler.schedule(settlement, label),
        });
        await world.startGeneration();
        await fc.scheduledModelRun(
          scheduler,
          () => ({ model: { commands: 0 }, real: world }),
          cmds,
        );
        const generation = world.current;
        generation.loop.stop({ mode: 'immediate', cause: 'end' });
        await world.untilExited(generation, () => scheduler.waitAll());
        await world.closeGeneration(generation);
        const shutdown = world.runtime.shutdown({ graceMs: 0 });
        let done = false;
        void shutdown.then(() => (done = true));
        for (let round = 0; round < 100 && !done; round++) {
          await scheduler.waitAll();
          await world.clock.advance(1_000);
        }
        if (!done) world.violation('runtime.shutdown() never resolved');
        if (world.runtime.runs.size !== 0)
          world.violation(`${world.runtime.runs.size} runs live after shutdown`);
        const alive = world.actors.filter(
          (actor) => (actor.getSnapshot() as { status: string }).status === 'active',
        );
        if (alive.length > 0) world.violation(`${alive.length} actors still active at the end`);
        if (world.clock.pendingTimers !== 0) {
          world.violation(
            `${world.clock.pendingTimers} timers armed after the loops exited and the runtime shut down`,
          );
        }
        world.throwIfViolated('the end');
        await settleRejections(world.trace);
      },
    );
  return checkProperty(property, { ...options, maxCommandsDefault: 40 });
}
