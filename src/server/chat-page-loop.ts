/**
 * The chat page's view of a loop session (README "Loop sessions: a TurnLoop over HTTP"),
 * {@link createLoopView}: inlined into the page like the chat client, so it uses nothing from
 * module scope (what it needs comes in as {@link LoopViewDeps}).
 *
 * @module
 */

/** What the loop view borrows from the chat client. */
export interface LoopViewDeps {
  /** The conversation, where messages wait for a turn. */
  readonly logEl: HTMLElement;
  /** Creates an element with a class name and, optionally, its text. */
  readonly el: (tag: string, className: string, text?: string) => HTMLElement;
  /**
   * Creates the chat client's view of turn run `runId`: `lead` (the turn's head and the messages
   * it consumed) stands where a plain session shows the user's message; `label` names it.
   */
  readonly createTurn: (runId: string, lead: HTMLElement, label: string) => void;
}

/** The loop view's entry points, called by the chat client as it applies events. */
export interface LoopView {
  /** `user.message {item_id, text, preempt}`: the message waits (or is queued) for a turn. */
  message(payload: Record<string, unknown>): void;
  /** `session.run_started {run_id, item_ids}`: a turn starts and takes its messages. */
  turnStarted(runId: string, itemIds: readonly unknown[]): void;
  /** A turn's run ended (`run.completed`, `run.failed`, `run.cancelled`). */
  turnEnded(runId: string): void;
  /** `session.loop_stopped`: the cut turn's messages and the waiting ones wait again. */
  loopStopped(payload: Record<string, unknown>): void;
  /** The turns running now (started, not ended). */
  runningTurns(): string[];
  /** Forgets everything (another session opens). */
  reset(): void;
}

/**
 * The loop view: each message shows whether it waits for a turn (`waiting for a turn`, or
 * `queued for next turn` when it came while a turn ran) or which turn took it; a turn groups the
 * messages it consumed under a head such as `Turn 2 · answers messages 3 and 4`. A message a
 * later turn takes again (a turn resumed after a restart) moves to it, and the earlier turn's
 * head says where it went. Everything comes from the session's events, so a reload rebuilds it.
 *
 * @remarks Runs in the browser only.
 * @param deps - {@link LoopViewDeps}
 * @returns the {@link LoopView}
 */
