/**
 * runTurnLoopRaceProperty: random interleavings of pushes (plain, preempt, strategy, bursts in one
 * tick, late), stops (each mode), time, agent results and checkpoint + restart against TurnLoops
 * on a runtime you build, with item conservation checked across restarts.
 *
 * @module
 */
import type fc from 'fast-check';
import { CancelMode, type SafePointKind } from '../../machines/cancel-request.js';
import type { StopOptions } from '../turn-loop/turn-loop-types.js';
import { loadFastCheck, type FastCheck } from './fast-check.js';
import { checkProperty, type PropertyRun, type RaceReport } from './race-property.js';
import type { RaceAgentKind, RaceRuntimeFactory } from './race-world.js';

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
  /**
   * Bound, in ms of the simulated clock, from `stop({ mode: 'immediate' })` to the loop's exit
   * (`[stop-immediate-prompt]`), and past a shutdown's grace to everything ending: set it above
   * your runtime's `unwindTimeoutMs`. @default 10000
   */
  readonly stopWithinMs?: number;
  /**
   * The `maxConcurrentRuns` your factory configured: the sequences then also start runs in
   * another session, which hold runtime slots the turns wait for, and at most this many runs
   * may be RUNNING at once (`[slot-cap]`). @default none
   */
  readonly maxConcurrentRuns?: number;
}

import { probeCorruptCheckpoint } from './turn-loop-corrupt-probe.js';
import { shutdownHost } from './turn-loop-shutdown.js';
import { ownerId, sessionId, TurnLoopWorld } from './turn-loop-world.js';

type TurnLoopModel = { commands: number; shutDown: boolean };
type Command = fc.AsyncCommand<TurnLoopModel, TurnLoopWorld>;

/** The session of the runs that only hold runtime slots. */
const elsewhere = 'elsewhere';

