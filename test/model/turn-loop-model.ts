/**
 * turn-loop.machine as a test model.
 *
 * - Every event the machine knows, with payloads computed from the snapshot: pushes of named
 *   items (plain or with a preempt), `run`, stops of each mode, the idle clock, and the outputs
 *   and errors of its invoked logic (checkpoint load, save, delete), and what the `turn` logic
 *   reports: planned and started (genInput, then prepareAgent, then the run), skipped (genInput
 *   consumed nothing), failed (genInput or prepareAgent threw), and how the run ended.
 * - An environment next to each snapshot says what reached the running turn's run (a preempt
 *   that contributed, a safe-point or immediate stop cancel), so that only turn endings the
 *   runtime can produce are generated, with the flags it would report.
 * - The loop appends to `buffer` and `dropped` in place; they are copied before each step.
 */
import type { ActorLogic, StateValue } from 'xstate';
import { CancelMode } from '../../machines/cancel-request.js';
import {
  turnLoopMachine,
  type LoadedCheckpoint,
  type TurnCancelCommand,
  type TurnEnding,
  type TurnLoopEvent,
  type TurnLoopInput,
  type TurnPlan,
} from '../../machines/turn-loop.machine.js';
import { TurnCancelledError } from '../../src/index.js';
import { getEnvironment, getStatePaths, withReactions } from '../../src/testing/index.js';

export type LoopSnapshot = ReturnType<typeof turnLoopMachine.getInitialSnapshot>;

export const IDLE_MS = 50;
const RUN_ID = 'run';
export const loopInput: TurnLoopInput = { hasStore: true, requeuePreempted: false };

/** What the world knows beside the machine. */
interface LoopEnv {
  /** Clock time (ms): moves only when the idle clock is let fire. */
  readonly now: number;
  /** Pushes sent (the loop's push sequence) and preempt pushes (its ack sequence). */
  readonly pushes: number;
  readonly acks: number;
  /** What reached the running turn's run. */
  readonly preempt: 'none' | 'contributed';
  readonly stop: 'none' | 'safePoint' | 'immediate';
}

const initialEnv: LoopEnv = { now: 0, pushes: 0, acks: 0, preempt: 'none', stop: 'none' };

const invoke = {
  load: 'xstate.done.actor.0.turnLoop.loop.loading',
  discard: 'xstate.done.actor.0.turnLoop.loop.discarding',
  save: 'xstate.done.actor.0.turnLoop.loop.exiting.saving',
  delete: 'xstate.done.actor.0.turnLoop.loop.exiting.deleting',
} as const;
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
        if (event.type === 'loop.push' && !event.token.withdrawn) {
          next = {
            ...next,
            pushes: next.pushes + 1,
            acks: next.acks + (event.ackId === undefined ? 0 : 1),
          };
        }
        if (event.type === 'loop.idle_due' && previous.matches({ stop: { idleWaiting: 'idle' } })) {
          next = { ...next, now: next.now + IDLE_MS };
        }
        if (event.type === 'turn.ended') next = { ...next, preempt: 'none', stop: 'none' };
        for (const action of actions) {
          const params = action.params as { src?: unknown; event?: TurnCancelCommand } | undefined;
          if (action.type === 'xstate.spawnChild' && params?.src === 'turn') {
            next = { ...next, preempt: 'none', stop: 'none' };
          }
          const command = params?.event;
          if (action.type !== 'xstate.sendTo' || command?.type !== 'turn.cancel') continue;
          if (command.by === 'preempt') {
            // A preempt contributes when it is the first request to reach the run.
            if (next.preempt === 'none' && next.stop === 'none')
              next = { ...next, preempt: 'contributed' };
          } else if (command.request.mode === CancelMode.Immediate) {
            next = { ...next, stop: 'immediate' };
          } else if (next.stop === 'none') {
            next = { ...next, stop: 'safePoint' };
          }
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
  cancelError:
    status === 'CANCELLED'
      ? new TurnCancelledError(RUN_ID, 'turn', 'cancel', undefined, false)
      : undefined,
  agentState: undefined,
  preemptContributed: env.preempt === 'contributed',
  agentStarted: true, // the model's turn runs at once: its session has no other run
  endedByHandler: false,
});

/** Every event, with payloads for this snapshot (`filterEvents` keeps the realizable ones). */
export function loopEvents(snapshot: LoopSnapshot): LoopStep[] {
  const env = envOf(snapshot);
  const item = `i${env.pushes + 1}`;
  const push = (preempt: boolean): LoopStep => ({
    type: 'loop.push',
    token: { seq: env.pushes + 1, withdrawn: false },
    item,
    at: env.now,
    ackId: preempt ? env.acks + 1 : undefined,
    preempt: preempt
      ? { mode: CancelMode.AnySafePoint, timeoutMs: undefined, delayMs: undefined }
      : undefined,
    decide: undefined,
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
      at: env.now,
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
    ended(
      ending('CANCELLED', env),
      env.stop === 'immediate' ? 'agent unwinds' : 'agent reaches a safe point',
    ),
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
        if (env.stop === 'immediate') return status === 'CANCELLED';
        if (status === 'CANCELLED')
          return env.preempt === 'contributed' || env.stop === 'safePoint';
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
      seq: c.lastPush.seq,
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
    env.preempt,
    env.stop,
  ]);
}
