/**
 * Run records: what the service remembers of every run it started, so that a restart can
 * tell what a dead process left unfinished (docs/architecture.md, "Event log and HTTP service").
 *
 * @module
 */
import type { RunStatus } from '../../machines/run.machine.js';

/** How a run ended, as recorded (JSON). */
export interface RunRecordOutcome {
  readonly status: 'COMPLETED' | 'FAILED' | 'CANCELLED';
  /** `COMPLETED`: `completed`, `interrupted`, `max_steps`, … */
  readonly reason?: string | undefined;
  /** `CANCELLED`: `cancel`, `timeout`, `signal`, `preempt`, `shutdown`; `FAILED`: `crashed` when the process died. */
  readonly cause?: string | undefined;
  readonly escalated?: boolean | undefined;
  readonly unsettled?: boolean | undefined;
  /** `FAILED`: the error message. */
  readonly error?: string | undefined;
  /** `COMPLETED`: the final reply text, when the agent gives one. */
  readonly reply?: string | undefined;
}

/** One run as the service recorded it. Times are clock ms. */
export interface RunRecord {
  readonly runId: string;
  readonly ownerId: string;
  readonly sessionId: string;
  readonly status: RunStatus;
  /** The user's message that started the run. */
  readonly input: string;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly endedAt: number | undefined;
  readonly outcome: RunRecordOutcome | undefined;
}

/**
 * The run-record store. Synchronous, like {@link EventLog.append}.
 *
 * @remarks `runplane serve` writes a record twice: at creation and with the outcome once the
 * run has settled; the statuses in between are live (the runtime) and logged (`run.status`),
 * which is where crash recovery reads them.
 */
export interface RunRecords {
  /** Records a new run (status `CREATED`). */
  create(record: {
    runId: string;
    ownerId: string;
    sessionId: string;
    input: string;
    at: number;
  }): void;
  /** Records a status change; a terminal status is kept once recorded. @returns whether a row changed */
  setStatus(runId: string, status: RunStatus, at: number): boolean;
  /** Records the outcome (and its terminal status). @returns whether a row changed */
  finish(runId: string, outcome: RunRecordOutcome, at: number): boolean;
  /** The record of `runId` when `ownerId` owns it, else `undefined`. */
  get(ownerId: string, runId: string): RunRecord | undefined;
  /** Runs whose recorded status is not terminal (`CREATED`, `QUEUED`, `RUNNING`), oldest first. */
  listUnfinished(): RunRecord[];
}
