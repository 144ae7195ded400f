/**
 * The run machine as a test model: the events the real runtime can produce, the state identity
 * that bounds the graph, and how a machine snapshot maps to what a user of the runtime sees.
 */
import type { StateValue } from 'xstate';
import { CancelMode, type CancelRequest } from '../../machines/cancel-request.js';
import { runMachine } from '../../machines/run.machine.js';
import type { EventFromLogic } from 'xstate';

/** Every event the run machine takes, its children's ends included. */
export type RunModelEvent = EventFromLogic<typeof runMachine>;
type RunMachineEvent = RunModelEvent;
import { isCancellation, RunCancelledError, type RunOutcome } from '../../src/index.js';
import { getStatePaths } from '../../src/testing/index.js';

export type RunSnapshot = ReturnType<typeof runMachine.getInitialSnapshot>;

export const UNWIND_MS = 100;
export const TIMEOUT_MS = 1_000;
const ESCALATE_AT = 500;
export const runInput = {
  runId: 'r',
  ownerId: 'alice',
  sessionId: 's',
  unwindTimeoutMs: UNWIND_MS,
  timeoutMs: TIMEOUT_MS,
  maxNestedRuns: 4,
};

/** One shared error object, so that the model's `context.error` and the real one are identical. */
const agentError = new Error('agent failed');
/** A cancellation the agent throws itself (a nested run's, say) while a safe-point cancel waits. */
const agentCancellation = new RunCancelledError('nested', 'cancel', 'nested run cancelled');

/** The run machine with the runtime's pure guard (an agent error that is a cancellation). */
export const runModelMachine = runMachine.provide({
  guards: {
    isCancellationError: ({ event }) => event.type === 'agent.error' && isCancellation(event.error),
  },
});
const unwindEvent = { type: 'xstate.after.unwindTimeout.run.CANCELLED.unwinding' } as const;

const request = (mode: number, deadlineAt?: number): CancelRequest => ({
  mode,
  deadlineAt,
  recursive: mode === CancelMode.Immediate,
  cause: 'cancel',
  reason: undefined,
  initiator: 'user',
});

/** Every event the run machine knows, with the payloads the tests use (times are absolute ms). */
export const runEvents: readonly RunMachineEvent[] = [
  { type: 'run.start', at: 0, verdict: 'queued' },
  // Started into a session with a free slot: admitted in the same step.
  { type: 'run.start', at: 0, verdict: 'admitted' },
  { type: 'run.admit' },
  { type: 'run.cancel', request: request(CancelMode.Immediate) },
  { type: 'run.cancel', request: request(CancelMode.AfterChatModel) },
  { type: 'run.cancel', request: request(CancelMode.AfterToolCalls, ESCALATE_AT) },
  { type: 'run.interrupt', message: 'wrap up' },
  { type: 'run.safe_point', kind: 'afterChatModel' },
  { type: 'run.safe_point', kind: 'afterToolCalls' },
  { type: 'run.deadline' },
  { type: 'run.cancel_deadline' },
  { type: 'agent.done', output: 'out' },
  { type: 'agent.error', error: agentError },
  { type: 'agent.error', error: agentCancellation },
  // The delayed event of `after: { unwindTimeout }`: it is an event of the machine like any other.
  unwindEvent as unknown as RunMachineEvent,
];

/** The run's status (terminal at once; the actor's final state is `settled`). */
export const topOf = (snapshot: RunSnapshot): string => snapshot.context.status;

const modeName = (mode: number): string =>
  ({ 0: 'immediate', 1: 'afterChatModel', 2: 'afterToolCalls', 3: 'anySafePoint' })[mode] ??
  String(mode);

export function describeRunEvent(event: RunMachineEvent): string {
  switch (event.type) {
    case 'run.cancel': {
      const { mode, deadlineAt } = event.request;
      return `run.cancel(${modeName(mode)}${deadlineAt === undefined ? '' : `,escalate@${deadlineAt}`})`;
    }
    case 'run.start':
      return event.verdict === 'admitted' ? 'run.start(admitted)' : 'run.start';
    case 'run.safe_point':
      return `run.safe_point(${event.kind})`;
    case 'run.interrupt':
      return 'run.interrupt';
    case 'agent.error':
      return event.error === agentCancellation ? 'agent.error(cancellation)' : 'agent.error';
    default:
      return event.type.startsWith('xstate.after.') ? 'unwind timeout' : event.type;
  }
}

