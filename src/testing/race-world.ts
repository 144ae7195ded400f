/**
 * The system under a race property: a runtime built by the user's factory on a test clock,
 * scripted agents whose settlements go through fast-check's scheduler, and the monitors that
 * check runplane's invariants while the commands run (internal to `runplane/testing`).
 *
 * @module
 */
import type { AnyActorRef, InspectionEvent } from 'xstate';
import type { RunStatus } from '../../machines/run.machine.js';
import { isTerminalStatus } from './race-step.js';
import type { SessionStrategy } from '../../machines/session.machine.js';
import type { RunplaneEvent } from '../events/event-log.js';
import type { AgentRun } from '../run/agent-run.js';
import type { RunOutcome } from '../run/run-outcome.js';
import type { Runtime } from '../runtime/create-runtime.js';
import { RaceObligations } from './race-obligations.js';
import { createScriptedAgent, type ScriptedAgent } from './scripted-agent.js';
import { createTestClock, type TestClock } from './test-clock.js';

/** How an agent in a race property treats its AbortSignal. */
export type RaceAgentKind = 'honours-signal' | 'ignores-signal';

/** What a {@link RaceRuntimeFactory} gets: wire all three into `createRuntime`. */
export interface RaceHarness {
  /** The clock the property drives; pass it as `createRuntime({ clock })`. */
  readonly clock: TestClock;
  /** Collects errors the runtime reports; any report fails the property. */
  readonly reportError: (error: unknown) => void;
  /** Tracks every actor, so the property can check none is left alive after shutdown. */
  readonly inspect: (event: InspectionEvent) => void;
}

/**
 * Builds the runtime under test, once per generated sequence.
 *
 * @param harness - the clock, error sink and inspection observer to wire in
 * @returns a fresh runtime
 */
export type RaceRuntimeFactory = (harness: RaceHarness) => Runtime;

/** Why a run may legitimately have ended the way it did (see `checkLicences`). */
export type Licence =
  'cancel' | 'timeout' | 'preempt' | 'shutdown' | 'interrupt' | 'complete' | 'fail';

/** What the monitor knows of one run. */
export interface RunRecord {
  readonly run: AgentRun<unknown>;
  readonly sessionId: string;
  readonly kind: RaceAgentKind;
  readonly strategy: SessionStrategy;
  /** The `graceMs` it was prepared with (its `interrupt` or `preempt` strategy's grace). */
  readonly graceMs: number;
  readonly timeoutMs: number | undefined;
  /** Statuses in the order the event log reported them. */
  readonly statuses: RunStatus[];
  /**
   * Started with the `interrupt` strategy while its session was busy (an active run, or runs waiting for a runtime slot): it goes first in
   * line instead of last (README "The controls": interrupt the active run, then run the new one).
   */
  jumpsQueue: boolean;
  admitted: boolean;
  terminalEvents: number;
  outcome: RunOutcome | undefined;
  readonly licences: Set<Licence>;
  /** An `interrupt` strategy's grace on this run was called off (see `RaceObligations`). */
  graceCalledOff: boolean;
}

/**
 * A violated invariant of a race property, with the facts that show it.
 *
 * @remarks Its message names the step after which the invariant failed, what was wrong, and
 * the steps of the sequence so far; the property's report adds the seed and path to replay it.
 */
export class RaceInvariantError extends Error {
  override readonly name = 'RaceInvariantError';
}

const isTerminal = (status: RunStatus): boolean => isTerminalStatus(status);

/** @internal The world one command sequence runs against. */
export class RaceWorld {
  readonly clock = createTestClock();
  readonly runtime: Runtime;
  readonly ownerId: string;
  readonly sessions: readonly string[];
  readonly agents: Record<RaceAgentKind, ScriptedAgent<unknown>>;
  readonly records = new Map<string, RunRecord>();
  readonly violations: string[] = [];
  /** What must happen by a deadline: escalations, safe points, interrupt graces. */
  readonly obligations = new RaceObligations();
  /** The steps this sequence executed, with the runs they picked. */
  readonly trace: string[] = [];
  readonly reported: unknown[] = [];
  readonly actors: AnyActorRef[] = [];
  readonly maxConcurrentRuns: number | undefined;
  shutdownCalled = false;
  shutdownResult: { drained: boolean } | undefined;
  /** Each session's line of waiting runs, as the rules say it must be. */
  readonly #lines = new Map<string, string[]>();
  #nextRun = 1;

