/**
 * The rules of a session's user events, free of HTTP: what `user.message`,
 * `user.interrupt`, `user.tool_confirmation` and `user.supplement` do to the runtime and the
 * stores, and what each answers (README "HTTP API", the events table). No Hono, no
 * Request/Response: the routes parse a batch and hand it here; a refusal is an
 * {@link HttpError} the routes answer with.
 *
 * @module
 */
import { CancelMode, type CancelModeValue } from '../../machines/cancel-request.js';
import { terminalRunStatuses } from '../../machines/run.machine.js';
import { SessionBusyError, SessionQueueFullError } from '../errors.js';
import type { SessionKey } from '../events/event-log.js';
import type { Agent } from '../run/agent.js';
import type { AgentRun } from '../run/agent-run.js';
import type { RunOutcome } from '../run/run-outcome.js';
import type { Runtime } from '../runtime/create-runtime.js';
import type { RunRecord, RunRecordOutcome, RunRecords } from '../stores/run-records.js';
import type { SessionRecord } from '../stores/session-records.js';
import { HttpError } from './http-error.js';
import type { LoopSessions } from './loop-sessions.js';
import type { SessionStrategy, UserEvent } from './schemas.js';

/** What applying session events needs: the runtime, the stores and the service's limits. */
export interface SessionEventsContext {
  /** The runtime every run lives in; its event log and inbox take the user's events. */
  readonly runtime: Runtime;
  /** The agent each `user.message` runs, with the message text as input. */
  readonly agent: Agent<string, unknown>;
  /** Where runs are recorded: once when created, once with their outcome. */
  readonly runs: RunRecords;
  /** Hints (`user.supplement`) that may wait in one session. */
  readonly maxPendingHints: number;
  /** Runs of one owner not yet ended, counted; one more `user.message` is 429 `too_many_runs`. */
  readonly unfinishedRuns: OwnerRunCount;
  /** Total budget of each run, queue time included, in ms; none when undefined. */
  readonly runTimeoutMs: number | undefined;
  /** Whether the service is shutting down (then a `user.message` is refused). */
  readonly isDraining: () => boolean;
  /** Receives a store failure that happens after the answer (recording an outcome). */
  readonly reportError: (error: unknown) => void;
  /** The TurnLoops of `loop` sessions: their `user.message` pushes an item. */
  readonly loopSessions: LoopSessions;
}

/**
 * Runs per owner that have not ended: what bounds the memory one owner's waiting runs take
 * (each session holds at most `maxQueuedRuns`, but an owner has many sessions).
 */
export class OwnerRunCount {
  readonly #counts = new Map<string, number>();

  /** @param max - the most runs of one owner not yet ended */
  constructor(readonly max: number) {}