const leaf = (value: StateValue): string => {
  const paths = getStatePaths(value);
  return paths.filter((p) => !paths.some((o) => o.startsWith(`${p}.`))).join('|');
};

/** The state, and for the final state the status it settled in: `settled(COMPLETED)`. */
export const describeRunState = (snapshot: RunSnapshot): string =>
  snapshot.status === 'done'
    ? `settled(${snapshot.context.status}${snapshot.context.executor === 'abandoned' ? ',abandoned' : ''})`
    : leaf(snapshot.value);

/** Whether the agent is executing in this state (so it can reach a safe point or settle). */
const executing = (snapshot: RunSnapshot): boolean =>
  topOf(snapshot) === 'RUNNING' || snapshot.matches({ CANCELLED: 'unwinding' });

/**
 * What the real runtime can produce in each state: a deadline only after `run.start` armed one
 * and before an earlier escalation fires; an escalation only while one is armed; agent results
 * and safe points only while the agent executes; the unwind timeout only while unwinding.
 */
export function runEventIsRealizable(snapshot: RunSnapshot, event: RunMachineEvent): boolean {
  const top = topOf(snapshot);
  const { context } = snapshot;
  const escalationArmed =
    snapshot.matches('cancelling') && context.cancel?.deadlineAt !== undefined;
  switch (event.type) {
    case 'run.start':
      return top === 'CREATED';
    case 'run.admit':
      return top === 'QUEUED';
    case 'run.safe_point':
    case 'agent.done':
    case 'agent.error':
      return executing(snapshot);
    case 'run.deadline':
      return (top === 'QUEUED' || top === 'RUNNING') && !escalationArmed;
    case 'run.cancel_deadline':
      return escalationArmed;
    case 'run.cancel':
    case 'run.interrupt':
      return true;
    default:
      return snapshot.matches({ CANCELLED: 'unwinding' }); // the unwind timeout
  }
}

/** The state identity: the value plus the context fields that change what can happen next. */
export function serializeRunState(snapshot: RunSnapshot): string {
  const c = snapshot.context;
  return JSON.stringify([
    snapshot.value,
    c.cancel?.mode,
    c.cancel?.deadlineAt,
    c.cancel?.recursive,
    c.interruptRequested,
    c.executor,
    c.cause,
    c.escalated,
    c.output,
    c.error === undefined ? undefined : 'error',
  ]);
}

/** The run actor reached its final state: its agent (and any nested run) settled. */
export const isSettledState = (snapshot: RunSnapshot): boolean => snapshot.status === 'done';

/**
 * The outcome `run.termination` must resolve with once the run settled in this state, written
 * from the README's rules (not read from the machine's output).
 */
export function outcomeOf(snapshot: RunSnapshot): RunOutcome | undefined {
  if (!isSettledState(snapshot)) return undefined;
  const c = snapshot.context;
  if (c.status === 'COMPLETED') {
    return { status: 'COMPLETED', output: c.output, interrupted: c.interruptRequested };
  }
  if (c.status === 'FAILED') return { status: 'FAILED', error: c.error };
  return {
    status: 'CANCELLED',
    cause: c.cause ?? 'cancel',
    reason: c.cancel?.reason,
    escalated: c.escalated,
    unsettled: c.executor === 'abandoned',
  };
}

/**
 * Whether the run's AbortSignal fired: every way into CANCELLED while the agent executes aborts
 * it, except a safe-point cancel that landed at its safe point.
 */
export function signalAbortedIn(snapshot: RunSnapshot): boolean {
  const c = snapshot.context;
  if (c.executor === 'idle' || topOf(snapshot) !== 'CANCELLED') return false;
  const landedAtSafePoint =
    c.cause === 'cancel' && !c.escalated && c.cancel !== undefined && c.cancel.mode !== 0;
  return !landedAtSafePoint;
}
