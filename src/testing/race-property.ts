/**
 * runRaceProperty: random interleavings of everything that can happen to runs, against a runtime
 * you build, with runplane's invariants checked after every step.
 *
 * @module
 */
import type fc from 'fast-check';
import type { SessionStrategy } from '../../machines/session.machine.js';
import { InvalidArgumentError } from '../errors.js';
import type { AgentContractOptions, AgentReach } from './agent-contract.js';
import { AgentWorld, agentCommands, type AgentUnderTest } from './agent-race.js';
import { raceCommands, type RaceModel } from './race-commands.js';
import { loadFastCheck, type FastCheck } from './fast-check.js';
import { createTestClock } from './test-clock.js';
import {
  RaceWorld,
  type RaceAgentKind,
  type RaceHarness,
  type RaceRuntimeFactory,
} from './race-world.js';

export type { RaceAgentKind, RaceHarness, RaceRuntimeFactory };
export { RaceInvariantError } from './race-world.js';

/** Options of {@link runRaceProperty}. Every field is optional. */
export interface RacePropertyOptions {
  /**
   * How many command sequences to run when `RACE_RUNS` is not set: `RACE_RUNS` from the
   * environment always wins, so a suite can be run longer (or shorter, under mutation) without
   * editing it. A positive integer, like `RACE_RUNS`. @default 200
   */
  readonly numRuns?: number;
  /** Seed of the run to replay. @default `RACE_SEED` from the environment, else random */
  readonly seed?: number;
  /** fast-check path of the counterexample to replay (needs `seed`). @default `RACE_PATH` */
  readonly path?: string;
  /** fast-check `replayPath` of the command list (with `seed` and `path`). @default `RACE_REPLAY_PATH` */
  readonly replayPath?: string;
  /** Most commands per sequence. @default 40 */
  readonly maxCommands?: number;
  /** Sessions the runs are spread over. @default ['s1', 's2'] */
  readonly sessions?: readonly string[];
  /** The owner of every run. @default 'owner' */
  readonly ownerId?: string;
  /**
   * Agents to mix: `honours-signal` rejects as soon as its signal aborts; `ignores-signal` goes
   * on until told (the runtime abandons it after `unwindTimeoutMs`).
   * @default ['honours-signal', 'ignores-signal']
   */
  readonly agents?: readonly RaceAgentKind[];
  /** Busy-session strategies runs are prepared with. @default all four */
  readonly strategies?: readonly SessionStrategy[];
  /** The `maxConcurrentRuns` the factory configured, checked as an invariant. @default none */
  readonly maxConcurrentRuns?: number;
  /**
   * Your own agent (or a factory of it, given the sequence's clock and a scripted model): the
   * property then starts runs of it, cancels them in every mode, interrupts them, moves the
   * clock and shuts down, and checks the agent contract (see {@link AgentContractOptions} and
   * README "Testing your agents") after every step, instead of driving its puppet agents.
   * @default none (the puppet agents)
   */
  readonly agent?: AgentUnderTest<never>;
  /** Each run's input for `agent`. @default the run id */
  readonly input?: (runId: string) => unknown;
  /** The agent contract's bounds, with `agent`. @default `settleWithinMs` 1000, no safe-point bound */
  readonly contract?: AgentContractOptions;
  /**
   * Also hands the failure report here; the report is always the thrown error's message, so
   * leave this unset to see it once. @default none
   */
  readonly log?: (report: string) => void;
}

/** What a passing {@link runRaceProperty} did. */
export interface RaceReport {
  /** Sequences run. */
  readonly numRuns: number;
  /** The seed used (pass it back as `RACE_SEED` to run the same sequences again). */
  readonly seed: number;
  /**
   * With `agent`: how much of your agent the sequences reached, summed. A zero (no nested run,
   * no safe point) means that part was never judged: raise `contract.stepMs`.
   */
  readonly reached?: AgentReach;
}

const envNumber = (name: string): number | undefined => {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value)) throw new RangeError(`expected ${name} to be a number, got ${raw}`);
  return value;
};

/**
 * How many sequences a race property runs: `RACE_RUNS` when it is set and not blank (it always
 * wins, so a run can be longer, or shorter under mutation, without edits), else `numRuns`, else
 * `fallback`. Tests that check a report's `numRuns`, or run properties of their own, read it
 * here too, so every suite agrees on what `RACE_RUNS` means.
 *
 * @param numRuns - the suite's own count, if it sets one
 * @param fallback - the count when neither is set (default 200)
 * @returns a positive safe integer
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for anything else (0, a fraction,
 *   a negative number, `NaN`, text): a property that runs no sequence checks nothing, and
 *   fast-check never ends on a fractional count
 */
export function resolveRaceRuns(numRuns?: number, fallback = 200): number {
  const raw = process.env.RACE_RUNS;
  const fromEnv = raw === undefined || raw.trim() === '' ? undefined : Number(raw);
  const value = fromEnv ?? numRuns ?? fallback;
  if (!(Number.isSafeInteger(value) && value > 0)) {
    const name = fromEnv === undefined ? 'numRuns' : 'RACE_RUNS';
    throw new InvalidArgumentError(
      name,
      `expected \`${name}\` to be a positive integer, got ${fromEnv === undefined ? String(value) : JSON.stringify(raw)}`,
    );
  }
  return value;
}