export function createLoopView(deps: LoopViewDeps): LoopView {
  const { logEl, el, createTurn } = deps;
  interface Item {
    readonly node: HTMLElement;
    readonly state: HTMLElement;
    readonly number: number;
    turn: number | undefined;
  }
  interface Turn {
    readonly number: number;
    readonly head: HTMLElement;
    readonly items: HTMLElement;
    readonly text: string;
  }
  const items = new Map<string, Item>();
  const turns = new Map<string, Turn>();
  const turnsByNumber = new Map<number, Turn>();
  const running = new Set<string>();

  const setState = (item: Item, state: string, text: string) => {
    item.node.dataset.state = state;
    item.state.textContent = text;
  };
  /** `message 3`, `messages 3 and 4`, `messages 3, 4 and 5`. */
  const listed = (numbers: number[]) => {
    if (numbers.length === 1) return `message ${numbers[0]}`;
    const last = numbers[numbers.length - 1];
    return `messages ${numbers.slice(0, -1).join(', ')} and ${last}`;
  };

  return {
    message(payload) {
      const itemId = String(payload.item_id);
      if (items.has(itemId)) return;
      const number = items.size + 1;
      const node = el('div', 'loop-item');
      node.dataset.itemId = itemId;
      const text = typeof payload.text === 'string' ? payload.text : '';
      const bubble = el('p', 'bubble user-text', text);
      const row = el('div', 'item-row');
      row.append(el('span', 'item-number', `Message ${number}`));
      if (payload.preempt === true) row.append(el('span', 'item-preempt', 'sent now'));
      const state = el('span', 'item-state');
      row.append(state);
      node.append(bubble, row);
      node.setAttribute('aria-label', `Message ${number}: ${text}`);
      const item: Item = { node, state, number, turn: undefined };
      items.set(itemId, item);
      if (running.size > 0) setState(item, 'queued', 'queued for next turn');
      else setState(item, 'waiting', 'waiting for a turn');
      logEl.append(node);
    },

    turnStarted(runId, itemIds) {
      if (turns.has(runId)) return;
      const number = turns.size + 1;
      const taken = itemIds
        .map((id) => items.get(String(id)))
        .filter((item): item is Item => item !== undefined);
      const head = el('p', 'turn-head');
      const text =
        taken.length === 0
          ? `Turn ${number}`
          : `Turn ${number} · answers ${listed(taken.map((i) => i.number))}`;
      head.textContent = text;
      const group = el('div', 'turn-items');
      const lead = el('div', 'turn-lead');
      lead.append(head, group);
      const turn: Turn = { number, head, items: group, text };
      turns.set(runId, turn);
      turnsByNumber.set(number, turn);
      running.add(runId);
      for (const item of taken) {
        const earlier = item.turn === undefined ? undefined : turnsByNumber.get(item.turn);
        if (earlier !== undefined && earlier !== turn) {
          earlier.head.textContent = `${earlier.text} · message ${item.number} continued in turn ${number}`;
        }
        item.turn = number;
        setState(item, 'consumed', `turn ${number}`);
        group.append(item.node);
      }
      createTurn(runId, lead, text);
    },

    turnEnded(runId) {
      running.delete(runId);
    },

    loopStopped(payload) {
      const waiting = [payload.interrupted_item_ids, payload.unhandled_item_ids].flatMap(
        (ids): unknown[] => (Array.isArray(ids) ? ids : []),
      );
      for (const id of waiting) {
        const item = items.get(String(id));
        if (item !== undefined) setState(item, 'waiting', 'waiting for a turn (server stopped)');
      }
    },

    runningTurns: () => Array.from(running),

    reset() {
      items.clear();
      turns.clear();
      turnsByNumber.clear();
      running.clear();
    },
  };
}

/** @internal The loop view's CSS, appended to the chat page's. */
export const loopViewStyles = `
.loop-item { display: flex; flex-direction: column; align-items: flex-end; gap: .2rem; }
.item-row { display: flex; flex-wrap: wrap; gap: .35rem; align-items: center; justify-content: flex-end; font-size: .78rem; color: var(--muted); }
.item-state, .item-preempt { padding: .05rem .5rem; border-radius: 999px; font-weight: 600; background: var(--sent-bg); color: var(--sent-fg); }
.loop-item[data-state="queued"] .item-state { background: var(--queued-bg); color: var(--queued-fg); }
.loop-item[data-state="consumed"] .item-state { background: var(--running-bg); color: var(--running-fg); }
.item-preempt { background: var(--pending-bg); color: var(--pending-fg); }
/* A turn's bar groups its head, the messages it took, its pill and its reply. */
.turn:has(> .turn-lead) { border-left: 3px solid var(--line); padding-left: .6rem; }
.turn-lead { display: flex; flex-direction: column; gap: .45rem; }
.turn-head { margin: 0; font-size: .85rem; font-weight: 650; color: var(--muted); }
.turn-items { display: flex; flex-direction: column; gap: .45rem; }
.mode-badge { font-size: .72rem; font-weight: 650; padding: .05rem .45rem; border-radius: 999px; background: var(--sent-bg); color: var(--sent-fg); }
.session-about { display: inline-flex; gap: .5rem; align-items: center; }
.mode-badge[data-mode="loop"] { background: var(--running-bg); color: var(--running-fg); }
#mode-hint { flex-basis: 100%; margin: 0; font-size: .8rem; color: var(--muted); display: none; }
.bar:has(#loop-mode:checked) #mode-hint, .bar:has(#loop-mode:focus-visible) #mode-hint { display: block; }
`;