abstract class Step implements Command {
  /** Nothing runs after a shutdown command: the sequence goes to its end. */
  check(model: Readonly<TurnLoopModel>): boolean {
    return !model.shutDown;
  }
  async run(model: TurnLoopModel, world: TurnLoopWorld): Promise<void> {
    const label = await this.act(world);
    model.shutDown = world.shutDown;
    world.trace.push(label);
    await world.clock.flush();
    world.checkStep();
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
    // An idle stop never hits a turn: it commits only once the loop is idle.
    if (this.options.idleForMs === undefined) world.current.stopped = true;
    if (this.options.mode === 'immediate') world.current.immediateAt ??= world.clock.now();
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

/**
 * A run of another caller in the loop's session (the next turn's run waits behind it), or in
 * another session (with `maxConcurrentRuns`, it holds a slot the next turn may wait for).
 */
class ForeignRun extends Step {
  constructor(readonly where: 'loop session' | 'elsewhere' = 'loop session') {
    super();
  }
  protected act(world: TurnLoopWorld): string {
    const session = this.where === 'elsewhere' ? elsewhere : sessionId;
    const live = world.foreign.filter(
      (f) => f.sessionId === session && world.runtime.runs.find(ownerId, session, f.runId),
    );
    if (live.length >= 2) return `${this.toString()} (two live already)`;
    const run = world.runtime.prepare({
      ownerId,
      sessionId: session,
      agent: world.agent,
      input: 'foreign',
    });
    world.foreign.push({ runId: run.id, sessionId: session });
    run.start();
    return `${this.toString()} ${run.id}`;
  }
  toString(): string {
    return this.where === 'elsewhere' ? 'run in another session' : 'foreign run';
  }
}

/** The oldest foreign run still live completes (now, or as soon as its agent executes). */
class ForeignComplete extends Step {
  protected act(world: TurnLoopWorld): string {
    const found = world.foreign.find((f) => world.runtime.runs.find(ownerId, f.sessionId, f.runId));
    if (found === undefined) return `${this.toString()} (none live)`;
    world.agent.complete(found.runId, 'foreign done');
    return `${this.toString()} ${found.runId}`;
  }
  toString(): string {
    return 'foreign complete';
  }
}

/** Checkpoint + restart; with `corrupt`, a loop is first tried on truncated or corrupt bytes. */
class Restart extends Step {
  constructor(readonly corrupt?: 'truncated' | 'corrupt') {
    super();
  }
  protected async act(world: TurnLoopWorld): Promise<string> {
    const generation = world.current;
    world.stopImmediate(generation, 'restart');
    await world.untilExited(generation);
    await world.closeGeneration(generation);
    const probed =
      this.corrupt === undefined ? '' : `${await probeCorruptCheckpoint(world, this.corrupt)}; `;
    await world.startGeneration();
    return `${this.toString()} (${probed}loop ${generation.index} exited, loop ${world.current.index} resumed with [${world.current.carriedIn.join(', ')}])`;
  }
  toString(): string {
    return this.corrupt === undefined
      ? 'checkpoint + restart'
      : `checkpoint + restart over ${this.corrupt} checkpoint bytes`;
  }
}

/** `stop({ mode: 'afterTurn' })`, then in the same tick `stop({ mode: 'immediate' })`: it must escalate. */
class StopThenImmediate extends Step {
  protected act(world: TurnLoopWorld): string {
    world.current.loop.stop({ mode: 'afterTurn' });
    world.stopImmediate(world.current, 'escalated');
    return this.toString();
  }
  toString(): string {
    return 'stop afterTurn, then stop immediate';
  }
}

/** The host shuts down here (see `shutdownHost`); no command runs after it. */
class Shutdown extends Step {
  constructor(readonly graceMs: number) {
    super();
  }
  protected async act(world: TurnLoopWorld): Promise<string> {
    return `${this.toString()} (${await shutdownHost(world, this.graceMs)})`;
  }
  toString(): string {
    return `shutdown(grace ${this.graceMs}ms)`;
  }
}

function commands(fc: FastCheck, withSlots: boolean): fc.Arbitrary<Command>[] {
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
    fc.constantFrom('truncated' as const, 'corrupt' as const).map((how) => new Restart(how)),
    fc.constant(new ForeignRun()),
    fc.constant(new ForeignComplete()),
    fc.constant(new StopThenImmediate()),
    fc.constantFrom(0, 20).map((graceMs) => new Shutdown(graceMs)),
    ...(withSlots
      ? [fc.constant(new ForeignRun('elsewhere')), fc.constant(new ForeignComplete())]
      : []),
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
 * leftovers, and without a save the store is unchanged or empty. A `stop({ mode: 'immediate' })`
 * (also right after a `stop({ mode: 'afterTurn' })`) exits the loop within `stopWithinMs`
 * (`[stop-immediate-prompt]`); with `maxConcurrentRuns`, runs of another session hold slots and
 * at most that many runs are RUNNING (`[slot-cap]`). A host shutdown may come at any step (the
 * loop stopped gracefully with `initiator: 'shutdown'`, the runtime shut down): within its grace
 * plus `stopWithinMs` the loop exits, every run ends, the shutdown resolves, and the stored
 * checkpoint loads (`[shutdown-loop-exits]`, `[shutdown-ends-runs]`, `[shutdown-resolves]`,
 * `[shutdown-checkpoint-loadable]`). At the end the runtime shuts down with no run live, no
 * timer armed and no actor (runtime or loop) active.
 *
 * @param factory - builds the runtime the loops run their turns on (see {@link RaceHarness})
 * @param options - {@link TurnLoopRacePropertyOptions}
 * @returns what ran, once every sequence passed
 * @throws Error (as a rejection) when fast-check, an optional peer, is not installed
 * @throws `InvalidArgumentError` (`INVALID_ARGUMENT`, as a rejection) when `RACE_RUNS` or
 *   `numRuns` is not a positive integer (see `resolveRaceRuns`)
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
      fc.commands(commands(fc, options.maxConcurrentRuns !== undefined), {
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
          stopWithinMs: options.stopWithinMs ?? 10_000,
          maxConcurrentRuns: options.maxConcurrentRuns,
          schedule: (settlement, label) => scheduler.schedule(settlement, label),
        });
        await world.startGeneration();
        await fc.scheduledModelRun(
          scheduler,
          () => ({ model: { commands: 0, shutDown: false }, real: world }),
          cmds,
        );
        const generation = world.current;
        world.stopImmediate(generation, 'end');
        await world.untilExited(generation, () => scheduler.waitAll());
        world.checkStep();
        await world.closeGeneration(generation);
        const shutdown = world.runtime.shutdown({ graceMs: 0 });
        let done = false;
        void shutdown.then(() => (done = true));
        for (let round = 0; round < 100 && !done; round++) {
          await scheduler.waitAll();
          await world.clock.advance(1_000);
        }
        if (!done) world.violation('[shutdown-resolves] runtime.shutdown() never resolved');
        if (world.runtime.runs.size !== 0)
          world.violation(
            `[nothing-left-behind] ${world.runtime.runs.size} runs live after shutdown`,
          );
        const alive = world.actors.filter(
          (actor) => (actor.getSnapshot() as { status: string }).status === 'active',
        );
        if (alive.length > 0)
          world.violation(`[nothing-left-behind] ${alive.length} actors still active at the end`);
        if (world.clock.pendingTimers !== 0) {
          world.violation(
            `[nothing-left-behind] ${world.clock.pendingTimers} timers armed after the loops exited and the runtime shut down`,
          );
        }
        world.throwIfViolated('the end');
        await settleRejections(world.trace);
      },
    );
  return checkProperty(property, { ...options, maxCommandsDefault: 40 });
}