const envString = (name: string): string | undefined => {
  const raw = process.env[name];
  return raw === undefined || raw === '' ? undefined : raw;
};

/**
 * Runs random interleavings of prepare, start, cancel (each mode, directly and through
 * `runtime.runs`), interrupt, timeouts (clock advances), agent completion, failure, safe points
 * and late emits, `session.interrupt()`, `session.cancelAll()` and `shutdown()` against fresh
 * runtimes from `factory`, with fast-check's scheduler deciding when each agent settlement
 * lands; then shuts down and drains.
 *
 * @remarks
 * Invariants, checked after every step (and, for admissions and terminal states, at the very
 * event): a run's terminal state is reached once and never changes, with one terminal event;
 * admission is FIFO per session and a session never has two active runs (a cancelled run stays
 * active until its agent settled or was abandoned); `maxConcurrentRuns` holds; a cancel or
 * interrupt aimed at one run changes no other run at that moment, and at the end every run's
 * outcome is explained by something aimed at it (its cancel, its timeout, a preempt or
 * interrupt strategy of a later run in its session, `cancelAll`, shutdown, its own agent); a
 * cancel of an ended run contributes nothing and answers `ended`; no agent event reaches the
 * log after its run ended; every `termination` and the shutdown resolve; no error is reported
 * and no promise rejection goes unhandled; after shutdown no run is live, no timer is armed on
 * the clock and no actor is active. Obligations on the simulated clock: a safe-point cancel with
 * `timeoutMs` (or a `preempt` start's cancel of the active run) has ended the run by its
 * deadline (`[escalation-at-deadline]`); a safe point lands merged safe-point cancels exactly
 * when a merged bit matches it (`[safe-point-lands]`); an `interrupt` start cancels the active
 * run when its grace is over (`[interrupt-grace-cancels]`), unless every interrupting run was
 * cancelled first (`[interrupt-grace-called-off]`).
 *
 * A failure throws with the seed, the fast-check path, the shrunk command list and the
 * scheduler's interleaving. Set `RACE_SEED`, `RACE_PATH` and `RACE_REPLAY_PATH` (or the same
 * options) to replay exactly that case; `RACE_RUNS` runs more sequences.
 *
 * @param factory - builds the runtime under test from a {@link RaceHarness} (clock, error
 *   sink, inspection observer); called once per sequence
 * @param options - {@link RacePropertyOptions}
 * @returns what ran, once every sequence passed
 * @throws Error (as a rejection) when fast-check, an optional peer, is not installed
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`, as a rejection) when `RACE_RUNS` or
 *   `numRuns` is not a positive integer (see {@link resolveRaceRuns})
 * @throws Error (as a rejection) naming the violated invariant, the seed, the path and the
 *   commands, when a sequence fails
 * @example
 * ```ts
 * await runRaceProperty(({ clock, reportError, inspect }) =>
 *   createRuntime({ clock, reportError, inspect, unwindTimeoutMs: 100 }),
 * );
 * ```
 */
export async function runRaceProperty(
  factory: RaceRuntimeFactory,
  options: RacePropertyOptions = {},
): Promise<RaceReport> {
  const sessions = options.sessions ?? ['s1', 's2'];
  const ownerId = options.ownerId ?? 'owner';
  const fc = await loadFastCheck();
  const strategies = options.strategies ?? ['enqueue', 'reject', 'interrupt', 'preempt'];
  if (options.agent !== undefined) {
    const agentOptions = {
      ...options.contract,
      agent: options.agent as AgentUnderTest<unknown>,
      input: options.input ?? ((runId: string) => runId),
      ownerId,
      sessions,
    };
    const commands = agentCommands(fc, sessions.length, strategies, options.contract?.stepMs);
    const reached: AgentReach = { runs: 0, nestedRuns: 0, safePoints: 0, results: 0 };
    const report = await checkProperty(
      (run) =>
        commandsProperty(fc, commands, run, async (_scheduler, cmds) => {
          const world = new AgentWorld(factory, createTestClock(), agentOptions);
          await fc.asyncModelRun(
            () => ({ model: { runs: 0, shutdown: false }, real: world }),
            cmds,
          );
          await world.finish();
          for (const part of ['runs', 'nestedRuns', 'safePoints', 'results'] as const) {
            reached[part] += world.contract.reached[part];
          }
          await run.settleRejections(world.trace);
        }),
      { ...options, maxCommandsDefault: 25 },
    );
    return { ...report, reached };
  }
  const commands = raceCommands(fc, {
    sessions: sessions.length,
    agents: options.agents ?? ['honours-signal', 'ignores-signal'],
    strategies,
  });
  return checkProperty(
    (run) =>
      commandsProperty(fc, commands, run, async (scheduler, cmds) => {
        const world = new RaceWorld(factory, {
          ownerId,
          sessions,
          maxConcurrentRuns: options.maxConcurrentRuns,
          schedule: (settlement, label) => scheduler.schedule(settlement, label),
        });
        const model: RaceModel = { runs: 0, shutdown: false };
        await fc.scheduledModelRun(scheduler, () => ({ model, real: world }), cmds);
        await world.finish(() => scheduler.waitAll());
        await run.settleRejections(world.trace);
      }),
    { ...options, maxCommandsDefault: 40 },
  );
}

