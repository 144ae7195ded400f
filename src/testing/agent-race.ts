/**
 * The race property for the user's own agent: random starts, cancels of each mode, interrupts,
 * session strategies, time and shutdown around an agent you wrote, with the agent contract
 * ({@link AgentContract}) checked after every step.
 *
 * @module
 */
import type fc from 'fast-check';
import { CancelMode } from '../../machines/cancel-request.js';
import type { SessionStrategy } from '../../machines/session.machine.js';
import {
  createScriptedModel,
  type ScriptedModel,
  type ScriptEntry,
} from '../agent/scripted-model.js';
import type { Agent } from '../run/agent.js';
import type { AgentRun } from '../run/agent-run.js';
import type { Runtime } from '../runtime/create-runtime.js';
import { AgentContract, type AgentContractOptions } from './agent-contract.js';
import type { FastCheck } from './fast-check.js';
import { RaceInvariantError, type RaceRuntimeFactory } from './race-world.js';
import type { TestClock } from './test-clock.js';

/** What an agent factory gets, once per generated sequence. */
export interface AgentKit {
  /** The simulated clock the runtime runs on (the same one as `ctx.clock`). */
  readonly clock: TestClock;
  /**
   * A scripted model on that clock: request N gets script entry N (see `createScriptedModel`).
   *
   * @param script - one entry per expected request (a function entry answers from the request)
   */
  readonly model: (script: readonly ScriptEntry[]) => ScriptedModel;
}

/** Your agent, or a factory of it (called once per sequence with the sequence's kit). */
export type AgentUnderTest<TInput = string> =
  Agent<TInput, unknown> | ((kit: AgentKit) => Agent<TInput, unknown>);

/** @internal Options of the agent world. */
export interface AgentWorldOptions extends AgentContractOptions {
  readonly agent: AgentUnderTest<unknown>;
  readonly input: (runId: string) => unknown;
  readonly ownerId: string;
  readonly sessions: readonly string[];
}

interface AgentModel {
  runs: number;
  shutdown: boolean;
}

/** @internal One sequence's runtime, agent and contract. */
export class AgentWorld {
  readonly runtime: Runtime;
  readonly contract: AgentContract;
  readonly agent: Agent<unknown, unknown>;
  readonly runs: AgentRun<unknown>[] = [];
  /** Runs whose termination resolved. */
  readonly ended = new Set<string>();
  readonly trace: string[] = [];
  readonly reported: unknown[] = [];
  shutdownResult: { drained: boolean } | undefined;

  constructor(
    factory: RaceRuntimeFactory,
    readonly clock: TestClock,
    readonly options: AgentWorldOptions,
  ) {
    this.contract = new AgentContract(clock, options);
    this.runtime = factory({
      clock,
      reportError: (error) => this.reported.push(error),
      inspect: () => undefined,
    });
    const { agent } = options;
    const yours =
      typeof agent === 'function'
        ? agent({ clock, model: (script) => createScriptedModel(script, { clock }) })
        : agent;
    this.agent = this.contract.watch(yours);
  }

  /** Fails with every broken invariant, each naming its run, and the steps so far. */
  check(step: string): void {
    this.contract.checkBounds();
    if (this.reported.length > 0) {
      this.contract.violations.push(
        `[no-runtime-error] the runtime reported: ${this.reported.map(String).join('; ')}`,
      );
    }
    const { violations } = this.contract;
    if (violations.length === 0) return;
    const message = `after ${step}: ${violations.join('\n  ')}\n  steps: ${this.trace.join(', ')}`;
    violations.length = 0;
    throw new RaceInvariantError(message);
  }

  /** Shuts down and drives the clock until every run has ended (at most 200 timers). */
  async finish(): Promise<void> {
    if (this.shutdownResult === undefined) this.shutdown(50);
    for (let round = 0; round < 200; round++) {
      await this.clock.flush();
      this.check('the end');
      const ended = this.runs.every((run) => this.ended.has(run.id));
      if (ended && this.shutdownResult !== undefined) break;
      const next = this.clock.nextTimerAt;
      if (next === undefined) break;
      await this.clock.advance(Math.max(0, next - this.clock.now()));
    }
    if (this.shutdownResult === undefined) {
      this.contract.violations.push('[shutdown-resolves] shutdown() never resolved');
    }
    for (const run of this.runs) {
      if (!this.ended.has(run.id)) {
        this.contract.violations.push(
          `[termination-resolves] run ${run.id}: termination never resolved (${run.status})`,
        );
      }
    }
    this.contract.checkOutcomes();
    this.check('the end');
  }

  shutdown(graceMs: number): void {
    void this.runtime.shutdown({ graceMs }).then(
      (result) => (this.shutdownResult = result),
      (error: unknown) => this.reported.push(error),
    );
  }
}

type AgentCommand = fc.AsyncCommand<AgentModel, AgentWorld>;

abstract class AgentStep implements AgentCommand {
  protected label = '';
  check(model: Readonly<AgentModel>): boolean {
    return !model.shutdown && model.runs > 0;
  }
  async run(model: AgentModel, world: AgentWorld): Promise<void> {
    this.label = '';
    this.act(model, world);
    const step = this.toString();
    world.trace.push(step);
    await world.clock.flush();
    world.check(step);
  }
  protected abstract act(model: AgentModel, world: AgentWorld): void;
  abstract toString(): string;
}

