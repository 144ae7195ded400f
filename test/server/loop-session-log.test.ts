/** What a loop session's log says is owed: the rules restarts rebuild loops from. */
import { describe, expect, it } from 'vitest';
import type { RunplaneEvent } from '../../src/events/event-log.js';
import { loopItemsOf } from '../../src/server/loop-session-log.js';

let seq = 0;
const event = (type: string, payload: Record<string, unknown>, runId?: string): RunplaneEvent => ({
  seq: ++seq,
  id: `e${seq}`,
  sessionId: 's',
  runId,
  type,
  payload,
  at: seq,
});
const message = (id: string) => event('user.message', { item_id: id, text: `text ${id}` });
const turn = (runId: string, ids: string[]) =>
  event('session.run_started', { run_id: runId, item_ids: ids }, runId);
const pendingIds = (events: RunplaneEvent[]) =>
  loopItemsOf(events).pending.map((item) => item.itemId);

describe('loopItemsOf', () => {
  it('owes the messages no finished turn answered, in send order', () => {
    const log = [
      message('a'),
      turn('r1', ['a']),
      message('b'),
      message('c'),
      event('run.completed', { reason: 'completed' }, 'r1'),
      turn('r2', ['b', 'c']),
    ];
    // r2 never ended (its process died before recovery wrote the crash).
    expect(pendingIds(log)).toEqual(['b', 'c']);
    expect([...loopItemsOf(log).done]).toEqual(['a']);
    expect(loopItemsOf(log).pending[0]).toEqual({ itemId: 'b', text: 'text b' });
  });

  it('a crashed turn answered nothing; preempted, failed and user-cancelled turns did', () => {
    const log = [
      message('a'),
      turn('r1', ['a']),
      event('run.cancelled', { cause: 'preempt' }, 'r1'),
      message('b'),
      turn('r2', ['b']),
      event('run.failed', { error: 'model down' }, 'r2'),
      message('c'),
      turn('r3', ['c']),
      event('run.cancelled', { cause: 'cancel', initiator: 'user' }, 'r3'),
      message('d'),
      turn('r4', ['d']),
      event('run.failed', { cause: 'crashed' }, 'r4'),
      message('e'),
    ];
    expect(pendingIds(log)).toEqual(['d', 'e']);
  });

  it("a turn the loop's own stop cut is owed again (its checkpoint resumes it)", () => {
    const log = [
      message('a'),
      turn('r1', ['a']),
      message('b'),
      event('run.cancelled', { cause: 'cancel' }, 'r1'),
      event('session.loop_stopped', { interrupted_item_ids: ['a'], unhandled_item_ids: ['b'] }),
    ];
    expect(pendingIds(log)).toEqual(['a', 'b']);
    // A run-mode message (no item id) and a run-mode run (no item ids) are not items.
    expect(pendingIds([event('user.message', { run_id: 'x', text: 't' }), turn('x', [])])).toEqual(
      [],
    );
  });
});
