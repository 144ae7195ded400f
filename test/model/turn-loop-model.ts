/**
 * turn-loop.machine as a test model.
 *
 * - Every event the machine knows, with payloads computed from the snapshot: pushes of named
 *   items (plain or with a preempt), `run`, stops of each mode, the idle clock, and the outputs
 *   and errors of its invoked logic (checkpoint load, save, delete), and what the `turn` logic
 *   reports: planned and started (genInput, then prepareAgent, then the run), skipped (genInput
 *   consumed nothing), failed (genInput or prepareAgent threw), and how the run ended.
 * - An environment next to each snapshot holds the running turn as the turn machine
 *   (`machines/turn.machine.ts`) has it, stepped purely with the cancels the loop sends it:
 *   who cancelled is its `cancel` region, read as the runtime reads it. Beside it, whether a stop
 *   cancelled immediately, so that only turn endings the runtime can produce are generated.
 * - The loop appends to `buffer` and `dropped` in place; they are copied before each step.
 */
import { transition, type ActorLogic, type StateValue } from 'xstate';
import { CancelMode } from '../../machines/cancel-request.js';
import { turnMachine } from '../../machines/turn.machine.js';
import { turnLoopMachine } from '../../machines/turn-loop.machine.js';
import type {
  LoadedCheckpoint,
  TurnCancelCommand,
  TurnCanceller,
  TurnEnding,
  TurnLoopEvent,
  TurnLoopInput,
  TurnPlan,
} from '../../machines/turn-loop.types.js';
import { getEnvironment, getStatePaths, withReactions } from '../../src/testing/index.js';

export type LoopSnapshot = ReturnType<typeof turnLoopMachine.getInitialSnapshot>;

export const IDLE_MS = 50;
const RUN_ID = 'run';
export const loopInput: TurnLoopInput = {
  hasStore: true,
  requeuePreempted: false,
  ownerId: 'alice',
  sessionId: 'loop',
  loopId: 'cp',
};

type TurnSnapshot = ReturnType<typeof turnMachine.getInitialSnapshot>;

/** What the world knows beside the machine. */
interface LoopEnv {
  /** Clock time (ms): moves only when the idle clock is let fire. */
  readonly now: number;
  /** Pushes sent (the loop's push ids). */
  readonly pushes: number;
  /** The running turn, as the turn machine has it (`undefined` while none runs). */
  readonly turn: TurnSnapshot | undefined;
  /** A stop cancelled the running turn's run immediately. */
  readonly immediate: boolean;
}

const initialEnv: LoopEnv = { now: 0, pushes: 0, turn: undefined, immediate: false };

const invoke = {
  load: 'xstate.done.actor.loadCheckpoint',
  discard: 'xstate.done.actor.discardCheckpoint',
  save: 'xstate.done.actor.saveCheckpoint',
  delete: 'xstate.done.actor.deleteCheckpoint',
} as const;

/** The turn machine of a turn whose run has started with `plan`, nobody having cancelled it. */
function startedTurn(turnId: string, plan: TurnPlan): TurnSnapshot {
  return turnMachine.resolveState({
    value: { progress: 'running', cancel: 'uncancelled' },
    context: {
      input: { kind: 'input', turnId, items: plan.consumed, preemptedItems: [] },
      plan,
      runId: RUN_ID,
      startError: undefined,
      settlement: undefined,
      handled: undefined,
      lastCancel: undefined,
    },
  });
}

/** Who of the loop cancelled the turn's run, as the turn machine's `cancel` region says. */
function cancelledBy(turn: TurnSnapshot | undefined): TurnCanceller | undefined {
  if (turn?.matches({ cancel: 'stopped' })) return 'stop';
  if (turn?.matches({ cancel: 'preempted' })) return 'preempt';
  return undefined;
}
const failed = (done: string) => done.replace('xstate.done.', 'xstate.error.');

/** Errors the model's events carry (the real ones are compared by presence). */
export const storeError = new Error('store failed');
export const planError = new Error('genInput failed');
export const turnError = new Error('the turn failed');

/** Checkpoints the store can hold when the loop starts. */
const checkpoints: Record<'between' | 'mid', LoadedCheckpoint> = {
  between: {
    kind: 'between-turns',
    unhandled: ['c1'],
    interrupted: [],
    agentState: undefined,
    turnSeq: 3,
  },
  mid: {
    kind: 'mid-turn',
    unhandled: ['c2'],
    interrupted: ['c1'],
    agentState: undefined,
    turnSeq: 3,
  },
};