class StartRun extends AgentStep {
  constructor(
    readonly session: number,
    readonly strategy: SessionStrategy,
  ) {
    super();
  }
  override check(model: Readonly<AgentModel>): boolean {
    return !model.shutdown;
  }
  protected act(model: AgentModel, world: AgentWorld): void {
    const { sessions, ownerId } = world.options;
    const sessionId = sessions[this.session % sessions.length] ?? 's1';
    const runId = `r${world.runs.length + 1}`;
    this.label = `${runId} in ${sessionId}`;
    const run = world.runtime.prepare({
      ownerId,
      sessionId,
      agent: world.agent,
      input: world.options.input(runId),
      runId,
      strategy: this.strategy,
      graceMs: 40,
    });
    world.contract.attach(run);
    world.runs.push(run);
    void run.termination.then(() => world.ended.add(run.id));
    model.runs++;
    try {
      run.start();
    } catch {
      // SESSION_BUSY (the reject strategy) is the runtime's answer, not the agent's.
    }
  }
  toString(): string {
    return `start(${this.label || `session ${this.session}`}, ${this.strategy})`;
  }
}

const modeNames = ['immediate', 'afterChatModel', 'afterToolCalls', 'anySafePoint'];

class CancelRun extends AgentStep {
  constructor(
    readonly index: number,
    readonly mode: number,
    readonly timeoutMs: number,
  ) {
    super();
  }
  protected act(_model: AgentModel, world: AgentWorld): void {
    const run = world.runs[this.index % world.runs.length];
    if (run === undefined) return;
    this.label = run.id;
    run.cancel({ mode: this.mode, timeoutMs: this.timeoutMs, reason: 'race' });
  }
  toString(): string {
    const mode = modeNames[this.mode] ?? String(this.mode);
    const escalate =
      this.mode === CancelMode.Immediate ? '' : `, escalate after ${this.timeoutMs}ms`;
    return `cancel(${this.label || `#${this.index}`}, ${mode}${escalate})`;
  }
}

class InterruptRun extends AgentStep {
  constructor(readonly index: number) {
    super();
  }
  protected act(_model: AgentModel, world: AgentWorld): void {
    const run = world.runs[this.index % world.runs.length];
    if (run === undefined) return;
    this.label = run.id;
    run.interrupt('race');
  }
  toString(): string {
    return `interrupt(${this.label || `#${this.index}`})`;
  }
}

class AdvanceClock implements AgentCommand {
  constructor(readonly ms: number) {}
  check(model: Readonly<AgentModel>): boolean {
    return model.runs > 0;
  }
  async run(_model: AgentModel, world: AgentWorld): Promise<void> {
    world.trace.push(this.toString());
    // In steps of at most 10ms, so a bound is reported close to when it broke.
    for (let left = this.ms; left > 0; left -= 10) {
      await world.clock.advance(Math.min(10, left));
      world.check(this.toString());
    }
  }
  toString(): string {
    return `advance(${this.ms}ms)`;
  }
}

class ShutdownAll implements AgentCommand {
  constructor(readonly graceMs: number) {}
  check(model: Readonly<AgentModel>): boolean {
    return !model.shutdown && model.runs > 0;
  }
  async run(model: AgentModel, world: AgentWorld): Promise<void> {
    model.shutdown = true;
    world.trace.push(this.toString());
    world.shutdown(this.graceMs);
    await world.clock.flush();
    world.check(this.toString());
  }
  toString(): string {
    return `shutdown(grace ${this.graceMs}ms)`;
  }
}

/** @internal The commands of the agent property, weighted by repetition. */
export function agentCommands(
  fc: FastCheck,
  sessions: number,
  strategies: readonly SessionStrategy[],
  stepMs = 150,
): fc.Arbitrary<AgentCommand>[] {
  const run = fc.nat({ max: 15 });
  const start = fc
    .record({
      session: fc.nat({ max: Math.max(0, sessions - 1) }),
      strategy: fc.constantFrom(...strategies),
    })
    .map((s) => new StartRun(s.session, s.strategy));
  const cancel = fc
    .record({
      run,
      mode: fc.constantFrom(
        CancelMode.Immediate,
        CancelMode.AfterChatModel,
        CancelMode.AfterToolCalls,
        CancelMode.AnySafePoint,
      ),
      timeoutMs: fc.constantFrom(Math.max(1, Math.round(stepMs / 5)), Math.round((stepMs * 4) / 3)),
    })
    .map((c) => new CancelRun(c.run, c.mode, c.timeoutMs));
  const advance = fc
    .integer({ min: 1, max: Math.max(1, stepMs) })
    .map((ms) => new AdvanceClock(ms));
  return [
    start,
    start,
    cancel,
    cancel,
    run.map((index) => new InterruptRun(index)),
    advance,
    advance,
    advance,
    fc.constantFrom(0, 50).map((graceMs) => new ShutdownAll(graceMs)),
  ];
}
