/**
 * The commands of a race property (internal to `runplane/testing`): each one acts on the
 * runtime the way a user (or an agent, or time) would, checks what it must right away, and
 * leaves the global invariants to `RaceWorld.checkStep`.
 *
 * @module
 */
import type fc from 'fast-check';
import { CancelMode, type SafePointKind } from '../../machines/cancel-request.js';
import type { SessionStrategy } from '../../machines/session.machine.js';
import { RunplaneError } from '../errors.js';
import type { FastCheck } from './fast-check.js';
import { MergedCancels } from './race-merged-cancels.js';
import {
  isLiveRecord,
  isTerminalStatus,
  licenceAll,
  modeName,
  Step,
  target,
  type RaceCommand,
  type RaceModel,
  type Scope,
} from './race-step.js';
import type { RaceAgentKind, RaceWorld, RunRecord } from './race-world.js';

export type { RaceModel } from './race-step.js';

/** Options the command arbitraries are built from. */
export interface RaceCommandOptions {
  readonly sessions: number;
  readonly agents: readonly RaceAgentKind[];
  readonly strategies: readonly SessionStrategy[];
}

class Prepare extends Step {
  constructor(
    readonly session: number,
    readonly kind: RaceAgentKind,
    readonly timeoutMs: number | undefined,
    readonly strategy: SessionStrategy,
    readonly graceMs: number,
    /** Also start it right away (the common user path). */
    readonly andStart: boolean,
  ) {
    super();
  }
  override check(): boolean {
    return true;
  }
  protected act(model: RaceModel, world: RaceWorld): void {
    const sessionId = world.sessions[this.session % world.sessions.length] ?? 's1';
    const runId = world.nextRunId();
    this.label = `${runId} in ${sessionId}`;
    try {
      const run = world.runtime.prepare({
        ownerId: world.ownerId,
        sessionId,
        agent: world.agents[this.kind],
        input: runId,
        runId,
        strategy: this.strategy,
        graceMs: this.graceMs,
        ...(this.timeoutMs === undefined ? {} : { timeoutMs: this.timeoutMs }),
      });
      if (world.shutdownCalled) world.violation(`prepare(${runId}) succeeded after shutdown()`);
      const record: RunRecord = {
        run,
        sessionId,
        kind: this.kind,
        strategy: this.strategy,
        graceMs: this.graceMs,
        timeoutMs: this.timeoutMs,
        statuses: [],
        jumpsQueue: false,
        admitted: false,
        terminalEvents: 0,
        outcome: undefined,
        licences: new Set(),
        graceCalledOff: false,
      };
      world.register(record);
      model.runs++;
      if (this.andStart) startRun(world, record);
    } catch (error) {
      const code = error instanceof RunplaneError ? error.code : String(error);
      if (!(world.shutdownCalled && code === 'SHUTTING_DOWN')) {
        world.violation(`prepare(${runId}) threw ${code}`);
      }
    }
  }
  toString(): string {
    const options = [
      this.kind,
      this.strategy,
      this.timeoutMs === undefined ? '' : `timeout ${this.timeoutMs}ms`,
      this.strategy === 'interrupt' || this.strategy === 'preempt' ? `grace ${this.graceMs}ms` : '',
    ].filter(Boolean);
    const verb = this.andStart ? 'prepare+start' : 'prepare';
    return `${verb}(${this.label || `session ${this.session}`}, ${options.join(', ')})`;
  }
}

