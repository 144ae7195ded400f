/**
 * A reference model of run and session admission, written from the README's rules ("The
 * controls", "Runtime options and events") and docs/architecture.md §5 (the busy-session table),
 * independent of `machines/` (it imports nothing from there: it is a specification, not a
 * second copy of the charts).
 *
 * The rules it states:
 * - one active run per session, the others wait in start order (FIFO);
 * - `maxConcurrentRuns` slots are shared by all sessions: a session with waiting runs and no
 *   active run asks for one, and a freed slot goes to the session that asked first; a session
 *   whose active run ended and that still has runs waiting asks again, behind the others;
 * - a session is busy when it has an active run or runs waiting for a slot; on a busy session
 *   `enqueue` queues last, `reject` throws `SESSION_BUSY` (the run ends CANCELLED), `interrupt`
 *   queues first (also while the session only waits for a slot) and interrupts the active run,
 *   cancelling it after `graceMs` unless every interrupting run was cancelled meanwhile, and
 *   `preempt` cancels the queued runs and the active one at its next safe point (escalating
 *   after `graceMs`, the earliest of several deadlines winning), then queues last;
 * - `maxQueuedRuns` caps a session's runs that have not settled (prepared, queued, running):
 *   `prepare` beyond it throws `SESSION_QUEUE_FULL`;
 * - an immediate cancel ends a prepared, queued or running run at once (the agents here honour
 *   their signal, so a cancelled active run frees its session and slot right away);
 * - `runs.cancel` answers `accepted` for a live run, `ended` for one that is over, and
 *   `not_found` for an id the session never had (also the right id under the wrong session).
 */

/** One thing a user, an agent or time does. Runs are picked by index among those prepared so far. */
export type AdmissionStep =
  | {
      readonly kind: 'prepare';
      readonly session: number;
      readonly strategy: 'enqueue' | 'reject' | 'interrupt' | 'preempt';
      readonly graceMs: number;
      readonly andStart: boolean;
    }
  | { readonly kind: 'start'; readonly run: number }
  | { readonly kind: 'cancel'; readonly run: number; readonly via: 'run' | 'runs' | 'wrongSession' }
  | { readonly kind: 'complete'; readonly run: number }
  | { readonly kind: 'safePoint'; readonly run: number }
  | { readonly kind: 'advance'; readonly ms: number };

/** A run's status as a user reads it. */
export type AdmissionStatus = 'CREATED' | 'QUEUED' | 'RUNNING' | 'COMPLETED' | 'CANCELLED';

/** What a step answered: an error code, `runs.cancel`'s answer, a safe point's, or nothing. */
export type AdmissionAnswer =
  | 'ok'
  | 'SESSION_BUSY'
  | 'SESSION_QUEUE_FULL'
  | 'RUN_ALREADY_STARTED'
  | 'accepted'
  | 'ended'
  | 'not_found'
  | 'contributed'
  | 'not_contributed'
  | 'cancelled'
  | 'continued'
  | 'not_running'
  | 'none';

/** What the model predicts a user sees after a step. */
export interface AdmissionView {
  readonly answer: AdmissionAnswer;
  /** Every run id handed to `prepare` so far, with its status (`undefined`: refused). */
  readonly statuses: Readonly<Record<string, AdmissionStatus | undefined>>;
  /** Per session: the active run and the waiting line, in admission order. */
  readonly sessions: Readonly<Record<string, { active: string | null; queued: string[] }>>;
}

interface RunState {
  readonly session: string;
  status: AdmissionStatus;
  started: boolean;
  /** The escalation deadline of a pending preempt (a safe-point cancel), if any. */
  preemptAt: { at: number; order: number } | undefined;
}

interface SessionState {
  active: string | undefined;
  readonly line: string[];
  /** The pending grace of an `interrupt` strategy: when it cancels, and who waits for it. */
  interrupting: { at: number; order: number; runIds: string[] } | undefined;
}

const terminal = (status: AdmissionStatus) => status === 'COMPLETED' || status === 'CANCELLED';

/** The model's state: runs, sessions, the slot line and the clock. */
export class AdmissionReference {
  readonly ids: string[] = [];
  readonly #runs = new Map<string, RunState>();
  readonly #sessions = new Map<string, SessionState>();
  /** Sessions waiting for a runtime slot, in the order they asked. */
  readonly #slotLine: string[] = [];
  #now = 0;
  /** Arming order of timers, so that deadlines at the same time fire as armed. */
  #order = 0;

