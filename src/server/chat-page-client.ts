/**
 * The chat page's script, {@link runChatClient}: type-checked and linted with the rest of the
 * sources, inlined into the page with `Function.prototype.toString`, so it uses nothing from
 * module scope (what it needs comes in as arguments).
 *
 * @module
 */
import type { ApiEvent, createEventFeed } from './chat-page-feed.js';
import type { createLoopView } from './chat-page-loop.js';
import type { createRunReplies } from './chat-page-reply.js';
import type { createScrollPin } from './chat-page-scroll.js';
import type { createToolCards } from './chat-page-tools.js';
import type { describeRunEnd } from './chat-run-end.js';

/** What the page keeps about one run (one user message and the reply to it). */
interface RunView {
  readonly turn: HTMLElement;
  readonly status: HTMLElement;
  readonly pending: HTMLElement;
  readonly actions: HTMLElement;
  readonly reply: HTMLElement;
  readonly reason: HTMLElement;
  readonly parts: Map<string, HTMLElement>;
  readonly tools: Map<string, HTMLElement>;
  started: boolean;
  ended: boolean;
  /** Pending requests on the run, shown while it has not ended: preempting, interrupting, … */
  readonly waits: Set<string>;
}

/** The pieces of the page's script that live in modules of their own. */
export interface ChatClientParts {
  readonly describe: typeof describeRunEnd;
  readonly createLoop: typeof createLoopView;
  readonly createTools: typeof createToolCards;
  readonly createFeed: typeof createEventFeed;
  readonly createPin: typeof createScrollPin;
  readonly createReplies: typeof createRunReplies;
}

/**
 * The page's script: token, session, history, live stream, and the controls.
 *
 * @remarks Runs in the browser only. State comes from the session's events alone: the page
 * reads the history (`GET .../events`, pages of 1000) up to a cursor, then follows
 * `EventSource(.../events/stream?after=<cursor>)`, which reconnects with `Last-Event-ID`. A
 * reload rebuilds the page from the log and resumes from the cursor it reached. The token and
 * the session id are kept in `sessionStorage` and `localStorage` (README "Chat page"). A loop
 * session (`mode: "loop"`, chosen with the "Loop mode" box before "New session") shows its
 * turns through {@link createLoopView}, and its composer sends with `preempt: true` ("Send
 * now").
 * @param parts - the page's other pieces, passed in because the script is inlined as text:
 * {@link describeRunEnd}, {@link createLoopView}, {@link createToolCards}, {@link createEventFeed},
 * {@link createScrollPin}, {@link createRunReplies}
 */
