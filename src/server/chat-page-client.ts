/**
 * The chat page's script, {@link runChatClient}: type-checked and linted with the rest of the
 * sources, inlined into the page with `Function.prototype.toString`, so it uses nothing from
 * module scope (what it needs comes in as arguments).
 *
 * @module
 */
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

/** An event as the API sends it. */
interface ApiEvent {
  seq: number;
  run_id: string | null;
  type: string;
  payload: Record<string, unknown>;
}

/**
 * The page's script: token, session, history, live stream, and the controls.
 *
 * @remarks Runs in the browser only. State comes from the session's events alone: the page
 * reads the history (`GET .../events`, pages of 1000) up to a cursor, then follows
 * `EventSource(.../events/stream?after=<cursor>)`, which reconnects with `Last-Event-ID`. A
 * reload rebuilds the page from the log and resumes from the cursor it reached. The token and
 * the session id are kept in `sessionStorage` and `localStorage` (README "Chat page").
 * @param describe - {@link describeRunEnd}, passed in because the script is inlined as text
 */
export function runChatClient(describe: typeof describeRunEnd): void {
  const $ = (id: string) => document.getElementById(id) as HTMLElement;
  const logEl = $('log');
  const cursorEl = $('cursor');
  const connEl = $('conn');
  const sessionEl = $('session');
  const errorEl = $('error');
  const textEl = $('text') as HTMLTextAreaElement;
  const preemptEl = $('preempt') as HTMLInputElement;
  const tokenForm = $('token-form') as HTMLFormElement;
  const composer = $('composer') as HTMLFormElement;
  // The token stays in this tab (sessionStorage); the session id, no secret, in localStorage.
  const store = window.sessionStorage;
  const sessions = window.localStorage;

  const runs = new Map<string, RunView>();
  let token = '';
  let sessionId = '';
  let cursor = 0;
  let source: EventSource | undefined;

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

  const viewOf = (runId: string, text?: string): RunView => {
    let view = runs.get(runId);
    if (view === undefined) {
      const turn = el('article', 'turn');
      turn.dataset.runId = runId;
      const user = el('div', 'user');
      user.append(el('p', 'bubble user-text', text ?? ''));
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
      turn.setAttribute('aria-label', `Message: ${text ?? ''}`);
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

  const part = (view: RunView, messageId: string) => {
    let span = view.parts.get(messageId);
    if (span === undefined) {
      span = el('div', 'bubble text');
      span.dataset.messageId = messageId;
      view.parts.set(messageId, span);
      view.reply.append(span);
    }
    return span;
  };

  /** A value as a person reads it: an object as `key: value` lines, text as text. */
  const fields = (value: unknown, empty: string) => {
    let data = value;
    if (typeof data === 'string') {
      try {
        data = JSON.parse(data);
      } catch {
        return el('p', 'tool-text', data as string);
      }
    }
    if (data === null || typeof data !== 'object' || Array.isArray(data)) {
      return el('p', 'tool-text', str(data));
    }
    const entries = Object.entries(data as Record<string, unknown>);
    if (entries.length === 0) return el('p', 'tool-text muted', empty);
    const list = el('dl', 'tool-fields');
    for (const [key, item] of entries) list.append(el('dt', '', key), el('dd', '', str(item)));
    return list;
  };

  /** The card of one tool call: name, arguments, approval, result. */
  const toolCard = (view: RunView, toolUseId: string, name: unknown, args: unknown) => {
    let card = view.tools.get(toolUseId);
    if (card === undefined) {
      card = el('section', 'tool');
      card.dataset.toolUseId = toolUseId;
      const head = el('header', 'tool-head');
      head.append(el('span', 'tool-icon'), el('span', 'tool-name', str(name)));
      head.append(el('span', 'tool-state', 'calling'));
      card.append(head, fields(args, 'no arguments'));
      card.setAttribute('aria-label', `Tool call: ${str(name)}`);
      view.tools.set(toolUseId, card);
      view.reply.append(card);
    }
    return card;
  };
  const toolState = (card: HTMLElement, state: string, text: string) => {
    card.dataset.state = state;
    const label = card.querySelector('.tool-state');
    if (label !== null) label.textContent = text;
  };

  const askApproval = (view: RunView, p: Record<string, unknown>) => {
    const toolUseId = str(p.tool_use_id);
    const card = toolCard(view, toolUseId, p.name, p.args ?? p.arguments);
    toolState(card, 'approval', 'needs your approval');
    const row = el('div', 'tool-actions');
    for (const allow of [true, false]) {
      const control = button(
        allow ? 'Allow' : 'Deny',
        allow ? 'button small primary' : 'button small',
        allow ? 'allow' : 'deny',
      );
      control.setAttribute('aria-label', `${allow ? 'Allow' : 'Deny'} ${str(p.name)}`);
      control.addEventListener('click', () => {
        for (const b of Array.from(row.querySelectorAll('button'))) b.disabled = true;
        void sendEvents([
          { type: 'user.tool_confirmation', payload: { tool_use_id: toolUseId, allow } },
        ]);
      });
      row.append(control);
    }
    card.append(row);
    view.waits.add('approval');
    showPending(view);
  };

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

  const apply = (event: ApiEvent) => {
    if (event.seq <= cursor) return;
    cursor = event.seq;
    cursorEl.textContent = String(cursor);
    const p = event.payload;
    if (event.type === 'user.supplement') {
      logEl.append(el('p', 'supplement', `Added to the current reply: ${str(p.text)}`));
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
      if (wait !== undefined) {
        for (const [id, other] of runs) {
          if (id !== runId && !other.ended) {
            other.waits.add(wait);
            showPending(other);
          }
        }
      }
      return;
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
      case 'agent.message_delta':
        part(view, str(p.message_id)).textContent += str(p.delta);
        break;
      case 'agent.message':
        part(view, str(p.message_id)).textContent = str(p.content);
        break;
      case 'agent.tool_use':
        toolCard(view, str(p.tool_use_id), p.name, p.arguments);
        break;
      case 'agent.tool_result': {
        const card = toolCard(view, str(p.tool_use_id), p.name, undefined);
        const failed = p.is_error === true;
        toolState(card, failed ? 'error' : 'done', failed ? 'failed' : 'done');
        const result = el('div', 'tool-result');
        result.append(el('span', 'tool-result-label', failed ? 'Error' : 'Result'));
        result.append(fields(p.content, 'empty'));
        card.append(result);
        break;
      }
      case 'agent.approval_requested':
        askApproval(view, p);
        break;
      case 'agent.approval_resolved': {
        const card = view.tools.get(str(p.tool_use_id));
        if (card !== undefined) {
          card.querySelector('.tool-actions')?.remove();
          const outcome = str(p.outcome);
          toolState(
            card,
            outcome,
            outcome === 'allowed' ? 'allowed' : outcome === 'denied' ? 'denied' : 'withdrawn',
          );
        }
        view.waits.delete('approval');
        showPending(view);
        break;
      }
      case 'run.completed':
      case 'run.failed':
      case 'run.cancelled':
        end(view, runId, event);
        break;
      default:
        break;
    }
  };

  // Every type the service logs (README, HTTP API): each one moves the cursor, shown or not.
  const eventTypes = [
    'user.message',
    'user.supplement',
    'session.run_queued',
    'session.run_started',
    'session.error',
    'run.status',
    'agent.message_delta',
    'agent.message',
    'agent.tool_use',
    'agent.tool_result',
    'agent.approval_requested',
    'agent.approval_resolved',
    'agent.hint_consumed',
    'run.completed',
    'run.failed',
    'run.cancelled',
    'run.unsettled',
  ];

  const setConn = (state: string) => {
    connEl.textContent = state;
    connEl.dataset.state = state;
  };

  const follow = () => {
    source?.close();
    const url =
      `/api/sessions/${encodeURIComponent(sessionId)}/events/stream?after=${cursor}` +
      `&access_token=${encodeURIComponent(token)}`;
    const es = new EventSource(url);
    source = es;
    setConn('connecting');
    es.onopen = () => setConn('live');
    es.onerror = (event) => {
      // An `event: error` frame from the service carries data; a lost connection does not.
      const data = (event as MessageEvent<unknown>).data;
      if (typeof data === 'string') {
        const error = (JSON.parse(data) as { error?: { message?: string } }).error;
        showError(`stream: ${error?.message ?? data}`);
      }
      setConn(es.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting');
    };
    for (const type of eventTypes) {
      es.addEventListener(type, (message) => {
        apply(JSON.parse((message as MessageEvent<string>).data) as ApiEvent);
      });
    }
  };

  const loadHistory = async () => {
    for (;;) {
      const page = (await api(
        'GET',
        `/api/sessions/${encodeURIComponent(sessionId)}/events?after=${cursor}&limit=1000`,
      )) as { events: ApiEvent[]; has_more: boolean; next_after: number };
      for (const event of page.events) apply(event);
      if (!page.has_more) return;
    }
  };

  /**
   * Opens a session: `fresh` creates one, a session id opens that one, and nothing reopens the
   * last one of this tab. The seam for a list of earlier sessions (`GET /api/sessions`): call
   * it with the chosen id (`window.runplaneChat.openSession(id)`).
   */
  const openSession = async (which: { fresh: true } | { sessionId?: string }) => {
    source?.close();
    runs.clear();
    logEl.replaceChildren();
    cursor = 0;
    cursorEl.textContent = '0';
    sessionId =
      'fresh' in which ? '' : (which.sessionId ?? sessions.getItem('runplane.session') ?? '');
    if (sessionId !== '') {
      try {
        await api('GET', `/api/sessions/${encodeURIComponent(sessionId)}`);
      } catch (error) {
        if ((error as { status?: number }).status !== 404) throw error;
        sessionId = '';
      }
    }
    if (sessionId === '') {
      const created = (await api('POST', '/api/sessions', {})) as { session_id: string };
      sessionId = created.session_id;
    }
    sessions.setItem('runplane.session', sessionId);
    window.dispatchEvent(new CustomEvent('runplane:session', { detail: sessionId }));
    sessionEl.textContent = sessionId;
    sessionEl.title = sessionId;
    await loadHistory();
    follow();
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
  composer.addEventListener('submit', (event) => {
    event.preventDefault();
    const text = textEl.value.trim();
    if (text === '') return;
    textEl.value = '';
    void sendEvents([
      {
        type: 'user.message',
        payload: preemptEl.checked ? { text, strategy: 'preempt' } : { text },
      },
    ]);
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