/** A loop event with a name for test titles; `kind` says how the adapter realizes it. */
export type LoopStep = TurnLoopEvent & { readonly label?: string };

const copy = (snapshot: LoopSnapshot): LoopSnapshot => ({
  ...snapshot,
  context: {
    ...snapshot.context,
    buffer: [...snapshot.context.buffer],
    dropped: [...snapshot.context.dropped],
  },
});

/** The turn-loop machine composed with the runtime's answer and the environment. */
export const turnLoopModel: ActorLogic<LoopSnapshot, TurnLoopEvent, TurnLoopInput> = withReactions<
  typeof turnLoopMachine,
  LoopEnv
>(
  turnLoopMachine,
  // The runtime answers nothing synchronously: the turn logic plans first, which the path drives.
  () => undefined,
  {
    copy,
    environment: {
      initial: initialEnv,
      update(env, { event, actions, previous }) {
        let next = env;
        if (event.type === 'loop.push') next = { ...next, pushes: next.pushes + 1 };
        if (event.type === 'loop.idle_due' && previous.matches({ stop: { idleWaiting: 'idle' } })) {
          next = { ...next, now: next.now + IDLE_MS };
        }
        if (event.type === 'turn.ended') next = { ...next, turn: undefined, immediate: false };
        if (event.type === 'turn.started' && previous.matches({ loop: { turn: 'planning' } })) {
          next = { ...next, turn: startedTurn(event.turnId, event.plan), immediate: false };
        }
        for (const action of actions) {
          const command = (action.params as { event?: TurnCancelCommand } | undefined)?.event;
          if (action.type !== 'xstate.sendTo' || command?.type !== 'turn.cancel') continue;
          if (next.turn === undefined) continue;
          // The turn machine takes the cancel; here every cancel reaches the run (the model's
          // turn runs alone in its session), so the turn's `cancel` region says who was first.
          const [turn] = transition(turnMachine, next.turn, command);
          const immediate = next.immediate || command.request.mode === CancelMode.Immediate;
          next = { ...next, turn, immediate };
        }
        return next;
      },
    },
  },
);

const envOf = (snapshot: LoopSnapshot): LoopEnv => getEnvironment<LoopEnv>(snapshot) ?? initialEnv;

/** The plan genInput answers: the first offered item is consumed, or none. */
function planFor(snapshot: LoopSnapshot, consume: boolean): TurnPlan {
  const turn = snapshot.context.turn;
  const offered =
    turn === undefined
      ? []
      : turn.kind === 'resume'
        ? [...(turn.resume?.interrupted ?? []), ...(turn.resume?.unhandled ?? []), ...turn.taken]
        : [...turn.takenRequeued, ...turn.taken];
  return consume
    ? { input: offered[0], consumed: offered.slice(0, 1), remaining: offered.slice(1), dropped: [] }
    : { input: undefined, consumed: [], remaining: offered, dropped: [] };
}

const ending = (
  status: TurnEnding['status'],
  env: LoopEnv,
  error: unknown = undefined,
): TurnEnding => ({
  status,
  error,
  cancel:
    status === 'CANCELLED'
      ? {
          kind: 'turn-cancelled',
          runId: RUN_ID,
          turnId: 'turn',
          cause: 'cancel',
          reason: undefined,
          escalated: false,
        }
      : undefined,
  agentState: undefined,
  cancelledBy: status === 'CANCELLED' ? cancelledBy(env.turn) : undefined,
  agentStarted: true, // the model's turn runs at once: its session has no other run
});

