import { describe, expect, it } from 'vitest';
import { LazyAbortController } from '../../src/lazy-abort-controller.js';

describe('LazyAbortController', () => {
  it('an abort before the signal exists is applied when the signal is first read', () => {
    const controller = new LazyAbortController();
    const reason = new Error('first');
    controller.abort(reason);
    controller.abort(new Error('second')); // the first abort wins
    expect(controller.aborted).toBe(true);
    expect(controller.signal.aborted).toBe(true);
    expect(controller.signal.reason).toBe(reason);
    expect(controller.signal).toBe(controller.signal); // one signal, created once
  });

  it('an abort after the signal exists fires its listeners once, with the first reason', () => {
    const controller = new LazyAbortController();
    const seen: unknown[] = [];
    controller.signal.addEventListener('abort', () => seen.push(controller.signal.reason));
    expect(controller.aborted).toBe(false);
    controller.abort('stop');
    controller.abort('again');
    expect(seen).toEqual(['stop']);
  });
});
