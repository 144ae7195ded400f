import { describe, expect, it } from 'vitest';
import { describeRunEnd } from '../../src/server/chat-run-end.js';

const outcome = (type: string, payload: Record<string, unknown>, started = true) => {
  const seen = describeRunEnd(type, payload, started);
  return seen && [seen.outcome, seen.label];
};

describe('describeRunEnd: how the chat page words the end of a run', () => {
  it('reads who asked (initiator)', () => {
    expect(outcome('run.completed', { reason: 'completed' })).toEqual(['completed', 'Completed']);
    expect(outcome('run.completed', { reason: 'interrupted', initiator: 'user' })).toEqual([
      'stopped',
      'Stopped by you',
    ]);
    expect(outcome('run.completed', { reason: 'interrupted', initiator: 'strategy' })).toEqual([
      'replaced',
      'Interrupted',
    ]);
    expect(outcome('run.completed', { reason: 'interrupted', initiator: 'shutdown' })).toEqual([
      'shutdown',
      'Stopped by shutdown',
    ]);
    expect(outcome('run.cancelled', { cause: 'cancel', initiator: 'user' }, false)).toEqual([
      'stopped',
      'Cancelled by you',
    ]);
    expect(outcome('run.cancelled', { cause: 'preempt', initiator: 'preempt' })).toEqual([
      'replaced',
      'Preempted',
    ]);
    expect(
      outcome('run.cancelled', { cause: 'cancel', initiator: 'strategy', reason: 'session busy' }),
    ).toEqual(['replaced', 'Refused: busy']);
    expect(outcome('run.cancelled', { cause: 'cancel', initiator: 'strategy' })).toEqual([
      'replaced',
      'Replaced',
    ]);
    expect(outcome('run.cancelled', { cause: 'cancel', initiator: 'parent' })).toEqual([
      'cancelled',
      'Cancelled',
    ]);
    expect(outcome('run.failed', { error: 'boom' })).toEqual(['failed', 'Failed']);
    expect(outcome('run.failed', { error: 'long', code: 'CONTEXT_OVER_BUDGET' })).toEqual([
      'failed',
      'Too long',
    ]);
    expect(outcome('run.failed', { error: 'gone', cause: 'crashed' })).toEqual([
      'crashed',
      'Crashed',
    ]);
    // Said once, plainly: not the runtime's words in brackets after the page's.
    expect(
      describeRunEnd(
        'run.failed',
        { error: 'the server process stopped while the run was RUNNING', cause: 'crashed' },
        true,
      )?.reason,
    ).toBe('The server stopped while this reply was being written.');
  });

  it('falls back on the cause for logs written before initiator existed', () => {
    expect(outcome('run.cancelled', { cause: 'timeout' })).toEqual(['timed-out', 'Timed out']);
    expect(outcome('run.cancelled', { cause: 'shutdown' })).toEqual([
      'shutdown',
      'Stopped by shutdown',
    ]);
    expect(outcome('run.cancelled', { cause: 'preempt' })).toEqual(['replaced', 'Preempted']);
    expect(outcome('run.cancelled', { cause: 'cancel' })).toEqual(['cancelled', 'Cancelled']);
    expect(outcome('run.status', {})).toBeUndefined();
  });

  it('says whether the reply was cut off or never started', () => {
    expect(describeRunEnd('run.cancelled', { initiator: 'timeout' }, true)?.reason).toBe(
      'The run reached its time limit. The reply ends where it was cut off.',
    );
    expect(describeRunEnd('run.cancelled', { initiator: 'timeout' }, false)?.reason).toBe(
      'The run reached its time limit. It never started.',
    );
  });
});