/** `run.start()`, with what its strategy will do to the session's other runs licensed first. */
function startRun(world: RaceWorld, record: RunRecord): void {
  const wasStarted = record.run.started;
  const statusBefore = record.run.status;
  // What the strategy will do to the session's other runs, licensed before it happens.
  const session = world.runtime.session(world.ownerId, record.sessionId);
  const activeId = session.activeRunId;
  const active = activeId === undefined ? undefined : world.records.get(activeId);
  const queued = session.queuedRunIds.flatMap((id) => world.records.get(id) ?? []);
  if (statusBefore === 'CREATED' && !wasStarted) {
    // Interrupt goes first in line whenever the session is busy: an active run, or runs
    // already waiting for a runtime slot (`maxConcurrentRuns`).
    record.jumpsQueue =
      record.strategy === 'interrupt' && (active !== undefined || queued.length > 0);
    // The active run's cancel after the grace is licensed by the obligations, once the grace
    // ran out with a run still waiting for it (it is called off when they were all cancelled).
    if (record.strategy === 'interrupt' && active !== undefined) licenceAll([active], 'interrupt');
    if (record.strategy === 'preempt')
      licenceAll([...queued, ...(active ? [active] : [])], 'preempt');
  }
  const preempts = statusBefore === 'CREATED' && !wasStarted && record.strategy === 'preempt';
  try {
    const now = world.clock.now();
    record.run.start();
    if (wasStarted) world.violation(`start(${record.run.id}) twice did not throw`);
    if (!wasStarted && active !== undefined && record.strategy === 'interrupt') {
      world.obligations.interruptStrategy(active, record, now + record.graceMs);
    }
    if (preempts && active !== undefined) {
      world.obligations.safePointCancel(
        active,
        CancelMode.AnySafePoint,
        now + record.graceMs,
        `the preempt of ${record.run.id}`,
      );
    }
    // An obligation, not a permission: README "The controls", `preempt` cancels the queued
    // runs, also while its session waits for a runtime slot (`maxConcurrentRuns`).
    for (const waiting of preempts ? queued : []) {
      if (waiting.run.status !== 'CANCELLED') {
        world.violation(
          `[preempt-cancels-queued] ${record.run.id} started with preempt in ${record.sessionId}, but ${waiting.run.id}, queued there, is ${waiting.run.status}`,
        );
      }
    }
  } catch (error) {
    const code = error instanceof RunplaneError ? error.code : String(error);
    const expected =
      (wasStarted && code === 'RUN_ALREADY_STARTED') ||
      (!wasStarted && record.strategy === 'reject' && code === 'SESSION_BUSY');
    if (!expected) world.violation(`start(${record.run.id}) threw ${code}`);
    if (code === 'SESSION_BUSY') record.licences.add('cancel');
    if (code === 'SESSION_BUSY' && record.run.status !== 'CANCELLED') {
      world.violation(`a run rejected with SESSION_BUSY is ${record.run.status}, not CANCELLED`);
    }
  }
}

class Start extends Step {
  constructor(
    readonly index: number,
    readonly scope: Scope,
  ) {
    super();
  }
  protected act(_model: RaceModel, world: RaceWorld): void {
    const record = target(world, this.index, this.scope, (r) => !r.run.started);
    if (record === undefined) return;
    this.label = record.run.id;
    startRun(world, record);
  }
  toString(): string {
    return `start(${this.label || `#${this.index}`})`;
  }
}

class Cancel extends Step {
  constructor(
    readonly index: number,
    readonly mode: number,
    readonly timeoutMs: number | undefined,
    readonly via: 'run' | 'registry',
    readonly scope: Scope,
  ) {
    super();
  }
  protected act(_model: RaceModel, world: RaceWorld): void {
    const record = target(world, this.index, this.scope, isLiveRecord);
    if (record === undefined) return;
    this.label = record.run.id;
    const { run } = record;
    const terminalBefore = isTerminalStatus(run.status);
    record.licences.add('cancel');
    world.obligations.safePointCancel(
      record,
      this.mode,
      this.timeoutMs === undefined ? undefined : world.clock.now() + this.timeoutMs,
      `cancel(${modeName(this.mode)}${this.timeoutMs === undefined ? '' : `, ${this.timeoutMs}ms`})`,
    );
    const before = world.fingerprint();
    const options = {
      mode: this.mode,
      reason: 'race',
      ...(this.timeoutMs === undefined ? {} : { timeoutMs: this.timeoutMs }),
    };
    if (this.via === 'registry') {
      // A cancel for this run under another session is not_found and touches nothing.
      const other = world.sessions.find((id) => id !== record.sessionId) ?? 'no-such-session';
      const wrong = world.runtime.runs.cancel(world.ownerId, other, run.id, options);
      if (wrong !== 'not_found') {
        world.violation(
          `[wrong-session-not-found] runs.cancel(${run.id}) under session ${other} answered ${wrong}`,
        );
      }
      world.expectOnlyChanged(`runs.cancel(${run.id}) under session ${other}`, before, new Set());
      const answer = world.runtime.runs.cancel(world.ownerId, record.sessionId, run.id, options);
      const expected = terminalBefore ? 'ended' : 'accepted';
      if (answer !== expected)
        world.violation(`runs.cancel(${run.id}) answered ${answer}, not ${expected}`);
      if (world.runtime.runs.cancel('someone-else', record.sessionId, run.id) !== 'not_found') {
        world.violation(`runs.cancel(${run.id}) for another owner did not answer not_found`);
      }
    } else {
      const result = run.cancel(options);
      if (terminalBefore) {
        if (result.contributed) world.violation(`cancel(${run.id}) after it ended contributed`);
        void result.outcome.then((outcome) => {
          if (outcome !== 'ended') world.violation(`cancel(${run.id}) after it ended: ${outcome}`);
        });
      }
    }
    world.expectOnlyChanged(this.toString(), before, new Set([run.id]));
    if (terminalBefore && world.fingerprint().get(run.id) !== before.get(run.id)) {
      world.violation(`cancel(${run.id}) after it ended changed it`);
    }
  }
  toString(): string {
    const timeout = this.timeoutMs === undefined ? '' : `, escalate after ${this.timeoutMs}ms`;
    return `cancel(${this.label || `#${this.index}`}, ${modeName(this.mode)}${timeout}${this.via === 'registry' ? ', via runs.cancel' : ''})`;
  }
}

