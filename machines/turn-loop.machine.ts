/**
 * The TurnLoop machine: turns a stream of pushed items into turns, one run per turn, with
 * preemption, stop escalation and checkpoint bookkeeping (docs/architecture.md, "TurnLoop").
 * Semantics follow Eino ADK's TurnLoop, stricter where Eino has holes. Its shapes are in
 * `turn-loop.types.ts`, its request helpers in `turn-loop.requests.ts`, its turns in
 * `turn.machine.ts`; the actions and guards it names are in `turn-loop.base-setup.ts` (plain
 * assigns and guards) and `turn-loop.setup.ts` (the ones that queue other actions), with the
 * rules both share (how a turn's end is handled, which turn comes next) in `turn-loop.rules.ts`.
 *
 * @remarks
 * Two parallel regions:
 * - `loop`: `idle → loading → turn (planning → running) → next turn | waiting | exiting →
 *   exited`;
 * - `stop`: `open → idleWaiting → committed → closed`. Once `committed` the buffer is closed:
 *   every later push is refused (a late item). `committed` is also entered on an error exit,
 *   so the buffer is always closed before it is taken.
 *
 * A push is one event, `loop.push`, and events are data: a push's strategy (a user function)
 * stays with the runtime, found by the push's id. `decidePush` (an `assign` the runtime
 * provides) calls it synchronously inside the push's own transition and writes the answer into
 * `lastPush`; `acceptPush` then writes the buffer and delivers the preempt in the same step, so
 * there is no check-then-act window. A preempt is delivered in one place (`deliverPreempt`): to
 * a running turn at once, to a turn still planning when its run starts. Its escalation deadline
 * is fixed at the push (Eino's preempt timeout).
 *
 * Each turn is a `turn` machine (`turn.machine.ts`) invoked while the loop is in `turn`; it
 * plans, starts the run, follows it and reports `turn.started`, `turn.skipped`, `turn.failed`
 * or `turn.ended`. A cancel reaches it as a `turn.cancel` command; XState delivers it before
 * `send()` returns, so it is still part of the same step.
 *
 * The machine is pure: the world reaches it through logic the runtime supplies with
 * `turnLoopMachine.provide(...)`: actors `loadCheckpoint`, `turn`, `saveCheckpoint`,
 * `deleteCheckpoint`, `timer` (absolute time) and `idleClock` (relative: idleness restarts
 * whenever the loop is idle); actions `decidePush` and `settleAcks` (resolve push acks).
 *
 * Item arrays in context (`buffer`, `dropped`) are appended to in place: copying a
 * 10,000-item buffer on every push would make a busy loop quadratic. Every other field is
 * replaced, never mutated. The context keeps at most 16 top-level fields: XState's `assign`
 * copies it with `Object.assign({}, …)`, which V8 (Node 20) makes ~15× slower from 20
 * properties on (measured: 0.3 µs → 4.5 µs per copy), and a push is one such copy.
 *
 * Times are absolute clock milliseconds carried by events. The delayed-preempt, preempt and
 * grace deadlines are absolute times in context (xstate #5331: `after` timers are not
 * restored). The idle clock alone is relative, by nature: it restarts whenever the loop
 * becomes idle, and a checkpoint is only written at exit, never for a live, idle loop.
 *
 * Checkpoints are written on exit and merged into the live actor on load (one
 * `xstate.done.actor.loadCheckpoint` event), rather than by restoring an actor from the saved
 * snapshot: the loop takes pushes before `run()` and while the checkpoint loads, and a second
 * actor would leave a window where a push lands in the one being replaced.
 *
 * @module
 */
import { assign, enqueueActions, not } from 'xstate';
import { cancelReason } from './turn-loop.requests.js';
import { planNextTurn, turnEndingEffect, turnRelease } from './turn-loop.rules.js';
import { turnLoopSetup } from './turn-loop.setup.js';
import type {
  LoopEnding,
  SaveCheckpointInput,
  TurnLoopContext,
  TurnRecord,
} from './turn-loop.types.js';

