/**
 * Approval timeouts of the service: a tool call that waits for its confirmation longer than
 * its session's `approval_timeout_ms` is denied with reason `timeout`, and the run goes on
 * (docs/architecture.md, "Data lifecycle").
 *
 * @remarks Watches the runtime's events: `agent.approval_requested` arms a timer on the runtime
 * clock, `agent.approval_resolved` clears it; at the deadline the request is answered through
 * `runtime.approve` like a user's denial. One timer per waiting approval, nothing else kept.
 *
 * @module
 */
import type { Runtime } from '../runtime/create-runtime.js';
import { toSessionKeyString } from '../events/event-log.js';
import type { SessionRecords } from '../stores/session-records.js';

/** The events that end a run: its pending approvals are withdrawn, their timers cleared. */
const ended = new Set(['run.completed', 'run.failed', 'run.cancelled']);

/** Options of {@link watchApprovalTimeouts}. */
export interface ApprovalTimeoutOptions {
  readonly runtime: Runtime;
  /** Where each session's `approval_timeout_ms` is read, at the time of the request. */
  readonly sessions: SessionRecords;
  /** The timeout of a session that sets none, in ms. */
  readonly defaultTimeoutMs: number;
}

/**
 * Starts denying approvals that wait too long.
 *
 * @param options - {@link ApprovalTimeoutOptions}
 * @returns a function that stops watching and clears every timer
 */
export function watchApprovalTimeouts(options: ApprovalTimeoutOptions): () => void {
  const { runtime, sessions } = options;
  const clock = runtime.clock;
  const timers = new Map<string, unknown>();
  /** The timers of each run, so that a run's end clears them (its late events are fenced). */
  const byRun = new Map<string, Set<string>>();
  const clear = (slot: string, runId: string | undefined) => {
    clock.clearTimeout(timers.get(slot));
    timers.delete(slot);
    const slots = runId === undefined ? undefined : byRun.get(runId);
    slots?.delete(slot);
    if (runId !== undefined && slots?.size === 0) byRun.delete(runId);
  };
  const unsubscribe = runtime.onEvent((event, key) => {
    if (ended.has(event.type) && event.runId !== undefined) {
      for (const slot of byRun.get(event.runId) ?? []) clear(slot, event.runId);
      return;
    }
    const toolUseId = event.payload.tool_use_id;
    if (typeof toolUseId !== 'string') return;
    const slot = `${toSessionKeyString(key)}${toolUseId}`;
    if (event.type === 'agent.approval_resolved') {
      clear(slot, event.runId);
      return;
    }
    if (event.type !== 'agent.approval_requested' || timers.has(slot)) return;
    const timeoutMs =
      sessions.get(key.ownerId, key.sessionId)?.approvalTimeoutMs ?? options.defaultTimeoutMs;
    const runId = event.runId;
    timers.set(
      slot,
      clock.setTimeout(() => {
        clear(slot, runId);
        runtime.approve(key.ownerId, key.sessionId, toolUseId, {
          allow: false,
          reason: 'timeout',
          message: `no answer within ${timeoutMs} ms`,
        });
      }, timeoutMs),
    );
    if (runId !== undefined) {
      let slots = byRun.get(runId);
      if (slots === undefined) byRun.set(runId, (slots = new Set()));
      slots.add(slot);
    }
  });
  return () => {
    unsubscribe();
    for (const timer of timers.values()) clock.clearTimeout(timer);
    timers.clear();
    byRun.clear();
  };
}