  /** Whether `ownerId` may have one more. */
  hasRoom(ownerId: string): boolean {
    return (this.#counts.get(ownerId) ?? 0) < this.max;
  }

  add(ownerId: string): void {
    this.#counts.set(ownerId, (this.#counts.get(ownerId) ?? 0) + 1);
  }

  remove(ownerId: string): void {
    const left = (this.#counts.get(ownerId) ?? 1) - 1;
    if (left > 0) this.#counts.set(ownerId, left);
    else this.#counts.delete(ownerId);
  }
}

/** Messages of a loop session that may wait for a turn; one more is 429 `session_queue_full`. */
const maxWaitingLoopItems = 100;

/** The answer to one event of a batch (`{ type, result, ... }`), in API spelling. */
export type EventResult = Record<string, unknown>;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null;

const cancelModes: Record<string, CancelModeValue> = {
  immediate: CancelMode.Immediate,
  after_chat_model: CancelMode.AfterChatModel,
  after_tool_calls: CancelMode.AfterToolCalls,
  any_safe_point: CancelMode.AnySafePoint,
};

/**
 * What a run ended as, in the record's form.
 *
 * @param outcome - the run's outcome
 * @returns the record's outcome: `reason` and `reply` of a completed run, `error` of a failed
 *   one, `cause`, `reason`, `escalated` and `unsettled` of a cancelled one
 */
export function toRecordOutcome(outcome: RunOutcome<unknown>): RunRecordOutcome {
  if (outcome.status === 'COMPLETED') {
    const output = isRecord(outcome.output) ? outcome.output : {};
    return {
      status: 'COMPLETED',
      reason:
        typeof output.reason === 'string'
          ? output.reason
          : outcome.interrupted
            ? 'interrupted'
            : 'completed',
      reply: typeof output.reply === 'string' ? output.reply : undefined,
    };
  }
  if (outcome.status === 'FAILED') {
    const { error } = outcome;
    return { status: 'FAILED', error: error instanceof Error ? error.message : String(error) };
  }
  return {
    status: 'CANCELLED',
    cause: outcome.cause,
    reason: outcome.reason,
    escalated: outcome.escalated,
    unsettled: outcome.unsettled,
  };
}

/**
 * Refuses new work (a new session, a `user.message`) while the service shuts down.
 *
 * @param draining - whether the service is shutting down
 * @throws {@link HttpError} (`shutting_down`) while draining
 */
export function refuseNewWorkWhileDraining(draining: boolean): void {
  if (draining) {
    throw new HttpError('shutting_down', 'the service is shutting down and takes no new work');
  }
}

/**
 * Applies a validated batch of user events to a session, in order.
 *
 * @remarks The batch is refused as a whole (nothing applied) when it holds a `user.message`
 * while the service shuts down. Otherwise each event is applied in turn; when one is refused,
 * the error carries the results of the events applied before it (`results`).
 *
 * @param context - {@link SessionEventsContext}
 * @param session - the caller's session
 * @param events - the batch, already validated
 * @returns one {@link EventResult} per event, in order
 * @throws {@link HttpError} (`shutting_down`) for a `user.message` while draining;
 *   (`session_busy`) for a `user.message` under `reject` while the session is busy;
 *   (`too_many_hints`) for a `user.supplement` past `maxPendingHints`; `store_failed` (as a
 *   `RunplaneError`) when a store fails
 */
export function applySessionEvents(
  context: SessionEventsContext,
  session: SessionRecord,
  events: readonly UserEvent[],
): EventResult[] {
  if (events.some((event) => event.type === 'user.message')) {
    refuseNewWorkWhileDraining(context.isDraining());
    refuseOtherModesOptions(session, events);
  }
  const results: EventResult[] = [];
  events.forEach((event, index) =>
    results.push(applySessionEvent(context, session, event, { index, results })),
  );
  return results;
}

/** Where an event sits in its batch: its index and the results of the events before it. */
interface BatchPosition {
  readonly index: number;
  readonly results: readonly EventResult[];
}

/**
 * Applies one user event to a session.
 *
 * @param context - {@link SessionEventsContext}
 * @param session - the caller's session
 * @param event - the validated event
 * @param position - its index in the batch and the results before it (for error answers)
 * @returns its {@link EventResult}
 * @throws as {@link applySessionEvents}
 */
function applySessionEvent(
  context: SessionEventsContext,
  session: SessionRecord,
  event: UserEvent,
  position: BatchPosition = { index: 0, results: [] },
): EventResult {
  switch (event.type) {
    case 'user.message':
      return applyMessage(context, session, event, position);
    case 'user.interrupt':
      return applyInterrupt(context, session, event);
    case 'user.tool_confirmation': {
      const { tool_use_id: toolUseId, allow } = event.payload;
      const message = event.payload.deny_message ?? event.payload.denyMessage;
      const result = context.runtime.approve(session.ownerId, session.sessionId, toolUseId, {
        allow,
        message,
      });
      return { type: event.type, result, tool_use_id: toolUseId };
    }
    case 'user.supplement':
      return applySupplement(context, session, event, position);
  }
}

/**
 * Refuses, before any event is applied, a `user.message` option of the other mode: `strategy`
 * in a loop session (the loop is the strategy), `preempt` in a runs session (its strategy
 * `preempt` is the way there).
 *
 * @throws {@link HttpError} (`invalid_event`) with `error.events`
 */
function refuseOtherModesOptions(session: SessionRecord, events: readonly UserEvent[]): void {
  const loop = session.mode === 'loop';
  const errors = events.flatMap((event, index) => {
    if (event.type !== 'user.message') return [];
    if (loop && event.payload.strategy !== undefined) {
      return [
        {
          index,
          code: 'invalid_event',
          message: `expected \`events[${index}].payload.strategy\` to be absent in a loop session (its TurnLoop decides; send \`preempt: true\` to preempt), got ${JSON.stringify(event.payload.strategy)}`,
        },
      ];
    }
    if (!loop && event.payload.preempt !== undefined) {
      return [
        {
          index,
          code: 'invalid_event',
          message: `expected \`events[${index}].payload.preempt\` to be absent in a runs session (send \`strategy: "preempt"\`, or create the session with mode "loop"), got ${JSON.stringify(event.payload.preempt)}`,
        },
      ];
    }
    return [];
  });
  const first = errors[0];
  if (first !== undefined) throw new HttpError('invalid_event', first.message, { events: errors });
}

/**
 * Whether a `user.message` under `strategy` is refused before a run is prepared: `reject`
 * while the session has an active or a queued run.
 *
 * @remarks The session machine decides (README "The controls"); this asks it before anything is
 * written, so that a refused message applies nothing (no run record, no log line). `run.start()`
 * still throws `SESSION_BUSY` itself, which maps to the same answer.
 */
function isRefusedAsBusy(runtime: Runtime, key: SessionKey, strategy: SessionStrategy): boolean {
  return strategy === 'reject' && runtime.session(key.ownerId, key.sessionId).busy;
}

function applyMessage(
  context: SessionEventsContext,
  session: SessionRecord,
  event: Extract<UserEvent, { type: 'user.message' }>,
  { index, results }: BatchPosition,
): EventResult {
  const { runtime, runs } = context;
  const { ownerId, sessionId } = session;
  const key: SessionKey = { ownerId, sessionId };
  if (session.mode === 'loop') {
    if (context.loopSessions.waitingItems(key) >= maxWaitingLoopItems) {
      throw new HttpError(
        'session_queue_full',
        `expected at most ${maxWaitingLoopItems} messages waiting for a turn in a loop session; wait for a turn to take them`,
        { event_index: index },
        { results },
      );
    }
    const itemId = context.loopSessions.push(key, {
      text: event.payload.text,
      preempt: event.payload.preempt === true,
      graceMs: session.graceMs,
    });
    return { type: event.type, result: 'accepted', item_id: itemId };
  }
  const strategy = event.payload.strategy ?? session.strategy;
  const handle = runtime.session(ownerId, sessionId);
  const busy = () =>
    new HttpError(
      'session_busy',
      `session ${sessionId} is busy with run ${handle.activeRunId ?? '(queued work)'}`,
      { active_run_id: handle.activeRunId ?? null, event_index: index },
      { results },
    );
  if (isRefusedAsBusy(runtime, key, strategy)) throw busy();
  const unfinished = context.unfinishedRuns;
  if (!unfinished.hasRoom(ownerId)) {
    throw new HttpError(
      'too_many_runs',
      `expected at most ${unfinished.max} runs per owner not yet ended; wait for some to end, or cancel them`,
      { event_index: index },
      { results },
    );
  }
  let run: AgentRun<unknown>;
  try {
    run = runtime.prepare({
      ownerId,
      sessionId,
      agent: context.agent,
      input: event.payload.text,
      strategy,
      graceMs: session.graceMs,
      timeoutMs: context.runTimeoutMs,
    });
  } catch (error) {
    if (error instanceof SessionQueueFullError) {
      throw new HttpError('session_queue_full', error.message, { event_index: index }, { results });
    }
    throw error;
  }
  try {
    runs.create({
      runId: run.id,
      ownerId,
      sessionId,
      input: event.payload.text,
      at: runtime.clock.now(),
    });
    runtime.eventLog.append({}, key, {
      runId: run.id,
      type: 'user.message',
      // The strategy it was sent with: a page shows the runs before it as preempting or
      // interrupting from the log alone.
      payload: { run_id: run.id, text: event.payload.text, strategy },
      at: runtime.clock.now(),
    });
  } catch (error) {
    // Never leave a prepared run behind that nobody can see.
    run.cancel({ reason: 'the store failed before the run started' });
    throw error;
  }
  followRun(context, run);
  try {
    run.start();
  } catch (error) {
    if (error instanceof SessionBusyError) throw busy();
    throw error;
  }
  return { type: event.type, result: 'accepted', run_id: run.id, status: run.status };
}

/** Counts a run against its owner until it ends, and records its outcome once it has settled. */
function followRun(context: SessionEventsContext, run: AgentRun<unknown>): void {
  const { runtime, runs, unfinishedRuns } = context;
  unfinishedRuns.add(run.ownerId);
  void run.termination.then((outcome) => {
    unfinishedRuns.remove(run.ownerId);
    try {
      runs.finish(run.id, toRecordOutcome(outcome), runtime.clock.now());
    } catch (error) {
      context.reportError(error);
    }
  });
}

/**
 * @internal Puts a run another process recorded, and left waiting, back in its session's queue
 * under its own id (a cluster's new lease holder rebuilding the session, docs/architecture.md,
 * "Cluster on Redis"): prepared with strategy `enqueue`, its record and `user.message` already
 * written, its outcome recorded once it settles. Call in the recorded order: the queue keeps it.
 *
 * @param context - {@link SessionEventsContext}
 * @param session - the run's session
 * @param record - the run as recorded (`runId`, `input`, `createdAt`)
 * @param input - what the agent gets instead of the recorded `input` (a cluster's failover
 *   policy `resume`: `{ resume: state, carried: true }`, the run first in the queue)
 * @returns the run, started
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) when a run of that id is live here
 * @throws `SessionQueueFullError` (`SESSION_QUEUE_FULL`) when the session's queue is full
 */
export function requeueRun(
  context: SessionEventsContext,
  session: SessionRecord,
  record: Pick<RunRecord, 'runId' | 'input' | 'createdAt'>,
  input: unknown = record.input,
): AgentRun<unknown> {
  const { runtime } = context;
  const { runTimeoutMs } = context;
  // The run's budget counts from when it was sent, as on the instance that took it.
  const timeoutMs =
    runTimeoutMs === undefined
      ? undefined
      : Math.max(1, record.createdAt + runTimeoutMs - runtime.clock.now());
  const run = runtime.prepare({
    ownerId: session.ownerId,
    sessionId: session.sessionId,
    runId: record.runId,
    agent: context.agent,
    input,
    strategy: 'enqueue',
    graceMs: session.graceMs,
    timeoutMs,
  });
  followRun(context, run);
  run.start();
  return run;
}

function applyInterrupt(
  context: SessionEventsContext,
  session: SessionRecord,
  event: Extract<UserEvent, { type: 'user.interrupt' }>,
): EventResult {
  const { runtime } = context;
  const { ownerId, sessionId } = session;
  const payload = event.payload ?? {};
  const mode = payload.mode ?? 'immediate';
  const reason = payload.reason ?? 'user.interrupt';
  const act = (runId: string) =>
    mode === 'interrupt'
      ? runtime.runs.interrupt(ownerId, sessionId, runId, reason)
      : runtime.runs.cancel(ownerId, sessionId, runId, {
          mode: cancelModes[mode] ?? CancelMode.Immediate,
          timeoutMs: payload.timeout_ms,
          reason,
        });
  if (payload.run_id !== undefined) {
    return { type: event.type, result: act(payload.run_id), run_id: payload.run_id };
  }
  // Without run_id: the session's active run now, or nothing (nothing is remembered).
  const activeRunId = runtime.session(ownerId, sessionId).activeRunId;
  const active =
    activeRunId === undefined ? undefined : runtime.runs.find(ownerId, sessionId, activeRunId);
  if (activeRunId === undefined || active === undefined || terminalRunStatuses.has(active.status)) {
    return { type: event.type, result: 'idle', run_id: null };
  }
  const result = act(activeRunId);
  return {
    type: event.type,
    result: result === 'accepted' ? 'accepted' : 'idle',
    run_id: result === 'accepted' ? activeRunId : null,
  };
}

function applySupplement(
  context: SessionEventsContext,
  session: SessionRecord,
  event: Extract<UserEvent, { type: 'user.supplement' }>,
  { index, results }: BatchPosition,
): EventResult {
  const { runtime, maxPendingHints } = context;
  const { ownerId, sessionId } = session;
  // Hints wait for the session's next reasoning step; a client that floods them would grow
  // every later model request.
  if (runtime.inbox.size(ownerId, sessionId) >= maxPendingHints) {
    throw new HttpError(
      'too_many_hints',
      `expected at most ${maxPendingHints} hints waiting in session ${sessionId}; wait for a run to read them`,
      { event_index: index },
      { results },
    );
  }
  const hintId = runtime.inbox.push(ownerId, sessionId, {
    text: event.payload.text,
    source: 'user-supplement',
  });
  runtime.eventLog.append(
    {},
    { ownerId, sessionId },
    {
      type: 'user.supplement',
      payload: { hint_id: hintId, text: event.payload.text },
      at: runtime.clock.now(),
    },
  );
  return { type: event.type, result: 'accepted', hint_id: hintId };
}