  constructor(
    factory: RaceRuntimeFactory,
    options: {
      ownerId: string;
      sessions: readonly string[];
      maxConcurrentRuns: number | undefined;
      schedule: <T>(settlement: Promise<T>, label: string) => Promise<T>;
    },
  ) {
    this.ownerId = options.ownerId;
    this.sessions = options.sessions;
    this.maxConcurrentRuns = options.maxConcurrentRuns;
    this.agents = {
      'honours-signal': createScriptedAgent({ schedule: options.schedule }),
      'ignores-signal': createScriptedAgent({ onAbort: 'ignore', schedule: options.schedule }),
    };
    this.runtime = factory({
      clock: this.clock,
      reportError: (error) => this.reported.push(error),
      inspect: (event) => {
        if (event.type === '@xstate.actor') this.actors.push(event.actorRef as AnyActorRef);
      },
    });
    this.runtime.onEvent((event) => this.#observe(event));
  }

  /** The next deterministic run id (`r1`, `r2`, ...): a replay must name runs the same way. */
  nextRunId(): string {
    return `r${this.#nextRun++}`;
  }

  register(record: RunRecord): void {
    this.records.set(record.run.id, record);
    if (record.timeoutMs !== undefined) record.licences.add('timeout');
    void record.run.termination.then((outcome) => (record.outcome = outcome));
  }

  violation(message: string): void {
    this.violations.push(message);
  }

  recordsIn(sessionId: string): RunRecord[] {
    return [...this.records.values()].filter((r) => r.sessionId === sessionId);
  }

  isLive(record: RunRecord): boolean {
    return this.runtime.runs.find(this.ownerId, record.sessionId, record.run.id) !== undefined;
  }

  /** Every run's observable state, for "a command aimed at X changes no other run". */
  fingerprint(): Map<string, string> {
    const prints = new Map<string, string>();
    for (const [runId, record] of this.records) {
      const ctx = this.agents[record.kind].context(runId);
      prints.set(
        runId,
        JSON.stringify([
          record.run.status,
          ctx?.interruptRequested ?? false,
          ctx?.signal.aborted ?? false,
          this.isLive(record),
        ]),
      );
    }
    return prints;
  }

  /** Fails when a run outside `targets` changed between two fingerprints. */
  expectOnlyChanged(what: string, before: Map<string, string>, targets: ReadonlySet<string>): void {
    const after = this.fingerprint();
    for (const [runId, print] of before) {
      if (targets.has(runId)) continue;
      if (after.get(runId) !== print) {
        this.violation(
          `${what} changed run ${runId}, which it does not target: ${print} → ${after.get(runId)}`,
        );
      }
    }
  }

  #observe(event: RunplaneEvent): void {
    const record = event.runId === undefined ? undefined : this.records.get(event.runId);
    if (record === undefined) return;
    const last = record.statuses.at(-1) ?? 'CREATED';
    switch (event.type) {
      case 'session.run_queued': {
        const line = this.lineOf(record.sessionId);
        if (record.jumpsQueue) line.unshift(record.run.id);
        else line.push(record.run.id);
        break;
      }
      case 'run.status': {
        const { from, to } = event.payload as { from: RunStatus; to: RunStatus };
        if (from !== last) {
          this.violation(`run ${record.run.id}: status event from ${from}, but it was ${last}`);
        }
        if (isTerminal(last)) {
          this.violation(`run ${record.run.id} left terminal ${last} for ${to}`);
        }
        record.statuses.push(to);
        if (to === 'RUNNING') this.#onAdmitted(record);
        if (from === 'QUEUED' && to !== 'RUNNING') this.#leaveLine(record);
        break;
      }
      case 'run.completed':
      case 'run.failed':
      case 'run.cancelled':
        record.terminalEvents++;
        if (record.terminalEvents > 1) {
          this.violation(`run ${record.run.id} logged ${record.terminalEvents} terminal events`);
        }
        break;
      default:
        if (event.type.startsWith('agent.') && isTerminal(last)) {
          this.violation(
            `run ${record.run.id} is ${last}, yet its agent's ${event.type} reached the log`,
          );
        }
    }
  }

  /** The session's expected line of waiting runs. */
  lineOf(sessionId: string): string[] {
    let line = this.#lines.get(sessionId);
    if (line === undefined) this.#lines.set(sessionId, (line = []));
    return line;
  }