/** Every event, with payloads for this snapshot (`filterEvents` keeps the realizable ones). */
export function loopEvents(snapshot: LoopSnapshot): LoopStep[] {
  const env = envOf(snapshot);
  const item = `i${env.pushes + 1}`;
  const push = (preempt: boolean): LoopStep => ({
    type: 'loop.push',
    pushId: env.pushes + 1,
    item,
    at: env.now,
    preempt: preempt
      ? { mode: CancelMode.AnySafePoint, timeoutMs: undefined, delayMs: undefined }
      : undefined,
    label: preempt ? `push ${item} (preempt)` : `push ${item}`,
  });
  const stop = (
    mode: 'afterTurn' | 'graceful' | 'immediate',
    extra: { idleForMs?: number; skipCheckpoint?: boolean } = {},
  ): LoopStep => ({
    type: 'loop.stop',
    at: env.now,
    call: {
      mode,
      graceMs: undefined,
      idleForMs: extra.idleForMs,
      cause: undefined,
      skipCheckpoint: extra.skipCheckpoint ?? false,
      initiator: 'user',
    },
    label: `stop ${mode}${extra.idleForMs === undefined ? '' : ` when idle ${extra.idleForMs}ms`}${extra.skipCheckpoint === true ? ' skipCheckpoint' : ''}`,
  });
  const turnId = snapshot.context.turn?.turnId ?? 'turn-0';
  const ended = (e: TurnEnding, label: string): LoopStep => ({
    type: 'turn.ended',
    turnId,
    ending: e,
    label,
  });
  const done = (type: string, output: unknown, label: string) =>
    ({ type, output, label }) as unknown as LoopStep;
  const error = (type: string, label: string) =>
    ({ type: failed(type), error: storeError, label }) as unknown as LoopStep;
  return [
    push(false),
    push(true),
    { type: 'loop.run', label: 'run' },
    stop('afterTurn'),
    stop('graceful'),
    stop('immediate'),
    stop('immediate', { skipCheckpoint: true }),
    stop('afterTurn', { idleForMs: IDLE_MS }),
    { type: 'loop.idle_due', label: `idle ${IDLE_MS}ms` },
    { type: 'loop.preempt_due', id: 1, label: 'delayed preempt due' },
    done(invoke.load, undefined, 'store empty'),
    done(invoke.load, checkpoints.between, 'between-turns checkpoint loaded'),
    done(invoke.load, checkpoints.mid, 'mid-turn checkpoint loaded'),
    error(invoke.load, 'load failed'),
    {
      type: 'turn.started',
      turnId,
      runId: RUN_ID,
      plan: planFor(snapshot, true),
      label: 'genInput consumes one, agent prepared, run started',
    },
    {
      type: 'turn.skipped',
      turnId,
      plan: planFor(snapshot, false),
      label: 'genInput consumes none',
    },
    { type: 'turn.failed', turnId, error: planError, label: 'genInput throws' },
    // genInput answers (the adapter needs its plan), then prepareAgent throws.
    {
      type: 'turn.failed',
      turnId,
      error: storeError,
      plan: planFor(snapshot, true),
      label: 'prepareAgent throws',
    } as LoopStep,
    ended(ending('COMPLETED', env), 'agent completes'),
    ended(ending('FAILED', env, turnError), 'agent fails'),
    ended(ending('CANCELLED', env), env.immediate ? 'agent unwinds' : 'agent reaches a safe point'),
    done(invoke.discard, undefined, 'used checkpoint deleted'),
    error(invoke.discard, 'delete failed'),
    done(invoke.save, undefined, 'checkpoint saved'),
    error(invoke.save, 'save failed'),
    done(invoke.delete, undefined, 'checkpoint deleted'),
    error(invoke.delete, 'delete failed'),
  ];
}

/** What the runtime can produce in each state. */
export function loopEventIsRealizable(
  maxPushes: number,
): (snapshot: LoopSnapshot, event: LoopStep) => boolean {
  return (snapshot, event) => {
    if (snapshot.status !== 'active') return false;
    const env = envOf(snapshot);
    const at = (state: Parameters<LoopSnapshot['matches']>[0]) => snapshot.matches(state);
    switch (event.type) {
      case 'loop.push':
        return env.pushes < maxPushes;
      case 'loop.run':
      case 'loop.stop':
        return true;
      case 'loop.idle_due':
        return at({ stop: { idleWaiting: 'idle' } });
      case 'loop.preempt_due': // no delayed preempts in this model
      case 'turn.started':
      case 'turn.skipped':
      case 'turn.failed': // from planning (runtime.prepare does not fail here)
        return at({ loop: { turn: 'planning' } });
      case 'turn.ended': {
        if (!at({ loop: { turn: 'running' } })) return false;
        const { status } = event.ending;
        if (env.immediate) return status === 'CANCELLED';
        if (status === 'CANCELLED') return cancelledBy(env.turn) !== undefined;
        return true;
      }
      default: {
        const type = (event as { type: string }).type;
        const name = type.replace('xstate.error.', 'xstate.done.');
        if (name === invoke.load) return at({ loop: 'loading' });
        if (name === invoke.discard) return at({ loop: 'discarding' });
        if (name === invoke.save) return at({ loop: { exiting: 'saving' } });
        if (name === invoke.delete) return at({ loop: { exiting: 'deleting' } });
        return false;
      }
    }
  };
}

