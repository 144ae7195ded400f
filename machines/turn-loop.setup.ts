/**
 * The TurnLoop machine's setup: its base (`turn-loop.base-setup.ts`: types, logic placeholders,
 * assigns and guards) extended with the actions that enqueue others: preempt delivery, pushes,
 * delayed preempts, the stop's cancel, a turn's run start and release. The chart in
 * `turn-loop.machine.ts` names them (docs/architecture.md, "TurnLoop"). Nothing here runs on its
 * own.
 *
 * @module
 */
import { enqueueActions } from 'xstate';
import { loopSetup } from './turn-loop.base-setup.js';
import {
  mergeDrafts,
  preemptCancelRequest,
  stopCancelRequest,
  toPreemptDraft,
} from './turn-loop.requests.js';
import { turnRelease } from './turn-loop.rules.js';
import type { PreemptDraft, TurnLoopContext } from './turn-loop.types.js';

/** The params of `deliverPreempt`: the preempt, and the pushes whose acks wait for it. */
interface PreemptDelivery {
  readonly draft: PreemptDraft;
  readonly pushIds: readonly number[];
}

// Actions that enqueue other named actions are typed against the ones declared before them.
const deliverySetup = loopSetup.extend({
  actions: {
    /**
     * Delivers a preempt to the current turn, the one place that does: a running turn gets the
     * cancel at once and the pushes' acks resolve; a turn still planning keeps it (merged with
     * any earlier one) until its run starts.
     */
    deliverPreempt: loopSetup.createAction(
      enqueueActions(({ context, enqueue }, params: unknown) => {
        const { draft, pushIds } = params as PreemptDelivery;
        const turn = context.turn;
        if (turn === undefined) return;
        if (turn.phase === 'running') {
          enqueue.sendTo('turn', {
            type: 'turn.cancel',
            request: preemptCancelRequest(draft),
            by: 'preempt',
          });
          if (pushIds.length > 0) enqueue({ type: 'settleAcks', params: pushIds });
          return;
        }
        enqueue.assign({
          turn: {
            ...turn,
            pendingPreempt: mergeDrafts(turn.pendingPreempt, draft),
            waitingAcks: [...turn.waitingAcks, ...pushIds],
          },
        });
      }),
    ),
  },
});