  #leaveLine(record: RunRecord): void {
    const line = this.lineOf(record.sessionId);
    const index = line.indexOf(record.run.id);
    if (index >= 0) line.splice(index, 1);
  }

  /** FIFO admission, one active run per session, and the runtime-wide cap. */
  #onAdmitted(record: RunRecord): void {
    record.admitted = true;
    const line = this.lineOf(record.sessionId);
    if (line[0] !== record.run.id) {
      this.violation(
        `FIFO: ${record.run.id} was admitted in ${record.sessionId}, but the line was [${line.join(', ')}]`,
      );
    }
    this.#leaveLine(record);
    for (const other of this.recordsIn(record.sessionId)) {
      if (other === record) continue;
      if (other.admitted && this.isLive(other)) {
        this.violation(
          `two active runs in ${record.sessionId}: ${record.run.id} admitted while ${other.run.id} (${other.run.status}) has not settled`,
        );
      }
    }
    if (this.maxConcurrentRuns !== undefined) {
      const active = [...this.records.values()].filter((r) => r.admitted && this.isLive(r));
      if (active.length > this.maxConcurrentRuns) {
        this.violation(
          `${active.length} runs active at once, above maxConcurrentRuns ${this.maxConcurrentRuns}: ${active.map((r) => r.run.id).join(', ')}`,
        );
      }
    }
  }

  /** Invariants that hold after every step. */
  checkStep(step: string): void {
    for (const record of this.records.values()) {
      const seen = record.statuses.at(-1) ?? 'CREATED';
      if (record.run.status !== seen) {
        this.violation(
          `run ${record.run.id}.status is ${record.run.status}, its events say ${seen}`,
        );
      }
      const live = this.isLive(record);
      if (!live && record.outcome === undefined) {
        this.violation(
          `run ${record.run.id} left the registry, but its termination has not resolved`,
        );
      }
      if (live && (record.run.status === 'COMPLETED' || record.run.status === 'FAILED')) {
        this.violation(
          `run ${record.run.id} is ${record.run.status} but still live (only a cancelled run unwinds)`,
        );
      }
      if (record.outcome !== undefined) {
        if (record.outcome.status !== record.run.status) {
          this.violation(
            `run ${record.run.id} resolved termination ${record.outcome.status} but is ${record.run.status}`,
          );
        }
        if (this.isLive(record)) {
          this.violation(`run ${record.run.id} resolved termination while still live`);
        }
      }
    }
    for (const sessionId of this.sessions) {
      const session = this.runtime.session(this.ownerId, sessionId);
      const running = this.recordsIn(sessionId).filter((r) => r.run.status === 'RUNNING');
      if (running.length > 1) {
        this.violation(
          `${sessionId} has ${running.length} RUNNING runs: ${running.map((r) => r.run.id).join(', ')}`,
        );
      }
      const queued = session.queuedRunIds.map((id) => this.records.get(id));
      for (const [index, record] of queued.entries()) {
        if (record?.run.status !== 'QUEUED') {
          this.violation(
            `${sessionId} lists ${session.queuedRunIds[index]} as queued, but it is ${record?.run.status}`,
          );
        }
      }
      const line = this.lineOf(sessionId);
      if (session.queuedRunIds.join() !== line.join()) {
        this.violation(
          `${sessionId} queue is [${session.queuedRunIds.join(', ')}], start order and strategies say [${line.join(', ')}]`,
        );
      }
      const activeId = session.activeRunId;
      if (activeId !== undefined) {
        const active = this.records.get(activeId);
        if (active === undefined || !this.isLive(active) || !active.admitted) {
          this.violation(
            `${sessionId} says ${activeId} is active, but it is not a live admitted run`,
          );
        }
      }
    }
    this.#checkProgress();
    for (const broken of this.obligations.check(this.clock.now())) this.violation(broken);
    if (this.reported.length > 0) {
      this.violation(`the runtime reported errors: ${this.reported.map(String).join('; ')}`);
    }
    this.throwIfViolated(step);
  }

  /** Liveness: a session with waiting runs and a free slot is never left idle. */
  #checkProgress(): void {
    const activeEverywhere = [...this.records.values()].filter(
      (r) => r.admitted && this.isLive(r),
    ).length;
    const slotFree =
      this.maxConcurrentRuns === undefined || activeEverywhere < this.maxConcurrentRuns;
    for (const sessionId of this.sessions) {
      const session = this.runtime.session(this.ownerId, sessionId);
      if (session.queuedRunIds.length > 0 && session.activeRunId === undefined && slotFree) {
        this.violation(
          `${sessionId} is stalled: ${session.queuedRunIds.join(', ')} wait, nothing is active and a slot is free`,
        );
      }
    }
  }

  throwIfViolated(step: string): void {
    if (this.violations.length === 0) return;
    const message = `after ${step}: ${this.violations.join('\n  ')}\n  steps: ${this.trace.join(', ')}`;
    this.violations.length = 0;
    throw new RaceInvariantError(message);
  }

  /**
   * Shuts down (if no command did), then drives the clock and the scheduler until every run's
   * termination and the shutdown have resolved.
   *
   * @param releaseAll - releases every settlement the scheduler holds
   */
  async finish(releaseAll: () => Promise<void>): Promise<void> {
    // Never awaited unboundedly: a stuck world fails below with a named invariant, not a hang.
    if (!this.shutdownCalled) void this.shutdown(50);
    for (let round = 0; round < 200; round++) {
      await releaseAll();
      await this.clock.flush();
      for (const broken of this.obligations.check(this.clock.now())) this.violation(broken);
      const settled = [...this.records.values()].every((r) => r.outcome !== undefined);
      if (settled && this.shutdownResult !== undefined) break;
      const next = this.clock.nextTimerAt;
      if (next === undefined) continue;
      await this.clock.advance(Math.max(0, next - this.clock.now()));
    }
    const unresolved = [...this.records.values()].filter((r) => r.outcome === undefined);
    if (unresolved.length > 0) {
      this.violation(
        `termination never resolved for ${unresolved.map((r) => `${r.run.id} (${r.run.status})`).join(', ')}`,
      );
    }
    if (this.shutdownResult === undefined) {
      this.violation('[shutdown-resolves] shutdown() never resolved (200 rounds of the clock)');
    }
    this.throwIfViolated('shutdown');
    this.#checkEnd();
  }

  shutdown(graceMs: number): Promise<{ drained: boolean }> {
    this.shutdownCalled = true;
    for (const record of this.records.values()) {
      record.licences.add('shutdown');
      if (record.run.status === 'RUNNING') record.licences.add('interrupt');
    }
    const result = this.runtime.shutdown({ graceMs });
    void result.then(
      (value) => (this.shutdownResult = value),
      (error: unknown) => this.reported.push(error),
    );
    return result;
  }

  #checkEnd(): void {
    for (const record of this.records.values()) {
      const { outcome, run } = record;
      if (outcome === undefined) continue;
      if (record.terminalEvents !== 1) {
        this.violation(`run ${run.id} logged ${record.terminalEvents} terminal events`);
      }
      if (outcome.status !== run.status) {
        this.violation(`run ${run.id}: outcome ${outcome.status}, status ${run.status}`);
      }
      this.#checkLicence(record, outcome);
    }
    if (this.runtime.runs.size !== 0) {
      this.violation(`${this.runtime.runs.size} runs still live after shutdown`);
    }
    if (this.clock.pendingTimers !== 0) {
      this.violation(`${this.clock.pendingTimers} timers still armed after shutdown`);
    }
    const alive = this.actors.filter(
      (actor) => (actor.getSnapshot() as { status: string }).status === 'active',
    );
    if (alive.length > 0) {
      this.violation(
        `${alive.length} actors still active after shutdown: ${alive.map((a) => a.id).join(', ')}`,
      );
    }
    if (this.reported.length > 0) {
      this.violation(`the runtime reported errors: ${this.reported.map(String).join('; ')}`);
    }
    this.throwIfViolated('the end');
  }

  /** "A cancel or interrupt aimed at X changes no other run": every ending has a reason. */
  #checkLicence(record: RunRecord, outcome: RunOutcome): void {
    const { licences, run } = record;
    const need = (licence: Licence, what: string) => {
      if (!licences.has(licence)) {
        const named =
          licence === 'cancel' && record.graceCalledOff
            ? `[interrupt-grace-called-off] every run that interrupted ${run.id} was cancelled before its grace ran out, yet `
            : '';
        this.violation(
          `${named}run ${run.id} ${what}, but nothing aimed a ${licence} at it (${[...licences].join(', ') || 'none'})`,
        );
      }
    };
    if (outcome.status === 'COMPLETED') {
      need('complete', 'COMPLETED');
      if (outcome.interrupted) need('interrupt', 'completed interrupted');
    } else if (outcome.status === 'FAILED') {
      need('fail', 'FAILED');
    } else {
      const cause = outcome.cause === 'signal' ? 'cancel' : outcome.cause;
      if (outcome.cause === 'signal')
        this.violation(`run ${run.id} cancelled by a signal nobody passed`);
      need(cause, `was CANCELLED (cause ${outcome.cause})`);
    }
  }
}
