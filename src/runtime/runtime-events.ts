/**
 * The runtime's appends to the event log (docs/architecture.md, "The actor tree"): each run event
 * goes to its session's log, then to telemetry, then to the `onEvent` listeners in a microtask;
 * and the log's end, where reading a new run's events can start.
 *
 * @module
 * @internal
 */
import { RunplaneError } from '../errors.js';
import type { EventLog, RunplaneEvent, SessionKey, StoreContext } from '../events/event-log.js';
import type { Clock } from '../clock.js';
import type { RunTelemetry } from '../observability/run-telemetry.js';
import type { RunExecutor } from '../run/run-executor.js';

/** The store context of the runtime's own appends: no signal (one object, not one per event). */
const noStoreContext: StoreContext = Object.freeze({});

/**
 * The runtime's appends to `eventLog`, made once per runtime.
 *
 * @param listeners - the `onEvent` listeners (the runtime adds and removes them)
 * @returns `append(run, type, payload)`, which never throws (a failed append is reported as a
 *   {@link RunplaneError} `STORE_FAILED`), and `logEndOf(key)`
 * @internal
 */
export function createRuntimeEvents(
  eventLog: EventLog,
  clock: Clock,
  telemetry: RunTelemetry,
  reportError: (error: unknown) => void,
  listeners: ReadonlySet<(event: RunplaneEvent, key: SessionKey) => void>,
) {
  // Listeners are called in a microtask, in log order, never inside an actor's transition: a
  // listener that cancels or starts runs cannot re-enter a run mid-step.
  const pendingNotifications: Array<[RunplaneEvent, SessionKey]> = [];
  const flushNotifications = () => {
    for (const [event, key] of pendingNotifications.splice(0)) {
      for (const listener of listeners) {
        try {
          listener(event, key);
        } catch (error) {
          reportError(error);
        }
      }
    }
  };

  function append(run: RunExecutor, type: string, payload: Record<string, unknown>): void {
    const key = run.sessionKey;
    let event: RunplaneEvent;
    try {
      event = eventLog.append(noStoreContext, key, {
        runId: run.id,
        type,
        payload,
        at: clock.now(),
      });
    } catch (error) {
      // The run's lifecycle goes on; the lost event is reported, never silently dropped.
      reportError(
        new RunplaneError('STORE_FAILED', `could not log ${type} of run ${run.id}`, {
          cause: error,
        }),
      );
      return;
    }
    telemetry.logged(run, type, payload, event.at);
    if (listeners.size === 0) return;
    if (pendingNotifications.push([event, key]) === 1) queueMicrotask(flushNotifications);
  }

  /**
   * The session log's last seq now: nothing of a run prepared now (its id is fresh) lies at or
   * before it, so reading the run's events can start there. 0 (read all) if the store fails.
   */
  const logEndOf = (key: SessionKey): number => {
    try {
      return eventLog.lastSeq(noStoreContext, key);
    } catch {
      return 0;
    }
  };

  return { append, logEndOf };
}