  constructor(
    readonly sessionIds: readonly string[],
    readonly maxConcurrentRuns: number,
    readonly maxQueuedRuns: number,
  ) {
    for (const id of sessionIds)
      this.#sessions.set(id, { active: undefined, line: [], interrupting: undefined });
  }

  /** The run a step picks: its index modulo the runs prepared so far (refused ids included). */
  pick(index: number): string | undefined {
    return this.ids.length === 0 ? undefined : this.ids[index % this.ids.length];
  }

  /** The run an agent step picks: its index modulo the RUNNING runs, in prepare order. */
  pickRunning(index: number): string | undefined {
    const running = this.ids.filter((id) => this.#runs.get(id)?.status === 'RUNNING');
    return running.length === 0 ? undefined : running[index % running.length];
  }

  /** The id the next `prepare` uses. */
  nextId(): string {
    return `a${this.ids.length + 1}`;
  }

  sessionOf(runId: string): string | undefined {
    return this.#runs.get(runId)?.session;
  }

  /** Applies a step and returns what a user must then see. */
  step(step: AdmissionStep): AdmissionView {
    const answer = this.#apply(step);
    if (step.kind !== 'advance') this.#fireDue(this.#now);
    const statuses: Record<string, AdmissionStatus | undefined> = {};
    for (const id of this.ids) statuses[id] = this.#runs.get(id)?.status;
    const sessions: Record<string, { active: string | null; queued: string[] }> = {};
    for (const [id, s] of this.#sessions)
      sessions[id] = { active: s.active ?? null, queued: [...s.line] };
    return { answer, statuses, sessions };
  }

  #apply(step: AdmissionStep): AdmissionAnswer {
    switch (step.kind) {
      case 'prepare':
        return this.#prepare(step);
      case 'advance': {
        // The deadlines due fire in order, each moving the clock to its own time; the clock
        // then stands where the step ends (not `ms` past the last deadline fired).
        const until = this.#now + step.ms;
        this.#fireDue(until);
        this.#now = until;
        return 'none';
      }
      default:
        break;
    }
    const runId =
      step.kind === 'complete' || step.kind === 'safePoint'
        ? this.pickRunning(step.run)
        : this.pick(step.run);
    const run = runId === undefined ? undefined : this.#runs.get(runId);
    if (runId === undefined) return step.kind === 'safePoint' ? 'not_running' : 'none';
    switch (step.kind) {
      case 'start':
        if (run === undefined) return 'none';
        return this.#start(runId, run);
      case 'cancel': {
        if (step.via === 'wrongSession' || run === undefined) {
          return 'not_found';
        }
        const wasTerminal = terminal(run.status);
        if (!wasTerminal) this.#cancel(runId, run);
        if (step.via === 'runs') return wasTerminal ? 'ended' : 'accepted';
        return wasTerminal ? 'not_contributed' : 'contributed';
      }
      case 'complete':
        if (run?.status !== 'RUNNING') return 'none';
        run.status = 'COMPLETED';
        this.#release(run.session);
        return 'none';
      case 'safePoint':
        if (run?.status !== 'RUNNING') return 'not_running';
        if (run.preemptAt === undefined) return 'continued';
        run.status = 'CANCELLED';
        this.#release(run.session);
        return 'cancelled';
    }
  }

  #prepare(step: Extract<AdmissionStep, { kind: 'prepare' }>): AdmissionAnswer {
    const runId = this.nextId();
    this.ids.push(runId);
    const sessionId = this.sessionIds[step.session % this.sessionIds.length] ?? '';
    const unsettled = [...this.#runs.values()].filter(
      (r) => r.session === sessionId && !terminal(r.status),
    ).length;
    if (unsettled >= this.maxQueuedRuns) return 'SESSION_QUEUE_FULL';
    const run: RunState = {
      session: sessionId,
      status: 'CREATED',
      started: false,
      preemptAt: undefined,
    };
    this.#runs.set(runId, run);
    this.#strategies.set(runId, { strategy: step.strategy, graceMs: step.graceMs });
    return step.andStart ? this.#start(runId, run) : 'ok';
  }

  readonly #strategies = new Map<string, { strategy: string; graceMs: number }>();

