import { describe, expect, it } from 'vitest';
import {
  CancelMode,
  isCancelMode,
  isSafePointMatch,
  mergeCancelRequests,
  type CancelRequest,
} from '../../machines/cancel-request.js';

const request = (overrides: Partial<CancelRequest> = {}): CancelRequest => ({
  mode: CancelMode.AfterChatModel,
  deadlineAt: undefined,
  recursive: false,
  cause: 'cancel',
  reason: undefined,
  initiator: 'user',
  ...overrides,
});

describe('cancel request merge (Eino semantics)', () => {
  it('immediate dominates in either order', () => {
    expect(mergeCancelRequests(request(), request({ mode: CancelMode.Immediate })).mode).toBe(
      CancelMode.Immediate,
    );
    expect(mergeCancelRequests(request({ mode: CancelMode.Immediate }), request()).mode).toBe(
      CancelMode.Immediate,
    );
  });

  it('safe-point bits OR together', () => {
    const merged = mergeCancelRequests(request(), request({ mode: CancelMode.AfterToolCalls }));
    expect(merged.mode).toBe(CancelMode.AnySafePoint);
    expect(isSafePointMatch(merged.mode, 'afterChatModel')).toBe(true);
    expect(isSafePointMatch(merged.mode, 'afterToolCalls')).toBe(true);
  });

  it('the earliest absolute deadline wins; a later one never postpones it', () => {
    const first = request({ deadlineAt: 500 });
    expect(mergeCancelRequests(first, request({ deadlineAt: 200 })).deadlineAt).toBe(200);
    expect(mergeCancelRequests(first, request({ deadlineAt: 900 }))).toBe(first);
    expect(mergeCancelRequests(request(), request({ deadlineAt: 900 })).deadlineAt).toBe(900);
  });

  it('recursive only goes false → true', () => {
    const recursive = request({ recursive: true });
    expect(mergeCancelRequests(recursive, request({ recursive: false }))).toBe(recursive);
    expect(mergeCancelRequests(request(), recursive).recursive).toBe(true);
  });

  it('the first cause and the first reason win; an identical request adds nothing', () => {
    const first = request({ cause: 'preempt', reason: 'urgent' });
    const merged = mergeCancelRequests(
      first,
      request({ cause: 'timeout', reason: 'other', mode: CancelMode.AfterToolCalls }),
    );
    expect(merged).toMatchObject({ cause: 'preempt', reason: 'urgent' });
    expect(mergeCancelRequests(first, { ...first })).toBe(first);
  });

  it('validates modes', () => {
    expect([0, 1, 2, 3].every(isCancelMode)).toBe(true);
    expect([4, -1, 1.5, '1', null].some(isCancelMode)).toBe(false);
  });
});