export function runChatClient(parts: ChatClientParts): void {
  const { describe, createLoop, createTools, createFeed, createPin, createReplies } = parts;
  const $ = (id: string) => document.getElementById(id) as HTMLElement;
  const logEl = $('log');
  const cursorEl = $('cursor');
  const connEl = $('conn');
  const sessionEl = $('session');
  const errorEl = $('error');
  const textEl = $('text') as HTMLTextAreaElement;
  const preemptEl = $('preempt') as HTMLInputElement;
  const preemptToggle = $('preempt-toggle');
  const sendNow = $('send-now') as HTMLButtonElement;
  const loopModeEl = $('loop-mode') as HTMLInputElement;
  const modeEl = $('session-mode');
  const tokenForm = $('token-form') as HTMLFormElement;
  const composer = $('composer') as HTMLFormElement;
  // The token stays in this tab (sessionStorage); the session id, no secret, in localStorage.
  const store = window.sessionStorage;
  const sessions = window.localStorage;

  // The conversation follows new content while the reader is within 48 px of its end.
  const scroll = createPin(document.querySelector('main') as HTMLElement, logEl, 48);
  const runs = new Map<string, RunView>();
  let token = '';
  let sessionId = '';
  let cursor = 0;
  let mode = 'runs';

  const showError = (message: string) => {
    errorEl.textContent = message;
    errorEl.hidden = message === '';
  };
  const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

  const api = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const response = await fetch(path, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await response.json().catch(() => ({}))) as Record<string, unknown>;
    if (!response.ok) {
      const error = (json.error ?? {}) as { code?: string; message?: string };
      const failure = new Error(error.message ?? `HTTP ${response.status}`) as Error & {
        status: number;
        code: string | undefined;
      };
      failure.status = response.status;
      failure.code = error.code;
      throw failure;
    }
    return json;
  };

  const el = (tag: string, className: string, text?: string) => {
    const node = document.createElement(tag);
    node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const button = (label: string, className: string, testId: string) => {
    const node = el('button', className, label) as HTMLButtonElement;
    node.type = 'button';
    node.dataset.testid = testId;
    return node;
  };
  const str = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value));

  const sendEvents = async (events: unknown[]) => {
    try {
      showError('');
      return (await api('POST', `/api/sessions/${encodeURIComponent(sessionId)}/events`, {
        events,
      })) as { results: Array<Record<string, unknown>> };
    } catch (error) {
      showError(errorText(error));
      return undefined;
    }
  };

  const pendingText: Record<string, string> = {
    preempting: 'preempting…',
    interrupting: 'interrupting…',
    stopping: 'stopping…',
    approval: 'waiting for your approval',
  };
  const showPending = (view: RunView) => {
    const order = ['approval', 'preempting', 'interrupting', 'stopping'];
    const wait = view.ended ? undefined : order.find((w) => view.waits.has(w));
    view.pending.hidden = wait === undefined;
    view.pending.textContent = wait === undefined ? '' : (pendingText[wait] ?? wait);
    if (wait === undefined) delete view.turn.dataset.pending;
    else view.turn.dataset.pending = wait;
  };

  const stopRun = async (runId: string, control: HTMLButtonElement) => {
    control.disabled = true;
    const view = runs.get(runId);
    view?.waits.add('stopping');
    if (view !== undefined) showPending(view);
    const answer = await sendEvents([{ type: 'user.interrupt', payload: { run_id: runId } }]);
    const result = answer?.results[0]?.result;
    if (view !== undefined && (result === undefined || result !== 'accepted')) {
      view.waits.delete('stopping');
      showPending(view);
      if (typeof result === 'string') view.actions.append(el('span', 'note', `(${result})`));
      control.disabled = false;
    }
  };

  /** The pill: `status` is the coarse state (tests and styles read it), `label` its words. */
  const setStatus = (view: RunView, runId: string, status: string, label: string) => {
    view.turn.dataset.status = status;
    view.status.textContent = label;
    view.status.dataset.status = status;
    view.actions.replaceChildren();
    if (status === 'queued' || status === 'running') {
      const queued = status === 'queued';
      const control = button(
        queued ? 'Cancel' : 'Stop',
        'button small',
        queued ? 'cancel' : 'stop',
      );
      control.setAttribute('aria-label', `${queued ? 'Cancel' : 'Stop'} this message`);
      control.addEventListener('click', () => void stopRun(runId, control));
      view.actions.append(control);
    }
  };

  /** The view of run `runId`: its user message (`text`), or a loop turn's `lead` and `label`. */
  const viewOf = (runId: string, text?: string, lead?: HTMLElement): RunView => {
    let view = runs.get(runId);
    if (view === undefined) {
      const turn = el('article', 'turn');
      turn.dataset.runId = runId;
      let user = lead;
      if (user === undefined) {
        user = el('div', 'user');
        user.append(el('p', 'bubble user-text', text ?? ''));
      }
      const meta = el('div', 'meta-row');
      const status = el('span', 'pill');
      const pending = el('span', 'pending');
      pending.hidden = true;
      const actions = el('span', 'actions');
      meta.append(status, pending, actions);
      const reply = el('div', 'reply');
      const reason = el('p', 'reason');
      reason.hidden = true;
      turn.append(user, meta, reply, reason);
      turn.setAttribute('aria-label', lead === undefined ? `Message: ${text ?? ''}` : (text ?? ''));
      logEl.append(turn);
      view = {
        turn,
        status,
        pending,
        actions,
        reply,
        reason,
        parts: new Map(),
        tools: new Map(),
        started: false,
        ended: false,
        waits: new Set(),
      };
      runs.set(runId, view);
      setStatus(view, runId, 'sent', 'Sent');
    }
    return view;
  };

  const loop = createLoop({
    logEl,
    el,
    createTurn: (runId, lead, label) => void viewOf(runId, label, lead),
  });

  /** A message that preempts or interrupts puts the runs `ids` on notice (`wait`). */
  const notify = (ids: Iterable<string>, wait: string) => {
    for (const id of ids) {
      const other = runs.get(id);
      if (other !== undefined && !other.ended) {
        other.waits.add(wait);
        showPending(other);
      }
    }
  };

  const tools = createTools({ el, button, str, sendEvents });
  const replies = createReplies<RunView>({ el, str, tools, showPending });

  const end = (view: RunView, runId: string, event: ApiEvent) => {
    const seen = describe(event.type, event.payload, view.started);
    if (seen === undefined) return;
    view.ended = true;
    const coarse =
      event.type === 'run.completed'
        ? event.payload.reason === 'interrupted'
          ? 'interrupted'
          : 'completed'
        : event.type === 'run.failed'
          ? 'failed'
          : 'cancelled';
    setStatus(view, runId, coarse, seen.label);
    view.turn.dataset.outcome = seen.outcome;
    view.status.dataset.outcome = seen.outcome;
    view.reason.textContent = seen.reason;
    view.reason.hidden = seen.reason === '';
    for (const row of Array.from(view.reply.querySelectorAll('.tool-actions'))) row.remove();
    showPending(view);
  };

  // An empty session says what to try (the demo agent's calculator and clock tools).
  const hint = el('p', 'empty', 'Try: what is (2 + 3) * 7?  or  what time is it?');
  hint.dataset.testid = 'empty-hint';

  const apply = (event: ApiEvent) => {
    if (event.seq <= cursor) return;
    hint.remove();
    cursor = event.seq;
    cursorEl.textContent = String(cursor);
    const p = event.payload;
    if (event.type === 'user.supplement') {
      logEl.append(el('p', 'supplement', `Added to the current reply: ${str(p.text)}`));
      return;
    }
    // A loop session's message is an item (no run yet); its turn says which it consumed.
    if (event.type === 'user.message' && typeof p.item_id === 'string') {
      loop.message(p);
      if (p.preempt === true) notify(loop.runningTurns(), 'preempting');
      return;
    }
    if (event.type === 'session.loop_stopped') {
      loop.loopStopped(p);
      return;
    }
    const runId = event.run_id;
    if (runId === null) return;
    if (event.type === 'user.message') {
      viewOf(runId, str(p.text));
      // A message that preempts or interrupts puts the runs before it on notice.
      const notices: Record<string, string | undefined> = {
        preempt: 'preempting',
        interrupt: 'interrupting',
      };
      const wait = notices[str(p.strategy)];
      if (wait !== undefined)
        notify(
          Array.from(runs.keys()).filter((id) => id !== runId),
          wait,
        );
      return;
    }
    if (event.type === 'session.run_started' && Array.isArray(p.item_ids)) {
      loop.turnStarted(runId, p.item_ids);
    }
    const view = runs.get(runId);
    if (view === undefined) return; // a nested run's events: shown with its parent's tools
    switch (event.type) {
      case 'session.run_queued':
        if (!view.ended) setStatus(view, runId, 'queued', 'Queued');
        break;
      case 'session.run_started':
        view.started = true;
        if (!view.ended) setStatus(view, runId, 'running', 'Running');
        break;
      case 'run.resumed':
        replies.resumed(view, runId, p);
        break;
      case 'run.completed':
      case 'run.failed':
      case 'run.cancelled':
        end(view, runId, event);
        replies.ended(runId);
        loop.turnEnded(runId);
        break;
      default:
        replies.show(view, runId, event);
        break;
    }
  };

  const feed = createFeed({ api, apply, showError, connEl });

  /**
   * Opens a session: `fresh` creates one, a session id opens that one, and nothing reopens the
   * last one of this tab. The seam for a list of earlier sessions (`GET /api/sessions`): call
   * it with the chosen id (`window.runplaneChat.openSession(id)`).
   */
  const showMode = (session: { mode?: unknown }) => {
    mode = session.mode === 'loop' ? 'loop' : 'runs';
    modeEl.textContent = mode === 'loop' ? 'loop' : 'chat';
    modeEl.dataset.mode = mode;
    // A loop session preempts with `preempt: true` ("Send now"), a plain one with a strategy.
    preemptToggle.hidden = mode === 'loop';
    sendNow.hidden = mode !== 'loop';
  };

  const openSession = async (which: { fresh: true } | { sessionId?: string }) => {
    feed.close();
    runs.clear();
    replies.reset();
    loop.reset();
    logEl.replaceChildren();
    scroll.pin();
    cursor = 0;
    cursorEl.textContent = '0';
    sessionId =
      'fresh' in which ? '' : (which.sessionId ?? sessions.getItem('runplane.session') ?? '');
    let session: { session_id?: string; mode?: unknown } = {};
    if (sessionId !== '') {
      try {
        session = (await api('GET', `/api/sessions/${encodeURIComponent(sessionId)}`)) as {
          mode?: unknown;
        };
      } catch (error) {
        if ((error as { status?: number }).status !== 404) throw error;
        sessionId = '';
      }
    }
    if (sessionId === '') {
      session = (await api(
        'POST',
        '/api/sessions',
        loopModeEl.checked ? { mode: 'loop' } : {},
      )) as {
        session_id: string;
      };
      sessionId = String(session.session_id);
    }
    showMode(session);
    sessions.setItem('runplane.session', sessionId);
    window.dispatchEvent(new CustomEvent('runplane:session', { detail: sessionId }));
    sessionEl.textContent = sessionId;
    sessionEl.title = sessionId;
    await feed.loadHistory(sessionId, () => cursor);
    if (cursor === 0) logEl.append(hint);
    feed.follow(sessionId, token, cursor);
  };
  (window as unknown as { runplaneChat: unknown }).runplaneChat = {
    openSession: (id: string) =>
      openSession({ sessionId: id }).catch((e: unknown) => showError(errorText(e))),
  };

  const start = async () => {
    const fromHash = /(?:^#|&)token=([^&]+)/.exec(location.hash)?.[1];
    if (fromHash !== undefined) {
      store.setItem('runplane.token', decodeURIComponent(fromHash));
      history.replaceState(null, '', location.pathname + location.search);
    }
    token = store.getItem('runplane.token') ?? '';
    tokenForm.hidden = token !== '';
    composer.hidden = token === '';
    if (token === '') return;
    try {
      await openSession({});
      textEl.focus();
    } catch (error) {
      const status = (error as { status?: number }).status;
      if (status === 401) {
        store.removeItem('runplane.token');
        tokenForm.hidden = false;
        composer.hidden = true;
      }
      showError(errorText(error));
    }
  };

  tokenForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const input = $('token-input') as HTMLInputElement;
    store.setItem('runplane.token', input.value.trim());
    void start();
  });
  const send = (now: boolean) => {
    const text = textEl.value.trim();
    if (text === '') return;
    textEl.value = '';
    scroll.pin();
    let payload: Record<string, unknown> = { text };
    if (mode === 'loop' && now) payload = { text, preempt: true };
    if (mode !== 'loop' && preemptEl.checked) payload = { text, strategy: 'preempt' };
    void sendEvents([{ type: 'user.message', payload }]);
  };
  composer.addEventListener('submit', (event) => {
    event.preventDefault();
    send(false);
  });
  sendNow.addEventListener('click', () => {
    send(true);
    textEl.focus();
  });
  textEl.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });
  $('new-session').addEventListener('click', () => {
    void openSession({ fresh: true }).catch((error: unknown) => showError(errorText(error)));
  });
  void start();
}