class Interrupt extends Step {
  constructor(
    readonly index: number,
    readonly via: 'run' | 'registry',
    readonly scope: Scope,
  ) {
    super();
  }
  protected act(_model: RaceModel, world: RaceWorld): void {
    const record = target(world, this.index, this.scope, isLiveRecord);
    if (record === undefined) return;
    this.label = record.run.id;
    const { run } = record;
    const terminalBefore = isTerminalStatus(run.status);
    // Before RUNNING an interrupt is a cancel (docs/architecture.md, "A run's life").
    record.licences.add(run.status === 'RUNNING' ? 'interrupt' : 'cancel');
    const before = world.fingerprint();
    if (this.via === 'registry') {
      const answer = world.runtime.runs.interrupt(world.ownerId, record.sessionId, run.id, 'race');
      const expected = terminalBefore ? 'ended' : 'accepted';
      if (answer !== expected)
        world.violation(`runs.interrupt(${run.id}) answered ${answer}, not ${expected}`);
    } else if (run.interrupt('race') && terminalBefore) {
      world.violation(`interrupt(${run.id}) after it ended contributed`);
    }
    world.expectOnlyChanged(this.toString(), before, new Set([run.id]));
  }
  toString(): string {
    return `interrupt(${this.label || `#${this.index}`}${this.via === 'registry' ? ', via runs.interrupt' : ''})`;
  }
}

class Advance implements RaceCommand {
  constructor(readonly ms: number) {}
  check(): boolean {
    return true;
  }
  async run(_model: RaceModel, world: RaceWorld): Promise<void> {
    world.trace.push(this.toString());
    await world.clock.advance(this.ms);
    world.checkStep(this.toString());
  }
  toString(): string {
    return `advance(${this.ms}ms)`;
  }
}

class AgentStep extends Step {
  constructor(
    readonly index: number,
    readonly action: 'complete' | 'fail' | 'emit' | SafePointKind,
    readonly scope: Scope,
  ) {
    super();
  }
  protected act(_model: RaceModel, world: RaceWorld): void {
    const record = target(world, this.index, this.scope, (r) =>
      world.agents[r.kind].isExecuting(r.run.id),
    );
    if (record === undefined) return;
    this.label = record.run.id;
    const agent = world.agents[record.kind];
    const runId = record.run.id;
    switch (this.action) {
      case 'complete':
        record.licences.add('complete');
        agent.complete(runId, `output of ${runId}`);
        break;
      case 'fail':
        record.licences.add('fail');
        agent.fail(runId, new Error(`${runId} failed`));
        break;
      case 'emit':
        agent.emit(runId, 'agent.message', { text: `from ${runId}` });
        break;
      default: {
        const statusBefore = record.run.status;
        const answer = agent.safePoint(runId, this.action);
        const broken = world.obligations.checkSafePoint(record, this.action, statusBefore, answer);
        if (broken !== undefined) world.violation(broken);
      }
    }
  }
  toString(): string {
    const name =
      this.action === 'afterChatModel' || this.action === 'afterToolCalls'
        ? `safePoint ${this.action}`
        : this.action;
    return `agent ${name}(${this.label || `#${this.index}`})`;
  }
}

class SessionInterrupt extends Step {
  constructor(readonly session: number) {
    super();
  }
  protected act(_model: RaceModel, world: RaceWorld): void {
    const sessionId = world.sessions[this.session % world.sessions.length] ?? 's1';
    this.label = sessionId;
    const session = world.runtime.session(world.ownerId, sessionId);
    const activeId = session.activeRunId;
    const active = activeId === undefined ? undefined : world.records.get(activeId);
    if (active !== undefined) active.licences.add('interrupt');
    const before = world.fingerprint();
    const answer = session.interrupt('race');
    const expected = active?.run.status === 'RUNNING' ? 'accepted' : 'idle';
    if (answer !== expected)
      world.violation(`session(${sessionId}).interrupt() answered ${answer}, not ${expected}`);
    world.expectOnlyChanged(
      this.toString(),
      before,
      new Set(activeId === undefined ? [] : [activeId]),
    );
  }
  toString(): string {
    return `session.interrupt(${this.label || `#${this.session}`})`;
  }
}

