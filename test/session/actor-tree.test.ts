/**
 * The actor tree as XState's inspection API sees it (README "The actor tree"): one tree per
 * session. Every run's actor is a child of its session's actor, every nested run's a child of
 * its parent run's, and lookups go through the session's own actor system.
 */
import type { AnyActorRef, InspectionEvent } from 'xstate';
import { describe, expect, it } from 'vitest';
import { createRuntime, type Agent } from '../../src/index.js';
import { createTestClock } from '../../src/testing/index.js';
import { waitForCancel } from '../helpers.js';

interface Node {
  readonly machine: string | undefined;
  readonly runId: string | undefined;
  readonly sessionKey: string | undefined;
  readonly parent: AnyActorRef | undefined;
}

const describeActor = (ref: AnyActorRef): Node => {
  const snapshot = ref.getSnapshot() as {
    machine?: { id?: string };
    context?: { runId?: string; ownerId?: string; sessionId?: string };
  };
  const context = snapshot.context;
  return {
    machine: snapshot.machine?.id,
    runId: context?.runId,
    sessionKey:
      context?.ownerId === undefined ? undefined : `${context.ownerId}/${context.sessionId}`,
    parent: (ref as { _parent?: AnyActorRef })._parent,
  };
};

describe('the actor tree', () => {
  it('every run is a child of its session actor, every nested run a child of its parent run', async () => {
    const clock = createTestClock();
    const created: AnyActorRef[] = [];
    const runtime = createRuntime({
      clock,
      inspect: (event: InspectionEvent) => {
        if (event.type === '@xstate.actor') created.push(event.actorRef as AnyActorRef);
      },
    });
    const leaf: Agent<string, string> = { execute: async (input) => `leaf ${input}` };
    const parent: Agent<string, string> = {
      async execute(input, ctx) {
        const nested = ctx.spawn(leaf, input);
        return `parent of ${await nested.result()}`;
      },
    };
    const runs = [
      runtime.prepare({ ownerId: 'alice', sessionId: 's1', agent: parent, input: 'a' }),
      runtime.prepare({ ownerId: 'alice', sessionId: 's1', agent: leaf, input: 'b' }),
      runtime.prepare({ ownerId: 'bob', sessionId: 's1', agent: parent, input: 'c' }),
    ];
    for (const run of runs) run.start();
    const outcomes = await Promise.all(runs.map((run) => run.termination));
    expect(outcomes.map((o) => o.status)).toEqual(['COMPLETED', 'COMPLETED', 'COMPLETED']);

    const machines = created.map(describeActor).filter((n) => n.machine !== undefined);
    const sessions = machines.filter((n) => n.machine === 'session');
    const runActors = machines.filter((n) => n.machine === 'run');
    // Two sessions (alice/s1, bob/s1), each a root; five runs (three prepared, two nested).
    expect(sessions.map((n) => [n.sessionKey, n.parent])).toEqual([
      ['alice/s1', undefined],
      ['bob/s1', undefined],
    ]);
    expect(runActors).toHaveLength(5);
    const parentOf = (node: Node) =>
      node.parent === undefined ? undefined : describeActor(node.parent);
    for (const run of runActors) {
      const up = parentOf(run);
      const ownRun = runs.find((r) => r.id === run.runId);
      if (ownRun !== undefined) {
        // A session's run: its parent is its own session's actor.
        expect(up).toMatchObject({ machine: 'session', sessionKey: run.sessionKey });
      } else {
        // A nested run: its parent is a run of the same session.
        expect(up?.machine).toBe('run');
        expect(up?.sessionKey).toBe(run.sessionKey);
        expect(runs.map((r) => r.id)).toContain(up?.runId);
      }
    }
    // One tree per session: every run's root is its own session's actor.
    const rootOf = (ref: AnyActorRef): AnyActorRef => {
      const up = (ref as { _parent?: AnyActorRef })._parent;
      return up === undefined ? ref : rootOf(up);
    };
    for (const ref of created.filter((r) => describeActor(r).machine === 'run')) {
      expect(describeActor(rootOf(ref))).toMatchObject({
        machine: 'session',
        sessionKey: describeActor(ref).sessionKey,
      });
    }
    await runtime.shutdown({ graceMs: 0 });
  });

  it('a lookup under another owner or session finds nothing, by construction', () => {
    const runtime = createRuntime({ clock: createTestClock() });
    const run = runtime.prepare({
      ownerId: 'alice',
      sessionId: 's1',
      agent: { execute: async () => 'x' },
      input: null,
    });
    expect(runtime.runs.find('alice', 's1', run.id)).toBe(run);
    expect(runtime.runs.find('bob', 's1', run.id)).toBeUndefined();
    expect(runtime.runs.find('alice', 's2', run.id)).toBeUndefined();
    expect(runtime.runs.cancel('bob', 's1', run.id)).toBe('not_found');
    expect(run.status).toBe('CREATED');
  });

  it('a session holds at most maxQueuedRuns runs that have not settled (SESSION_QUEUE_FULL)', async () => {
    const clock = createTestClock();
    const runtime = createRuntime({ clock, maxQueuedRuns: 3 });
    const waiting = waitForCancel;
    const key = { ownerId: 'alice', sessionId: 's1' };
    const first = runtime.prepare({ ...key, agent: waiting, input: null });
    first.start(); // running
    runtime.prepare({ ...key, agent: waiting, input: null }).start(); // queued
    runtime.prepare({ ...key, agent: waiting, input: null }); // prepared only: counts too
    expect(() => runtime.prepare({ ...key, agent: waiting, input: null })).toThrow(
      expect.objectContaining({ code: 'SESSION_QUEUE_FULL' }),
    );
    // Other sessions are not affected.
    expect(
      runtime.prepare({ ownerId: 'alice', sessionId: 's2', agent: waiting, input: null }).status,
    ).toBe('CREATED');
    // Once a run has settled, its place is free again.
    first.cancel();
    await first.termination;
    expect(runtime.prepare({ ...key, agent: waiting, input: null }).status).toBe('CREATED');
    const shutdown = runtime.shutdown({ graceMs: 0 });
    await clock.advance(1);
    expect(await shutdown).toEqual({ drained: false });
  });

  it('nested runs have their own cap per parent run', async () => {
    const runtime = createRuntime({ clock: createTestClock(), maxQueuedRuns: 2 });
    const waiting = waitForCancel;
    const errors: unknown[] = [];
    const parent = runtime.prepare({
      ownerId: 'alice',
      sessionId: 's1',
      input: null,
      agent: {
        async execute(_input, ctx) {
          const nested = [ctx.spawn(waiting, null), ctx.spawn(waiting, null)];
          try {
            ctx.spawn(waiting, null);
          } catch (error) {
            errors.push(error);
          }
          nested[0]?.cancel();
          await nested[0]?.termination;
          ctx.spawn(waiting, null); // room again
          return 'done';
        },
      },
    });
    parent.start();
    expect(await parent.result()).toBe('done');
    expect(errors).toEqual([expect.objectContaining({ code: 'SESSION_QUEUE_FULL' })]);
    expect(runtime.runs.size).toBe(0); // the nested runs still going were cancelled and settled
  });
});