const leaves = (value: StateValue): string => {
  const paths = getStatePaths(value);
  return paths.filter((p) => !paths.some((o) => o.startsWith(`${p}.`))).join('|');
};

export const describeLoopState = (snapshot: LoopSnapshot): string => {
  const { buffer, turn } = snapshot.context;
  const items = [
    ...(turn?.plan?.consumed ?? []).map((i) => `*${String(i)}`),
    ...buffer.map(String),
  ];
  return `${leaves(snapshot.value)}${items.length > 0 ? `[${items.join(',')}]` : ''}`;
};

export const describeLoopEvent = (event: LoopStep): string => event.label ?? event.type;

/** The events a user, a timer or a turn's run can send at any time (not an invocation's result). */
export const isExternalEvent = (event: LoopStep): boolean =>
  !(event.type as string).startsWith('xstate.');

const present = (value: unknown) => (value === undefined ? undefined : 'set');

/** What a loop actor's snapshot shows, without ids, errors' identities or functions. */
export function projectLoop(snapshot: LoopSnapshot): unknown {
  const c = snapshot.context;
  return {
    state: leaves(snapshot.value),
    status: snapshot.status,
    ran: c.ran,
    buffer: [...c.buffer],
    requeued: c.requeued,
    dropped: [...c.dropped],
    turnSeq: c.turnSeq,
    needsPlanning: c.needsPlanning,
    closed: c.closed,
    stop: c.stop && { mode: c.stop.mode, idleForMs: c.stop.idleForMs, skip: c.stop.skipCheckpoint },
    turn: c.turn && {
      turnId: c.turn.turnId,
      kind: c.turn.kind,
      phase: c.turn.phase,
      taken: c.turn.taken,
      plan: c.turn.plan && { consumed: c.turn.plan.consumed, remaining: c.turn.plan.remaining },
      pendingPreempt: c.turn.pendingPreempt,
      waitingAcks: c.turn.waitingAcks,
      run: present(c.turn.runId),
    },
    resume: c.resume,
    lastPush: c.lastPush && {
      pushId: c.lastPush.pushId,
      outcome: typeof c.lastPush.outcome === 'string' ? c.lastPush.outcome : 'error',
    },
    ending: c.ending && {
      cause: c.ending.cause,
      reason: present(c.ending.reason),
      interrupted: c.ending.interrupted,
    },
    exit: c.exit && {
      cause: c.exit.cause,
      reason: present(c.exit.reason),
      unhandled: c.exit.unhandled,
      interrupted: c.exit.interrupted,
      midTurn: c.exit.midTurn,
    },
    checkpoint: {
      loaded: c.checkpoint.loaded,
      attempted: c.checkpoint.attempted,
      error: present(c.checkpoint.error),
    },
  };
}

/**
 * The state identity that bounds the graph: the state value and the facts that change what can
 * happen next (whether items wait, the turn's kind, a pending preempt, the stop, the
 * checkpoint bookkeeping, what reached the running turn), not the items themselves.
 */
export function serializeLoopState(snapshot: LoopSnapshot): string {
  const c = snapshot.context;
  const env = envOf(snapshot);
  return JSON.stringify([
    snapshot.value,
    snapshot.status,
    c.ran,
    Math.min(c.buffer.length, 2),
    c.turn?.kind,
    c.turn?.plan === undefined ? undefined : c.turn.plan.consumed.length,
    c.turn?.pendingPreempt !== undefined,
    c.stop?.mode,
    c.stop?.idleForMs !== undefined,
    c.stop?.skipCheckpoint,
    c.checkpoint.loaded,
    c.checkpoint.attempted,
    c.resume !== undefined,
    c.ending?.cause,
    c.exit?.midTurn,
    cancelledBy(env.turn),
    env.immediate,
  ]);
}