/**
 * The TurnLoop machine definition. Bind it with {@link turnLoopMachine}`.provide({ actors,
 * actions })`; `createTurnLoop` does.
 */
export const turnLoopMachine = turnLoopSetup
  .extend({
    actions: {
      /** genInput consumed nothing: no turn; the loop waits for a new push. */
      applyEmptyPlan: turnLoopSetup.createAction(
        enqueueActions(({ context, event, enqueue }) => {
          const turn = context.turn;
          if (turn === undefined || event.type !== 'turn.skipped') return;
          const { plan } = event;
          context.dropped.push(...plan.dropped);
          enqueue.assign({ buffer: [...plan.remaining, ...context.buffer] });
          enqueue('releaseTurn');
        }),
      ),

      /** Puts everything a plan took back where it was, in order (stop or failure while planning). */
      undoPlan: turnLoopSetup.createAction(
        enqueueActions(({ enqueue }) => {
          enqueue('unplanTurn');
          enqueue('releaseTurn');
        }),
      ),

      /**
       * A turn's run settled. Decides the fate of its consumed items and whether the loop goes on.
       * Stop beats preempt: when the loop is closed, a cancelled turn is the stop's, whoever asked
       * first. A turn cancelled before its agent ever ran (its run still waited in the session)
       * consumed nothing: it is unplanned, and its items and resume are offered again. With
       * `planNext` (`nextTurnFollows`), the next turn's record is written in the same assign.
       */
      endTurn: turnLoopSetup.createAction(
        enqueueActions(({ context, event, enqueue }, params: unknown) => {
          const turn = context.turn;
          if (event.type !== 'turn.ended' || turn?.plan === undefined) return;
          const { ending } = event;
          const { cancelled, neverRan } = turnEndingEffect(ending, context.closed);
          // What a stop or an error leaves interrupted: the items an agent was working on.
          const interrupted = ending.status === 'CANCELLED' && !neverRan ? turn.plan.consumed : [];
          const agentState = neverRan ? undefined : (ending.agentState ?? turn.resume?.agentState);
          // Written with the turn's release, in one assign.
          const patch: { -readonly [K in keyof TurnLoopContext]?: TurnLoopContext[K] } = {
            needsPlanning: true,
          };
          const end = (cause: LoopEnding['cause'], reason: unknown) => {
            patch.ending = { cause, reason, interrupted, agentState };
          };
          if (neverRan) enqueue('unplanTurn');
          if (ending.error !== undefined) {
            end('error', ending.error);
          } else if (ending.suspension !== undefined) {
            // The agent ended the turn asking for outside input: the loop exits with a mid-turn
            // checkpoint of the turn, whether or not a stop or a preempt was pending.
            patch.ending = {
              cause: 'suspend',
              reason: 'suspended',
              interrupted: turn.plan.consumed,
              agentState: ending.agentState ?? turn.resume?.agentState,
              suspension: ending.suspension,
            };
          } else if (cancelled) {
            if (context.closed) {
              // Nothing ran: a clean stop, the items are unhandled.
              end('stop', neverRan ? undefined : cancelReason(ending, context));
            } else if (ending.cancelledBy === 'preempt') {
              if (!neverRan && context.settings.requeuePreempted) {
                patch.requeued = [...context.requeued, ...turn.plan.consumed];
              }
            } else {
              // Cancelled by someone else (a direct cancel, a timeout, a runtime shutdown).
              end('error', cancelReason(ending, context));
            }
          }
          if ((params as { planNext?: boolean } | undefined)?.planNext === true) {
            Object.assign(patch, planNextTurn({ ...context, ...patch }));
          }
          // `releaseTurn`, applied here: one enqueueActions less per turn.
          const release = turnRelease(context, patch);
          if (release === undefined) return;
          for (const id of release.stopped) enqueue.stopChild(id);
          enqueue.assign(release.patch);
          if (release.acks.length > 0) enqueue({ type: 'settleAcks', params: release.acks });
        }),
      ),
    },
  })
  .createMachine({
    id: 'turnLoop',
    type: 'parallel',
    context: ({ input }) => ({
      settings: { ...input },
      ran: false,
      buffer: [],
      requeued: [],
      dropped: [],
      turnSeq: 0,
      turn: undefined,
      resume: undefined,
      needsPlanning: false,
      stop: undefined,
      closed: false,
      delayed: { seq: 0, pending: [] },
      lastPush: undefined,
      ending: undefined,
      exit: undefined,
      checkpoint: { loaded: false, attempted: false, error: undefined },
    }),
    on: {
      'loop.preempt_due': { actions: 'firePreempt' },
      'loop.checkpointing': { actions: 'markStored' },
    },
    states: {
      loop: {
        /**
         * The loop's turns, one after the other, in one actor (`turn.machine.ts`): each turn
         * starts with `turn.begin` (`beginTurn`), so a turn costs no actor of its own.
         */
        invoke: { id: 'turn', src: 'turn' },
        initial: 'idle',
        states: {
          /** Created, `run()` not called yet: pushes are buffered. */
          idle: {
            always: { guard: 'closed', target: 'exiting', actions: 'stopEnding' },
            on: {
              'loop.run': [
                { guard: 'hasStore', target: 'loading', actions: assign({ ran: true }) },
                { target: 'route', actions: assign({ ran: true }) },
              ],
            },
          },
          /** Reading the checkpoint. A stop waits for it, so that it is merged and saved again. */
          loading: {
            invoke: {
              id: 'loadCheckpoint',
              src: 'loadCheckpoint',
              onDone: { target: 'route', actions: 'mergeCheckpoint' },
              onError: { target: 'exiting', actions: 'failWith' },
            },
          },
          /** Transient: exit, plan the next turn, or wait. */
          route: {
            always: [
              { guard: 'endsLoop', target: 'exiting' },
              { guard: 'closed', target: 'exiting', actions: 'stopEnding' },
              { guard: 'hasWork', target: 'turn', actions: 'startPlan' },
              { target: 'waiting' },
            ],
          },
          /** Running and idle: nothing to plan. A push or a stop moves on. */
          waiting: {
            always: [
              { guard: 'closed', target: 'exiting', actions: 'stopEnding' },
              { guard: 'hasWork', target: 'turn', actions: 'startPlan' },
            ],
          },
          /**
           * One turn: planned (genInput or genResume, then prepareAgent), then one run of its
           * agent, until the run has settled and onAgentEvents returned. The invoked `turn`
           * machine does it all and reports the plan with the run's start, in one step.
           */
          turn: {
            // Entered with its record written (`startPlan`, or `endTurn` with `planNext`).
            entry: 'beginTurn',
            exit: {
              type: 'leaveTurn',
              params: ({ context }) => (context.turn as TurnRecord).turnId,
            },
            initial: 'planning',
            states: {
              /** A stop undoes the plan: the taken items go back where they were, in order. */
              planning: {
                always: {
                  guard: 'closed',
                  target: '#turnLoop.loop.exiting',
                  actions: ['undoPlan', 'stopEnding'],
                },
                on: {
                  'turn.started': {
                    target: 'running',
                    actions: ['recordRunStart', 'cancelForStop'],
                  },
                  'turn.skipped': { target: '#turnLoop.loop.route', actions: 'applyEmptyPlan' },
                  'turn.failed': {
                    target: '#turnLoop.loop.exiting',
                    actions: ['undoPlan', 'failWith'],
                  },
                },
              },
              running: {
                on: {
                  'turn.ended': [
                    {
                      guard: 'loadedCheckpointUsed',
                      target: '#turnLoop.loop.discarding',
                      actions: 'endTurn',
                    },
                    // The next turn at once, without a `route` microstep, when that is where
                    // `route` would go.
                    {
                      guard: 'nextTurnFollows',
                      target: '#turnLoop.loop.turn',
                      reenter: true,
                      actions: { type: 'endTurn', params: { planNext: true } },
                    },
                    { target: '#turnLoop.loop.route', actions: 'endTurn' },
                  ],
                },
              },
            },
          },
          /**
           * The first turn after a load consumed its items: the checkpoint is deleted before
           * anything else. A failing delete is reported as `checkpointError`, not as the exit
           * reason; the loop goes on and tries again after its next turn, and at exit.
           */
          discarding: {
            invoke: {
              id: 'discardCheckpoint',
              src: 'deleteCheckpoint',
              onDone: { target: 'route', actions: 'forgetLoaded' },
              onError: {
                target: 'route',
                actions: assign(({ context, event }) => ({
                  checkpoint: { ...context.checkpoint, error: event.error },
                })),
              },
            },
          },
          exiting: {
            entry: 'closeAndCollect',
            initial: 'deciding',
            states: {
              deciding: {
                always: [
                  { guard: 'mustSave', target: 'saving' },
                  { guard: 'mustDelete', target: 'deleting' },
                  { target: '#turnLoop.loop.exited' },
                ],
              },
              saving: {
                invoke: {
                  id: 'saveCheckpoint',
                  src: 'saveCheckpoint',
                  input: ({ context }): SaveCheckpointInput => ({
                    kind: context.exit?.midTurn === true ? 'mid-turn' : 'between-turns',
                    unhandled: context.exit?.unhandled ?? [],
                    interrupted: context.exit?.interrupted ?? [],
                    agentState: context.exit?.agentState,
                    suspension: context.exit?.suspension,
                  }),
                  onDone: {
                    target: '#turnLoop.loop.exited',
                    actions: assign({
                      checkpoint: { loaded: false, attempted: true, error: undefined },
                    }),
                  },
                  onError: {
                    target: '#turnLoop.loop.exited',
                    actions: assign(({ context, event }) => ({
                      checkpoint: { ...context.checkpoint, attempted: true, error: event.error },
                    })),
                  },
                },
              },
              deleting: {
                invoke: {
                  id: 'deleteCheckpoint',
                  src: 'deleteCheckpoint',
                  onDone: { target: '#turnLoop.loop.exited', actions: 'forgetLoaded' },
                  onError: {
                    target: '#turnLoop.loop.exited',
                    actions: assign(({ context, event }) => ({
                      checkpoint: { ...context.checkpoint, error: event.error },
                    })),
                  },
                },
              },
            },
          },
          exited: { type: 'final' },
        },
      },
      stop: {
        initial: 'open',
        states: {
          open: {
            always: { guard: 'closed', target: 'committed' },
            on: {
              'loop.push': { actions: ['decidePush', 'acceptPush'] },
              'loop.stop': [
                { guard: 'isIdleStop', target: 'idleWaiting', actions: 'recordStop' },
                { target: 'committed', actions: 'recordStop' },
              ],
            },
          },
          /** `stop({ idleForMs })`: commits once the loop has been idle that long. */
          idleWaiting: {
            always: { guard: 'closed', target: 'committed' },
            on: {
              'loop.push': { actions: ['decidePush', 'acceptPush'] },
              'loop.stop': [
                { guard: 'isIdleStop', actions: 'recordStop' },
                { target: 'committed', actions: 'recordStop' },
              ],
            },
            initial: 'busy',
            states: {
              busy: { always: { guard: 'loopIsWaiting', target: 'idle' } },
              idle: {
                always: { guard: not('loopIsWaiting'), target: 'busy' },
                invoke: {
                  src: 'idleClock',
                  input: ({ context }) => ({ idleForMs: context.stop?.idleForMs ?? 0 }),
                },
                on: { 'loop.idle_due': { target: '#turnLoop.stop.committed' } },
              },
            },
          },
          /** The buffer is closed: pushes are refused; later stops can only escalate. */
          committed: {
            entry: [assign({ closed: true }), 'cancelForStop'],
            always: { guard: 'loopExited', target: 'closed' },
            on: {
              'loop.push': { actions: ['decidePush', 'refusePush'] },
              'loop.stop': { actions: ['recordStop', 'cancelForStop'] },
            },
          },
          closed: { type: 'final' },
        },
      },
    },
  });
