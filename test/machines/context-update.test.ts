import { describe, expect, it } from 'vitest';
import { assign, createActor, initialTransition, setup, transition } from 'xstate';
import { updateContext } from '../../machines/context-update.js';

type Ctx = { count: number; label: string };
type Ev = { type: 'bump'; by: number } | { type: 'go' };

/** The same machine twice: its `bump` action is XState's `assign`, or `updateContext`. */
function machineWith(kind: 'assign' | 'updateContext') {
  const bump =
    kind === 'assign'
      ? assign<Ctx, Ev, undefined, Ev, never>(({ context, event }) => ({
          count: context.count + (event.type === 'bump' ? event.by : 0),
        }))
      : updateContext<Ctx, Ev>(({ context, event }) => ({
          count: context.count + (event.type === 'bump' ? event.by : 0),
        }));
  return setup({
    types: { context: {} as Ctx, events: {} as Ev },
    actions: { bump },
  }).createMachine({
    initial: 'a',
    context: { count: 0, label: 'x' },
    states: {
      a: {
        initial: 'inner',
        tags: ['busy'],
        on: { bump: { actions: 'bump' }, go: { target: 'b', actions: 'bump' } },
        states: { inner: {} },
      },
      b: { on: { bump: { actions: 'bump' } } },
    },
  });
}

describe('updateContext', () => {
  it('sets context fields as assign does, and the snapshot reads the same', () => {
    const events: Ev[] = [{ type: 'bump', by: 2 }, { type: 'go' }, { type: 'bump', by: 5 }];
    const run = (kind: 'assign' | 'updateContext') => {
      const actor = createActor(machineWith(kind)).start();
      const seen = [];
      for (const event of events) {
        actor.send(event);
        const s = actor.getSnapshot();
        seen.push({ value: s.value, context: s.context, busy: s.hasTag('busy'), status: s.status });
      }
      return seen;
    };
    expect(run('updateContext')).toEqual(run('assign'));
    expect(run('updateContext').at(-1)).toEqual({
      value: 'b',
      context: { count: 7, label: 'x' },
      busy: false,
      status: 'active',
    });
  });

  it('is pure: a transition leaves the snapshot it started from as it was', () => {
    const machine = machineWith('updateContext');
    const [start] = initialTransition(machine);
    const [next] = transition(machine, start, { type: 'bump', by: 3 });
    expect(start.context).toEqual({ count: 0, label: 'x' });
    expect(next.context).toEqual({ count: 3, label: 'x' });
    expect(next.context).not.toBe(start.context);
    // The state did not change: its value and tags are the same objects, not rebuilt.
    expect(next.value).toBe(start.value);
    expect(next.tags).toBe(start.tags);
    expect(next.matches({ a: 'inner' })).toBe(true);
  });
});
