/**
 * The chat page's run replies, {@link createRunReplies}: the `agent.*` events a run's reply
 * shows (text, tool cards, approvals), and `run.resumed` (a cluster's failover policy
 * `resume`, README "Cluster"). Inlined into the page like the chat client, so it uses nothing
 * from module scope (what it needs comes in as {@link RunReplyDeps}).
 *
 * @module
 */
import type { ApiEvent } from './chat-page-feed.js';
import type { ToolCards } from './chat-page-tools.js';

/** What a run's reply is drawn in: its turn, its reply, its parts and cards, its waits. */
export interface RunReplyHost {
  readonly turn: HTMLElement;
  readonly reply: HTMLElement;
  /** The reply's text bubbles by `message_id`. */
  readonly parts: Map<string, HTMLElement>;
  /** The reply's tool cards by `tool_use_id`. */
  readonly tools: Map<string, HTMLElement>;
  /** Pending requests on the run (`approval` is this module's). */
  readonly waits: Set<string>;
}

/** What the replies borrow from the chat client. */
export interface RunReplyDeps<V extends RunReplyHost> {
  /** Creates an element with a class name and, optionally, its text. */
  readonly el: (tag: string, className: string, text?: string) => HTMLElement;
  /** A value as text: a string as it is, anything else as JSON. */
  readonly str: (value: unknown) => string;
  readonly tools: ToolCards;
  /** Shows the run's pending notice from its waits. */
  readonly showPending: (view: V) => void;
}

/** The replies' entry points. */
export interface RunReplies<V extends RunReplyHost> {
  /** An `agent.*` event of run `runId`, shown in its reply (others are ignored). */
  show(view: V, runId: string, event: ApiEvent): void;
  /**
   * `run.resumed`: a note on the turn that the run resumed on another instance, and its reply
   * shows again only its events up to `safe_point_seq` (the resumed attempt logs the rest
   * again); without `safe_point_seq` the reply is left as it is.
   */
  resumed(view: V, runId: string, payload: Record<string, unknown>): void;
  /**
   * Run `runId` ended (`run.completed`, `run.failed`, `run.cancelled`): its kept events are
   * dropped, since no `run.resumed` follows a run's end (README "Cluster": only a run the log
   * leaves `RUNNING` is resumed).
   */
  ended(runId: string): void;
  /** Forgets every run (another session opens). */
  reset(): void;
}

/**
 * The replies of a session's runs. Each run's shown events are kept while it runs, so that a
 * run resumed from its last safe point shows each word once: its reply goes back to the events
 * logged up to `run.resumed {safe_point_seq}` and continues with the resumed attempt's.
 *
 * @remarks Runs in the browser only. What is kept is bounded by the runs that have not ended
 * (a plain session has one running at a time, a loop session one turn): each one's `agent.*`
 * events since its start, which its own turn bounds, dropped when it ends ({@link
 * RunReplies.ended}) and cut back to `safe_point_seq` when it resumes. A long conversation keeps
 * none of its ended runs' events, only their DOM.
 * @param deps - {@link RunReplyDeps}
 * @returns the {@link RunReplies}
 */
export function createRunReplies<V extends RunReplyHost>(deps: RunReplyDeps<V>): RunReplies<V> {
  const { el, str, tools, showPending } = deps;
  /** The `agent.*` events of each run that has not ended, by run id (see the bound above). */
  const shown = new Map<string, ApiEvent[]>();

  const part = (view: V, messageId: string) => {
    let span = view.parts.get(messageId);
    if (span === undefined) {
      span = el('div', 'bubble text');
      span.dataset.messageId = messageId;
      view.parts.set(messageId, span);
      view.reply.append(span);
    }
    return span;
  };

  const show = (view: V, runId: string, event: ApiEvent) => {
    if (!event.type.startsWith('agent.')) return;
    const p = event.payload;
    let events = shown.get(runId);
    if (events === undefined) shown.set(runId, (events = []));
    events.push(event);
    switch (event.type) {
      case 'agent.message_delta':
        part(view, str(p.message_id)).textContent += str(p.delta);
        break;
      case 'agent.message':
        part(view, str(p.message_id)).textContent = str(p.content);
        break;
      case 'agent.tool_use':
        tools.used(view, p);
        break;
      case 'agent.tool_result':
        tools.result(view, p);
        break;
      case 'agent.approval_requested':
        tools.askApproval(view, p);
        view.waits.add('approval');
        showPending(view);
        break;
      case 'agent.approval_resolved':
        tools.resolved(view, p);
        view.waits.delete('approval');
        showPending(view);
        break;
      default:
        break;
    }
  };

  const resumed = (view: V, runId: string, payload: Record<string, unknown>) => {
    let note = view.turn.querySelector<HTMLElement>('.resumed');
    if (note === null) {
      note = el('p', 'resumed');
      view.turn.insertBefore(note, view.reply);
    }
    const attempt = typeof payload.attempt === 'number' ? ` (attempt ${payload.attempt})` : '';
    note.textContent = `Resumed on another instance from its last safe point${attempt}`;
    view.turn.dataset.resumed = str(payload.attempt ?? '');
    const upTo = payload.safe_point_seq;
    if (typeof upTo !== 'number') return;
    const kept = (shown.get(runId) ?? []).filter((event) => event.seq <= upTo);
    shown.delete(runId);
    view.reply.replaceChildren();
    view.parts.clear();
    view.tools.clear();
    view.waits.delete('approval');
    for (const event of kept) show(view, runId, event);
    showPending(view);
  };

  return {
    show,
    resumed,
    ended: (runId) => void shown.delete(runId),
    reset: () => shown.clear(),
  };
}
