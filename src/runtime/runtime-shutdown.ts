/**
 * The runtime's shutdown (docs/architecture.md, "The actor tree"): the runtime machine's actor,
 * whose effects cancel waiting runs, interrupt running ones, cancel what remains once the grace
 * period is over and stop the sessions; and whether the runtime is shutting down, which refuses
 * new runs.
 *
 * @module
 * @internal
 */
import { createActor, type InspectionEvent } from 'xstate';
import { CancelMode, type CancelRequest } from '../../machines/cancel-request.js';
import { runtimeMachine } from '../../machines/runtime.machine.js';
import type { Clock } from '../clock.js';
import type { RunExecutor } from '../run/run-executor.js';
import type { SessionHost } from '../session/session-host.js';
import { parseOptions } from '../validation.js';
import { shutdownSchema } from './runtime-options.js';
import type { SessionEviction } from './session-eviction.js';

const shutdownRequest = (reason: string): CancelRequest => ({
  mode: CancelMode.Immediate,
  deadlineAt: undefined,
  recursive: true,
  cause: 'shutdown',
  reason,
  initiator: 'shutdown',
});

/**
 * Starts a runtime's runtime machine, made once per runtime.
 *
 * @param executors - every run that has not settled, by run id
 * @param sessions - the session hosts (the shutdown stops and forgets them all)
 * @param eviction - the session eviction (stopped with them)
 * @returns `shuttingDown()`, `notifyIfAllSettled()` (a run settled), `noteAbandoned()` (a run's
 *   unwind timed out: during shutdown, it did not drain) and `runtime.shutdown`
 * @internal
 */
export function createRuntimeShutdown(
  clock: Clock,
  inspect: ((event: InspectionEvent) => void) | undefined,
  reportError: (error: unknown) => void,
  executors: ReadonlyMap<string, RunExecutor>,
  sessions: Map<string, SessionHost>,
  eviction: SessionEviction,
) {
  const eachLive = (act: (run: RunExecutor) => void) => {
    for (const run of [...executors.values()]) if (executors.has(run.id)) act(run);
  };
  // The runtime machine's effects on runs happen one microtask after its transition (in order),
  // never inside it: a run that takes a cancel spawns, stops and tells its children in its own
  // step, and XState's actions must not drive other actors imperatively.
  const afterTransition = (effect: () => void) => () => queueMicrotask(effect);
  const runtimeActor = createActor(
    runtimeMachine.provide({
      actions: {
        cancelWaitingRuns: afterTransition(() =>
          eachLive((run) => {
            if (run.status === 'CREATED' || run.status === 'QUEUED') {
              run.cancelWith(shutdownRequest('runtime shutdown'));
            }
          }),
        ),
        interruptRunningRuns: afterTransition(() =>
          eachLive((run) => {
            if (run.status === 'RUNNING') run.interruptWith('runtime shutdown', 'shutdown');
          }),
        ),
        cancelRemainingRuns: afterTransition(() =>
          eachLive((run) => run.cancelWith(shutdownRequest('shutdown grace period over'))),
        ),
        // Runs during the transition into draining/forcing: the snapshot still says accepting.
        checkSettled: () => {
          if (executors.size === 0) {
            runtimeActor.send({ type: 'runtime.all_settled', abandoned: abandonedDuringShutdown });
          }
        },
        stopSessions: () => {
          eviction.stop();
          for (const host of sessions.values()) host.actor.stop();
          sessions.clear();
        },
      },
    }),
    { clock, inspect },
  );
  runtimeActor.subscribe({ error: reportError });
  runtimeActor.start();
  // The runtime machine is flat: its value is the state name (no `matches` on the hot path).
  const shuttingDown = () => closing || runtimeActor.getSnapshot().value !== 'accepting';
  let abandonedDuringShutdown = false;
  /** shutdown() was called. */
  let closing = false;

  function notifyIfAllSettled(): void {
    if (executors.size === 0 && shuttingDown() && runtimeActor.getSnapshot().status === 'active') {
      runtimeActor.send({ type: 'runtime.all_settled', abandoned: abandonedDuringShutdown });
    }
  }

  /** A run's unwind timed out: during shutdown, the shutdown did not drain. */
  const noteAbandoned = (): void => {
    if (shuttingDown()) abandonedDuringShutdown = true;
  };

  const shutdownResult = new Promise<{ drained: boolean }>((resolve) => {
    runtimeActor.subscribe({
      complete: () => resolve({ drained: runtimeActor.getSnapshot().output?.drained ?? false }),
    });
  });

  const shutdown = (shutdownOptions: { graceMs?: number } = {}): Promise<{ drained: boolean }> => {
    const { graceMs } = parseOptions(shutdownSchema, shutdownOptions, 'options');
    if (runtimeActor.getSnapshot().status === 'active') {
      // Set first: the runtime machine's draining entry actions run before its snapshot says
      // so, and a listener they trigger must not prepare a new run.
      closing = true;
      runtimeActor.send({ type: 'runtime.shutdown', graceMs: graceMs ?? 10_000 });
    }
    return shutdownResult;
  };

  return { shuttingDown, notifyIfAllSettled, noteAbandoned, shutdown };
}
