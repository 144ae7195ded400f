/**
 * What a TurnLoop checkpoint holds, built from the loop machine's snapshot: the items in hand,
 * the durable part of the persisted snapshot, and the envelope (docs/architecture.md,
 * "Checkpoints and stores").
 *
 * @module
 */
import type { SnapshotFrom } from 'xstate';
import type { turnLoopMachine } from '../../machines/turn-loop.machine.js';
import type {
  ResumeState,
  SaveCheckpointInput,
  TurnLoopContext,
} from '../../machines/turn-loop.types.js';
import { checkpointFormat, checkpointVersion, type PersistedLoopSnapshot } from './checkpoint.js';
import type { CheckpointDraft } from './checkpoint-keeper.js';
import { flattenView, viewOf, type ItemView } from './item-view.js';

type LoopSnapshot = SnapshotFrom<typeof turnLoopMachine>;

/** Where every item of a live loop is, were it to stop now. @internal */
export interface ItemsInHand {
  /** A pending resume's unhandled items, a planning turn's taken items, then the buffer. */
  readonly unhandled: unknown[];
  /** A pending resume's interrupted items, or the running turn's consumed ones. */
  readonly interrupted: unknown[];
  /** The pending resume (also one a planning turn took). */
  readonly resume: ResumeState | undefined;
}

/** The pending resume of a live loop (also one a planning turn took). */
const pendingResume = (context: TurnLoopContext): ResumeState | undefined =>
  context.resume ?? (context.turn?.plan === undefined ? context.turn?.resume : undefined);

/**
 * The unhandled items of a live loop as a view of the arrays that hold them (O(1) in the items:
 * nothing is copied): a pending resume's unhandled items, a planning turn's taken items, the
 * re-offered preempted items, then the buffer.
 */
function unhandledView(context: TurnLoopContext): ItemView {
  const turn = context.turn;
  const unplanned = turn?.plan === undefined;
  return viewOf([
    pendingResume(context)?.unhandled,
    unplanned ? turn?.takenRequeued : undefined,
    unplanned ? turn?.taken : undefined,
    context.requeued,
    context.buffer,
  ]);
}

/** A pending resume's interrupted items, or the running turn's consumed ones. */
const interruptedItems = (context: TurnLoopContext, resume: ResumeState | undefined): unknown[] => [
  ...(resume?.interrupted ?? []),
  ...(context.turn?.plan?.consumed ?? []),
];

/**
 * The items of a live loop, each placed once: a planned turn's remaining items are back in the
 * buffer and its consumed ones are interrupted; an unplanned turn's taken items are unhandled.
 *
 * @internal
 */
export function itemsInHand(context: TurnLoopContext): ItemsInHand {
  const resume = pendingResume(context);
  return {
    unhandled: flattenView(unhandledView(context)),
    interrupted: interruptedItems(context, resume),
    resume,
  };
}

/**
 * The loop's persisted snapshot without its items (they go in the envelope) and without its
 * turn child: built from a slimmed snapshot, so that persisting never walks the items (XState
 * walks the whole context looking for actor references).
 *
 * @internal
 */
export function durableSnapshot(
  machine: typeof turnLoopMachine,
  snapshot: LoopSnapshot,
): PersistedLoopSnapshot {
  const { context } = snapshot;
  const slim: TurnLoopContext = {
    ...context,
    buffer: [],
    requeued: [],
    dropped: [],
    delayed: { seq: context.delayed.seq, pending: [] },
    turn: undefined,
    resume: undefined,
    lastPush: undefined,
    ending: undefined,
    exit: undefined,
  };
  const persisted = machine.getPersistedSnapshot({
    ...snapshot,
    context: slim,
    children: {},
  }) as unknown as Record<string, unknown>;
  return {
    ...persisted,
    status: String(persisted.status),
    value: persisted.value,
    context: persisted.context as PersistedLoopSnapshot['context'],
  };
}

/** What a save is given: a {@link SaveCheckpointInput} whose unhandled items are a view. @internal */
export type SaveDraftInput = Omit<SaveCheckpointInput, 'unhandled'> & {
  readonly unhandled: ItemView;
};

/** The envelope of a save. @internal */
export function toCheckpoint(
  input: SaveDraftInput,
  loop: PersistedLoopSnapshot,
  savedAt: number,
): CheckpointDraft {
  return {
    format: checkpointFormat,
    version: checkpointVersion,
    kind: input.kind,
    loop,
    unhandled: input.unhandled,
    interrupted: input.interrupted,
    ...(input.agentState === undefined ? {} : { agentState: input.agentState }),
    ...(input.suspension === undefined ? {} : { suspension: input.suspension }),
    savedAt,
  };
}

/**
 * What `loop.checkpoint()` saves of a live loop: as if it stopped now (the running turn's items
 * interrupted, with its agent's latest safe-point state). O(1) in the unhandled items.
 *
 * @param agentState - the running turn's latest safe-point state
 * @internal
 */
export function liveSaveInput(context: TurnLoopContext, agentState: unknown): SaveDraftInput {
  const resume = pendingResume(context);
  const unhandled = unhandledView(context);
  const interrupted = interruptedItems(context, resume);
  const pending = resume?.suspension;
  return {
    kind: resume !== undefined || interrupted.length > 0 ? 'mid-turn' : 'between-turns',
    unhandled,
    interrupted,
    agentState: resume === undefined ? agentState : resume.agentState,
    suspension:
      pending === undefined
        ? undefined
        : { turnId: pending.turnId, runId: pending.runId, request: pending.request },
  };
}