/**
 * The property both worlds run: a fast-check scheduler and a command sequence of at most
 * `run.maxCommands` (replaying `run.replayPath` when given), handed to `body`.
 */
function commandsProperty<TModel extends object, TReal>(
  fastCheck: FastCheck,
  commands: fc.Arbitrary<fc.AsyncCommand<TModel, TReal>>[],
  run: PropertyRun,
  body: (scheduler: fc.Scheduler, cmds: Iterable<fc.AsyncCommand<TModel, TReal>>) => Promise<void>,
): fc.IAsyncPropertyWithHooks<[fc.Scheduler, Iterable<fc.AsyncCommand<TModel, TReal>>]> {
  const { maxCommands, replayPath } = run;
  return fastCheck.asyncProperty(
    fastCheck.scheduler(),
    fastCheck.commands(commands, {
      maxCommands,
      size: 'max',
      ...(replayPath === undefined ? {} : { replayPath }),
    }),
    body,
  );
}

/** @internal What {@link checkProperty} hands the property it builds. */
export interface PropertyRun {
  readonly replayPath: string | undefined;
  readonly maxCommands: number;
  /**
   * Lets Node report the rejections this sequence left unhandled, then throws if there were any.
   *
   * @param trace - the sequence's steps, for the report
   */
  readonly settleRejections: (trace: readonly string[]) => Promise<void>;
}

/**
 * @internal Runs a race property built by `build` with the seed, path and run count from the
 * options or the environment, and turns a failure into a report with a replay line.
 */
export async function checkProperty(
  build: (run: PropertyRun) => fc.IAsyncPropertyWithHooks<[fc.Scheduler, ...unknown[]]>,
  options: Omit<RacePropertyOptions, 'sessions' | 'ownerId' | 'agents' | 'strategies'> & {
    maxCommandsDefault: number;
  },
): Promise<RaceReport> {
  const fc = await loadFastCheck();
  const numRuns = resolveRaceRuns(options.numRuns);
  const seed =
    options.seed ?? envNumber('RACE_SEED') ?? (Date.now() ^ (Math.random() * 0x100000000)) | 0;
  const path = options.path ?? envString('RACE_PATH');
  const replayPath = options.replayPath ?? envString('RACE_REPLAY_PATH');
  const maxCommands = options.maxCommands ?? options.maxCommandsDefault;

  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  const property = build({
    replayPath,
    maxCommands,
    settleRejections: async (trace) => {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (unhandled.length === 0) return;
      const reasons = unhandled.splice(0).map(String).join('; ');
      throw new Error(`unhandled rejection: ${reasons}\n  steps: ${trace.join(', ')}`);
    },
  }).beforeEach(() => {
    unhandled.length = 0;
  });

  try {
    const details = await fc.check(property, {
      numRuns,
      seed,
      ...(path === undefined ? {} : { path }),
      endOnFailure: path !== undefined,
    });
    if (details.failed) {
      const [scheduler, cmds, ...settings] = details.counterexample ?? [];
      const describe = (value: unknown) =>
        value === undefined ? '' : (value as { toString(): string }).toString();
      const commandsText = describe(cmds);
      // The agent world schedules nothing: its scheduler prints an empty "schedulerFor()``".
      const scheduled = describe(scheduler).trim();
      const interleaving = /^schedulerFor\(\)`?\s*`?$/.test(scheduled) ? '' : scheduled;
      const replay = /replayPath="([^"]*)"/.exec(commandsText)?.[1];
      const cause =
        details.errorInstance instanceof Error
          ? details.errorInstance.message
          : String(details.errorInstance);
      const report = [
        `race property failed: ${cause}`,
        `  seed ${details.seed}, path "${details.counterexamplePath ?? ''}"${replay === undefined ? '' : `, replayPath "${replay}"`}`,
        `  replay: RACE_SEED=${details.seed} RACE_PATH="${details.counterexamplePath ?? ''}"${replay === undefined ? '' : ` RACE_REPLAY_PATH="${replay}"`}`,
        `  commands (as generated): ${commandsText.replace(/\/\*replayPath=.*\*\//, '').trim()}`,
        ...(settings.length === 0 ? [] : [`  settings: ${JSON.stringify(settings)}`]),
        ...(interleaving === '' ? [] : [`  interleaving: ${interleaving}`]),
      ].join('\n');
      options.log?.(report);
      throw new Error(report, { cause: details.errorInstance });
    }
    return { numRuns: details.numRuns, seed: details.seed };
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
}
