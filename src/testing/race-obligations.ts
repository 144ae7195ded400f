/**
 * Obligations of the race world (internal to `runplane/testing`): what MUST happen, on the
 * simulated clock, after a safe-point cancel or a busy-session strategy, as opposed to the
 * licences of `RaceWorld`, which say what MAY end a run. Each failure names its invariant:
 *
 * - `[escalation-at-deadline]`: a safe-point cancel with `timeoutMs` (or a `preempt` strategy's
 *   cancel, escalating after its `graceMs`) has ended the run by its deadline, not later
 *   (README "The controls"; the earliest deadline of merged requests wins);
 * - `[safe-point-lands]`: a safe point lands a pending safe-point cancel exactly when one of the
 *   merged requests' bits matches it (the bits OR together), and otherwise lets the run go on;
 * - `[interrupt-grace-cancels]`: an `interrupt` strategy cancels the active run when its grace
 *   is over while a run that interrupted it still waits;
 * - `[interrupt-grace-called-off]`: when every run that interrupted it was cancelled before the
 *   grace was over, the grace's cancel is called off (checked with the run's licences at the end).
 *
 * @internal
 * @module
 */
import { CancelMode, type SafePointKind } from '../../machines/cancel-request.js';
import type { RunStatus } from '../../machines/run.machine.js';
import { isTerminalStatus } from './race-step.js';
import type { RunRecord } from './race-world.js';

/** A pending `interrupt` strategy: the active run it cut, when its grace is over, who waits. */
interface Grace {
  readonly active: RunRecord;
  readonly at: number;
  readonly interrupters: RunRecord[];
}

const bitOf: Record<SafePointKind, number> = {
  afterChatModel: CancelMode.AfterChatModel,
  afterToolCalls: CancelMode.AfterToolCalls,
};

const isTerminal = (record: RunRecord) => isTerminalStatus(record.run.status);

/** @internal The obligations one race sequence has taken on, checked after every step. */
export class RaceObligations {
  /** Per run: when it must be over at the latest, and which request said so. */
  readonly #deadlines = new Map<RunRecord, { at: number; why: string }>();
  /** Per run: the safe-point requests aimed at it, and their bits ORed. */
  readonly #safePoint = new Map<RunRecord, { bits: number; requests: string[] }>();
  /** Per session: the `interrupt` strategy whose grace runs. */
  readonly #graces = new Map<string, Grace>();

  /**
   * A safe-point cancel (any mode but `Immediate`) was aimed at `record`.
   *
   * @param escalateAt - absolute clock ms of its escalation deadline, if it has one
   */
  safePointCancel(record: RunRecord, mode: number, escalateAt: number | undefined, why: string) {
    if (isTerminal(record) || mode === CancelMode.Immediate) return;
    const pending = this.#safePoint.get(record) ?? { bits: 0, requests: [] };
    pending.bits |= mode;
    pending.requests.push(why);
    this.#safePoint.set(record, pending);
    if (escalateAt === undefined) return;
    const before = this.#deadlines.get(record);
    if (before === undefined || escalateAt < before.at) {
      this.#deadlines.set(record, { at: escalateAt, why });
    }
  }

  /** `interrupter` started with the `interrupt` strategy while `active` was the session's active run. */
  interruptStrategy(active: RunRecord, interrupter: RunRecord, at: number): void {
    const grace = this.#graces.get(active.sessionId);
    if (grace?.active === active) grace.interrupters.push(interrupter);
    else this.#graces.set(active.sessionId, { active, at, interrupters: [interrupter] });
  }

  /**
   * Checks a safe point's answer against the requests merged so far.
   *
   * @param statusBefore - the run's status before the safe point
   * @param answer - what the agent's safe point found
   * @returns the violation, if any
   */
  checkSafePoint(
    record: RunRecord,
    kind: SafePointKind,
    statusBefore: RunStatus,
    answer: 'continued' | 'cancelled' | 'not_running',
  ): string | undefined {
    if (statusBefore !== 'RUNNING' || answer === 'not_running') return undefined;
    const pending = this.#safePoint.get(record);
    const lands = pending !== undefined && (pending.bits & bitOf[kind]) !== 0;
    if (lands === (answer === 'cancelled')) return undefined;
    const requests = pending === undefined ? 'none' : pending.requests.join(' + ');
    return `[safe-point-lands] run ${record.run.id}: its safePoint(${kind}) answered ${answer}, but the safe-point cancels merged so far (${requests}) say it ${lands ? 'lands there' : 'does not land there'}`;
  }

  /**
   * Checks every deadline due by `now`, and what the pending graces call for.
   *
   * @returns the violations found
   */
  check(now: number): string[] {
    const broken: string[] = [];
    for (const [record, deadline] of this.#deadlines) {
      if (isTerminal(record)) this.#deadlines.delete(record);
      else if (deadline.at <= now && record.run.status === 'RUNNING') {
        broken.push(
          `[escalation-at-deadline] run ${record.run.id}: ${deadline.why} was due to escalate at ${deadline.at} ms; it is ${now} ms and the run is still RUNNING`,
        );
        this.#deadlines.delete(record);
      }
    }
    for (const [sessionId, grace] of this.#graces) {
      const { active } = grace;
      const waiting = grace.interrupters.some((r) => !isTerminal(r));
      if (isTerminal(active) && grace.at > now) {
        // Over before its grace ran out: nothing is owed. (At the deadline, the cancel may be its.)
        this.#graces.delete(sessionId);
      } else if (!waiting && grace.at > now) {
        // Every run that interrupted it ended in time: the grace's cancel is called off.
        active.graceCalledOff = true;
        this.#graces.delete(sessionId);
      } else if (grace.at <= now) {
        // The grace ran out (or ran out in the step that ended the last interrupter, which
        // this check cannot order): the cancel is the strategy's.
        active.licences.add('cancel');
        if (waiting && active.run.status === 'RUNNING') {
          broken.push(
            `[interrupt-grace-cancels] run ${active.run.id} was interrupted by ${grace.interrupters.map((r) => r.run.id).join(', ')} with a grace ending at ${grace.at} ms; it is ${now} ms, one of them still waits, and ${active.run.id} is still RUNNING`,
          );
        }
        this.#graces.delete(sessionId);
      }
    }
    return broken;
  }
}