class CancelAll extends Step {
  constructor(
    readonly session: number,
    readonly includeActive: boolean,
  ) {
    super();
  }
  protected act(_model: RaceModel, world: RaceWorld): void {
    const sessionId = world.sessions[this.session % world.sessions.length] ?? 's1';
    this.label = sessionId;
    const session = world.runtime.session(world.ownerId, sessionId);
    const targets = new Set(session.queuedRunIds);
    if (this.includeActive && session.activeRunId !== undefined) targets.add(session.activeRunId);
    licenceAll(
      [...targets].flatMap((id) => world.records.get(id) ?? []),
      'cancel',
    );
    const before = world.fingerprint();
    session.cancelAll({ includeActive: this.includeActive });
    world.expectOnlyChanged(this.toString(), before, targets);
  }
  toString(): string {
    return `session.cancelAll(${this.label || `#${this.session}`}${this.includeActive ? ', includeActive' : ''})`;
  }
}

class Shutdown implements RaceCommand {
  constructor(readonly graceMs: number) {}
  check(model: Readonly<RaceModel>): boolean {
    return !model.shutdown;
  }
  async run(model: RaceModel, world: RaceWorld): Promise<void> {
    model.shutdown = true;
    world.trace.push(this.toString());
    void world.shutdown(this.graceMs);
    await world.clock.flush();
    world.checkStep(this.toString());
  }
  toString(): string {
    return `shutdown(grace ${this.graceMs}ms)`;
  }
}

/** The command arbitraries, weighted by repetition. */
export function raceCommands(
  fc: FastCheck,
  options: RaceCommandOptions,
): fc.Arbitrary<RaceCommand>[] {
  const session = fc.nat({ max: Math.max(0, options.sessions - 1) });
  const run = fc.nat({ max: 63 });
  const via = fc.constantFrom<'run' | 'registry'>('run', 'registry');
  const scope = fc.constantFrom<Scope>('relevant', 'relevant', 'relevant', 'any');
  const prepare = fc
    .record({
      session,
      kind: fc.constantFrom(...options.agents),
      timeoutMs: fc.constantFrom<number | undefined>(undefined, undefined, 60, 250),
      strategy: fc.constantFrom(...options.strategies),
      graceMs: fc.constantFrom(0, 40),
      andStart: fc.constantFrom(true, true, true, false),
    })
    .map((p) => new Prepare(p.session, p.kind, p.timeoutMs, p.strategy, p.graceMs, p.andStart));
  const start = fc.record({ run, scope }).map((c) => new Start(c.run, c.scope));
  const cancel = fc
    .record({
      run,
      mode: fc.constantFrom(
        CancelMode.Immediate,
        CancelMode.AfterChatModel,
        CancelMode.AfterToolCalls,
        CancelMode.AnySafePoint,
      ),
      timeoutMs: fc.constantFrom<number | undefined>(undefined, 0, 30),
      via,
      scope,
    })
    .map((c) => new Cancel(c.run, c.mode, c.timeoutMs, c.via, c.scope));
  const safePointRequest = fc.record({
    mode: fc.constantFrom(
      CancelMode.AfterChatModel,
      CancelMode.AfterToolCalls,
      CancelMode.AnySafePoint,
    ),
    timeoutMs: fc.constantFrom<number | undefined>(undefined, 0, 30),
  });
  const mergedCancels = fc
    .record({
      run,
      first: safePointRequest,
      second: safePointRequest,
      point: fc.constantFrom<SafePointKind>('afterChatModel', 'afterToolCalls'),
    })
    .map((c) => new MergedCancels(c.run, c.first, c.second, c.point));
  const agent = (action: AgentStep['action']) =>
    fc.record({ run, scope }).map((c) => new AgentStep(c.run, action, c.scope));
  return [
    prepare,
    prepare,
    prepare,
    prepare,
    start,
    cancel,
    cancel,
    cancel,
    mergedCancels,
    fc.record({ run, via, scope }).map((i) => new Interrupt(i.run, i.via, i.scope)),
    fc.integer({ min: 1, max: 120 }).map((ms) => new Advance(ms)),
    fc.integer({ min: 1, max: 120 }).map((ms) => new Advance(ms)),
    agent('complete'),
    agent('complete'),
    agent('complete'),
    agent('fail'),
    agent('emit'),
    agent('afterChatModel'),
    agent('afterToolCalls'),
    session.map((s) => new SessionInterrupt(s)),
    fc
      .record({ session, includeActive: fc.boolean() })
      .map((c) => new CancelAll(c.session, c.includeActive)),
    fc.constantFrom(0, 50).map((graceMs) => new Shutdown(graceMs)),
  ];
}