  #start(runId: string, run: RunState): AdmissionAnswer {
    if (run.started) return 'RUN_ALREADY_STARTED';
    run.started = true;
    if (run.status !== 'CREATED') return 'ok';
    const session = this.#session(run.session);
    const { strategy, graceMs } = this.#strategies.get(runId) ?? {
      strategy: 'enqueue',
      graceMs: 0,
    };
    const busy = session.active !== undefined || session.line.length > 0;
    if (!busy) {
      if (this.#slotFree()) {
        this.#admit(run.session, runId);
      } else {
        run.status = 'QUEUED';
        session.line.push(runId);
        this.#slotLine.push(run.session);
      }
      return 'ok';
    }
    if (strategy === 'reject') {
      run.status = 'CANCELLED';
      return 'SESSION_BUSY';
    }
    run.status = 'QUEUED';
    if (strategy === 'interrupt') {
      session.line.unshift(runId);
      if (session.active !== undefined) {
        if (session.interrupting === undefined) {
          session.interrupting = { at: this.#now + graceMs, order: this.#order++, runIds: [runId] };
        } else {
          session.interrupting.runIds.push(runId);
        }
      }
      return 'ok';
    }
    if (strategy === 'preempt') {
      // The session keeps its place in the slot line: the new run waits there instead.
      for (const queued of [...session.line])
        this.#cancel(queued, this.#run(queued), 'keepSlotRequest');
      const active = session.active === undefined ? undefined : this.#run(session.active);
      if (active !== undefined) {
        const at = this.#now + graceMs;
        if (active.preemptAt === undefined || at < active.preemptAt.at) {
          active.preemptAt = { at, order: this.#order++ };
        }
      }
    }
    session.line.push(runId);
    return 'ok';
  }

  /** An immediate cancel of a live run. */
  #cancel(runId: string, run: RunState, slot: 'keepSlotRequest' | 'withdraw' = 'withdraw'): void {
    const session = this.#session(run.session);
    const wasRunning = run.status === 'RUNNING';
    run.status = 'CANCELLED';
    if (wasRunning) {
      this.#release(run.session);
      return;
    }
    const index = session.line.indexOf(runId);
    if (index < 0) return;
    session.line.splice(index, 1);
    const waiting = session.interrupting;
    if (waiting !== undefined) {
      waiting.runIds = waiting.runIds.filter((id) => id !== runId);
      // The last run that waited for the active run's end was cancelled: the grace is called off.
      if (waiting.runIds.length === 0) session.interrupting = undefined;
    }
    if (slot === 'withdraw' && session.line.length === 0 && session.active === undefined) {
      this.#withdraw(run.session);
    }
  }

  /** The active run of `sessionId` ended: its slot goes to the next session in line. */
  #release(sessionId: string): void {
    const session = this.#session(sessionId);
    const ended = session.active === undefined ? undefined : this.#run(session.active);
    if (ended !== undefined) ended.preemptAt = undefined;
    session.active = undefined;
    session.interrupting = undefined;
    const next = this.#slotLine.shift();
    if (next !== undefined) this.#admit(next, this.#session(next).line[0] ?? '');
    if (session.line.length > 0) {
      if (this.#slotFree()) this.#admit(sessionId, session.line[0] ?? '');
      else this.#slotLine.push(sessionId);
    }
  }

  #admit(sessionId: string, runId: string): void {
    const session = this.#session(sessionId);
    const index = session.line.indexOf(runId);
    if (index >= 0) session.line.splice(index, 1);
    session.active = runId;
    this.#run(runId).status = 'RUNNING';
  }

  #withdraw(sessionId: string): void {
    const index = this.#slotLine.indexOf(sessionId);
    if (index >= 0) this.#slotLine.splice(index, 1);
  }

  #slotFree(): boolean {
    const active = [...this.#sessions.values()].filter((s) => s.active !== undefined).length;
    return active < this.maxConcurrentRuns;
  }

  /** Fires the interrupt graces and preempt escalations due by `until`, in time then arming order. */
  #fireDue(until: number): void {
    for (;;) {
      let due: { at: number; order: number; sessionId: string } | undefined;
      for (const [sessionId, session] of this.#sessions) {
        const deadlines = [
          session.interrupting,
          session.active === undefined ? undefined : this.#run(session.active).preemptAt,
        ];
        for (const d of deadlines) {
          if (d === undefined || d.at > until) continue;
          if (due === undefined || d.at < due.at || (d.at === due.at && d.order < due.order)) {
            due = { at: d.at, order: d.order, sessionId };
          }
        }
      }
      if (due === undefined) return;
      this.#now = Math.max(this.#now, due.at);
      const session = this.#session(due.sessionId);
      this.#run(session.active ?? '').status = 'CANCELLED';
      this.#release(due.sessionId);
    }
  }

  #run(runId: string): RunState {
    const run = this.#runs.get(runId);
    if (run === undefined) throw new Error(`admission model: no run ${runId}`);
    return run;
  }

  #session(sessionId: string): SessionState {
    const session = this.#sessions.get(sessionId);
    if (session === undefined) throw new Error(`admission model: no session ${sessionId}`);
    return session;
  }
}
