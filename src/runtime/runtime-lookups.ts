/**
 * The runtime's lookups, answered through the session actors' systems (docs/architecture.md,
 * "The actor tree"): `runtime.runs` finds a live run by owner, session and id, and
 * `runtime.session(…)` is a view of one session's host.
 *
 * @module
 * @internal
 */
import { terminalRunStatuses } from '../../machines/run.types.js';
import { toSessionKeyString, type EventLog } from '../events/event-log.js';
import type { RunExecutor } from '../run/run-executor.js';
import type { SessionHost } from '../session/session-host.js';
import type { Session } from '../session/session.js';
import { parseOptions } from '../validation.js';
import { sessionKeySchema } from './runtime-options.js';
import type { RunRegistry } from './runtime-types.js';

/** The key of a session in the runtime's table of session hosts. @internal */
export const keyOf = (ownerId: string, sessionId: string) =>
  toSessionKeyString({ ownerId, sessionId });

/**
 * `runtime.runs` over the runtime's tables (live: they are read at each call).
 *
 * @param sessions - the session hosts, by {@link keyOf}
 * @param executors - every run that has not settled, by run id
 * @param eventLog - asked whether a run not live any more was ever logged (`ended`)
 * @internal
 */
export function createRunRegistry(
  sessions: ReadonlyMap<string, SessionHost>,
  executors: ReadonlyMap<string, RunExecutor>,
  eventLog: EventLog,
): RunRegistry {
  /** A run still live for exactly this owner and session (found through the session's system). */
  const findLive = (ownerId: string, sessionId: string, runId: string): RunExecutor | undefined =>
    sessions.get(keyOf(ownerId, sessionId))?.runActor(runId) === undefined
      ? undefined
      : executors.get(runId);

  const answer = (
    ownerId: string,
    sessionId: string,
    runId: string,
    act: (run: RunExecutor) => void,
  ): 'accepted' | 'not_found' | 'ended' => {
    const run = findLive(ownerId, sessionId, runId);
    if (run !== undefined) {
      if (terminalRunStatuses.has(run.status)) return 'ended';
      act(run);
      return 'accepted';
    }
    return eventLog.hasRun({}, { ownerId, sessionId }, runId) ? 'ended' : 'not_found';
  };

  return {
    find: (ownerId, sessionId, runId) => findLive(ownerId, sessionId, runId)?.handle,
    cancel: (ownerId, sessionId, runId, cancelOptions) =>
      answer(ownerId, sessionId, runId, (run) => run.handle?.cancel(cancelOptions)),
    interrupt: (ownerId, sessionId, runId, message) =>
      answer(ownerId, sessionId, runId, (run) => run.interruptWith(message, 'interrupt')),
    get size() {
      return executors.size;
    },
  };
}

/**
 * `runtime.session(ownerId, sessionId)` over the runtime's tables.
 *
 * @param sessions - the session hosts, by {@link keyOf}
 * @param executors - every run that has not settled, by run id
 * @internal
 */
export function createSessionLookup(
  sessions: ReadonlyMap<string, SessionHost>,
  executors: ReadonlyMap<string, RunExecutor>,
): (ownerId: string, sessionId: string) => Session {
  return (ownerId: string, sessionId: string): Session => {
    parseOptions(sessionKeySchema, { ownerId, sessionId }, 'session');
    const peek = () => sessions.get(keyOf(ownerId, sessionId));
    return {
      ownerId,
      sessionId,
      get activeRunId() {
        return peek()?.activeRunId;
      },
      get queuedRunIds() {
        return peek()?.queuedRunIds ?? [];
      },
      get busy() {
        return peek()?.busy ?? false;
      },
      interrupt(message) {
        const activeRunId = peek()?.activeRunId;
        const run = activeRunId === undefined ? undefined : executors.get(activeRunId);
        if (run === undefined || run.status !== 'RUNNING') return 'idle';
        run.interruptWith(message, 'interrupt');
        return 'accepted';
      },
      cancelAll(cancelAllOptions = {}) {
        const host = peek();
        if (host === undefined) return 0;
        const ids = host.queuedRunIds;
        if (cancelAllOptions.includeActive === true && host.activeRunId !== undefined)
          ids.unshift(host.activeRunId);
        let cancelled = 0;
        for (const runId of ids) {
          if (executors.get(runId)?.handle?.cancel({ reason: 'cancelAll' }).contributed === true)
            cancelled++;
        }
        return cancelled;
      },
      onIdle() {
        return peek()?.onIdle() ?? Promise.resolve();
      },
    };
  };
}