/** The loop machine's setup, with every named action, guard and logic placeholder. @internal */
export const turnLoopSetup = deliverySetup.extend({
  actions: {
    /**
     * Forgets the turn: its undelivered preempts found nothing to preempt. Its params, if any,
     * are more of the context to write in the same assign (each costs XState a snapshot copy),
     * the next turn's record among them.
     */
    releaseTurn: loopSetup.createAction(
      enqueueActions(({ context, enqueue }, params: unknown) => {
        const release = turnRelease(context, params as Partial<TurnLoopContext> | undefined);
        if (release === undefined) return;
        for (const id of release.stopped) enqueue.stopChild(id);
        enqueue.assign(release.patch);
        if (release.acks.length > 0) enqueue({ type: 'settleAcks', params: release.acks });
      }),
    ),

    /** Writes a decided push into the buffer and delivers its preempt (or arms its delay). */
    acceptPush: deliverySetup.createAction(
      enqueueActions(({ context, event, enqueue }) => {
        const receipt = context.lastPush;
        if (event.type !== 'loop.push' || receipt?.pushId !== event.pushId) return;
        if (receipt.outcome !== 'accepted') return;
        const { pushId, at } = event;
        // The hot path of a busy loop: one append in place, and no copy when nothing changes.
        context.buffer.push(event.item);
        if (!context.needsPlanning) enqueue.assign({ needsPlanning: true });
        const preempt = receipt.preempt;
        // No preempt: nothing to deliver (the runtime resolves such a push's ack when it answers).
        if (preempt === undefined) return;
        const turn = context.turn;
        if (turn === undefined) {
          // The loop is idle: nothing to preempt; the item runs next turn.
          enqueue({ type: 'settleAcks', params: [pushId] });
          return;
        }
        const draft = toPreemptDraft(preempt, at);
        if (preempt.delayMs !== undefined && preempt.delayMs > 0) {
          const id = context.delayed.seq + 1;
          const fireAt = at + preempt.delayMs;
          enqueue.assign({
            delayed: {
              seq: id,
              pending: [
                ...context.delayed.pending,
                { id, turnId: turn.turnId, fireAt, draft, pushId },
              ],
            },
          });
          enqueue.spawnChild('timer', {
            id: `preempt-${id}`,
            input: { at: fireAt, event: { type: 'loop.preempt_due', id } },
          });
          return;
        }
        enqueue({ type: 'deliverPreempt', params: { draft, pushIds: [pushId] } });
      }),
    ),

    refusePush: loopSetup.createAction(
      enqueueActions(({ context, event, enqueue }) => {
        const receipt = context.lastPush;
        if (event.type !== 'loop.push' || receipt?.pushId !== event.pushId) return;
        if (receipt.outcome !== 'accepted') return;
        enqueue.assign({ lastPush: { ...receipt, outcome: 'refused' } });
        enqueue({ type: 'settleAcks', params: [event.pushId] });
      }),
    ),

    /** A delayed preempt is due: delivered to its turn if that turn is still current. */
    firePreempt: deliverySetup.createAction(
      enqueueActions(({ context, event, enqueue }) => {
        if (event.type !== 'loop.preempt_due') return;
        const due = context.delayed.pending.find((d) => d.id === event.id);
        if (due === undefined) return;
        enqueue.assign({
          delayed: {
            seq: context.delayed.seq,
            pending: context.delayed.pending.filter((d) => d.id !== event.id),
          },
        });
        if (context.turn?.turnId !== due.turnId) {
          enqueue({ type: 'settleAcks', params: [due.pushId] });
          return;
        }
        enqueue({ type: 'deliverPreempt', params: { draft: due.draft, pushIds: [due.pushId] } });
      }),
    ),

    /** Sends the committed stop's cancel to a running turn (a no-op for `afterTurn`). */
    cancelForStop: loopSetup.createAction(
      enqueueActions(({ context, enqueue }) => {
        const turn = context.turn;
        const request = context.stop === undefined ? undefined : stopCancelRequest(context.stop);
        if (turn?.phase !== 'running' || request === undefined) return;
        enqueue.sendTo('turn', { type: 'turn.cancel', request, by: 'stop' });
      }),
    ),

    /**
     * The turn's run started with this plan: its remaining items go back to the front of the
     * buffer, its dropped ones are reported, planning is due again once it ends, and preempts
     * parked while it planned are delivered now. One assign: each costs XState a snapshot copy.
     */
    recordRunStart: deliverySetup.createAction(
      enqueueActions(({ context, event, enqueue }) => {
        const turn = context.turn;
        if (event.type !== 'turn.started' || turn === undefined) return;
        const { plan } = event;
        context.dropped.push(...plan.dropped);
        enqueue.assign({
          turn: { ...turn, plan, phase: 'running', runId: event.runId, pendingPreempt: undefined },
          // A running turn always ends with planning due (endTurn): set now, a push while it
          // runs writes nothing but the buffer (and takes the runtime's plain-push path).
          needsPlanning: true,
          ...(plan.remaining.length === 0
            ? {}
            : { buffer: [...plan.remaining, ...context.buffer] }),
        });
        if (turn.pendingPreempt !== undefined) {
          enqueue({
            type: 'deliverPreempt',
            params: { draft: turn.pendingPreempt, pushIds: turn.waitingAcks },
          });
        } else if (turn.waitingAcks.length > 0) {
          enqueue({ type: 'settleAcks', params: turn.waitingAcks });
        }
      }),
    ),
  },
});
