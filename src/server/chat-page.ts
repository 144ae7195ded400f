/**
 * The chat page served at `/`: one self-contained HTML document (no CDN, no bundler). Its
 * script is {@link runChatClient}, type-checked and linted with the rest of the sources and
 * inlined with `Function.prototype.toString`, so it must use nothing from module scope.
 *
 * @module
 */

/** What the page keeps about one run (one user message and the reply to it). */
interface RunView {
  readonly turn: HTMLElement;
  readonly status: HTMLElement;
  readonly actions: HTMLElement;
  readonly reply: HTMLElement;
  readonly parts: Map<string, HTMLElement>;
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
 * reload rebuilds the page from the log and resumes from the cursor it reached.
 */
export function runChatClient(): void {
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

  const runs = new Map<string, RunView>();
  let token = '';
  let sessionId = '';
  let cursor = 0;
  let source: EventSource | undefined;

  const showError = (message: string) => {
    errorEl.textContent = message;
    errorEl.hidden = message === '';
  };

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

  const sendEvents = async (events: unknown[]) => {
    try {
      showError('');
      return (await api('POST', `/api/sessions/${encodeURIComponent(sessionId)}/events`, {
        events,
      })) as { results: Array<Record<string, unknown>> };
    } catch (error) {
      showError(error instanceof Error ? error.message : String(error));
      return undefined;
    }
  };

  const stopRun = async (runId: string, button: HTMLButtonElement) => {
    button.disabled = true;
    const answer = await sendEvents([{ type: 'user.interrupt', payload: { run_id: runId } }]);
    const result = answer?.results[0]?.result;
    if (typeof result === 'string' && result !== 'accepted') {
      const view = runs.get(runId);
      view?.actions.append(el('span', 'note', `(stop: ${result})`));
    }
  };

  const setStatus = (view: RunView, runId: string, status: string) => {
    view.turn.dataset.status = status;
    view.status.textContent = status;
    view.actions.replaceChildren();
    if (status === 'queued' || status === 'running') {
      const button = el('button', 'control', status === 'queued' ? 'Cancel' : 'Stop');
      button.dataset.testid = status === 'queued' ? 'cancel' : 'stop';
      button.addEventListener('click', () => void stopRun(runId, button as HTMLButtonElement));
      view.actions.append(button);
    }
  };

  const viewOf = (runId: string, text?: string): RunView => {
    let view = runs.get(runId);
    if (view === undefined) {
      const turn = el('section', 'turn');
      turn.dataset.runId = runId;
      const head = el('div', 'user');
      head.append(el('span', 'user-text', text ?? ''));
      const status = el('span', 'status');
      const actions = el('span', 'actions');
      head.append(status, actions);
      const reply = el('div', 'reply');
      turn.append(head, reply);
      logEl.append(turn);
      view = { turn, status, actions, reply, parts: new Map() };
      runs.set(runId, view);
      setStatus(view, runId, 'sent');
    }
    return view;
  };

  const note = (view: RunView, className: string, text: string) => {
    const line = el('div', className, text);
    view.reply.append(line);
    return line;
  };

  const part = (view: RunView, messageId: string) => {
    let span = view.parts.get(messageId);
    if (span === undefined) {
      span = el('div', 'text');
      span.dataset.messageId = messageId;
      view.parts.set(messageId, span);
      view.reply.append(span);
    }
    return span;
  };

  const str = (value: unknown) => (typeof value === 'string' ? value : JSON.stringify(value));

  const apply = (event: ApiEvent) => {
    if (event.seq <= cursor) return;
    cursor = event.seq;
    cursorEl.textContent = String(cursor);
    const p = event.payload;
    if (event.type === 'user.supplement') {
      logEl.append(el('div', 'supplement', `supplement: ${str(p.text)}`));
      return;
    }
    const runId = event.run_id;
    if (runId === null) return;
    if (event.type === 'user.message') {
      viewOf(runId, str(p.text));
      return;
    }
    const view = runs.get(runId);
    if (view === undefined) return; // a nested run's events: shown with its parent's tools
    switch (event.type) {
      case 'session.run_queued':
        setStatus(view, runId, 'queued');
        break;
      case 'session.run_started':
        setStatus(view, runId, 'running');
        break;
      case 'agent.message_delta':
        part(view, str(p.message_id)).textContent += str(p.delta);
        break;
      case 'agent.message':
        part(view, str(p.message_id)).textContent = str(p.content);
        break;
      case 'agent.tool_use':
        note(view, 'tool', `tool ${str(p.name)}(${str(p.arguments)})`);
        break;
      case 'agent.tool_result':
        note(view, 'tool', `→ ${str(p.content)}`);
        break;
      case 'agent.approval_requested': {
        const line = note(view, 'approval', `${str(p.name)} asks for your confirmation `);
        line.dataset.toolUseId = str(p.tool_use_id);
        for (const allow of [true, false]) {
          const button = el('button', 'control', allow ? 'Allow' : 'Deny') as HTMLButtonElement;
          button.dataset.testid = allow ? 'allow' : 'deny';
          button.addEventListener('click', () => {
            button.disabled = true;
            void sendEvents([
              {
                type: 'user.tool_confirmation',
                payload: { tool_use_id: str(p.tool_use_id), allow },
              },
            ]);
          });
          line.append(button);
        }
        break;
      }
      case 'agent.approval_resolved': {
        const line = view.reply.querySelector(`[data-tool-use-id="${str(p.tool_use_id)}"]`);
        if (line !== null) line.textContent = `confirmation: ${str(p.outcome)}`;
        break;
      }
      case 'run.completed':
        setStatus(view, runId, p.reason === 'interrupted' ? 'interrupted' : 'completed');
        break;
      case 'run.failed':
        setStatus(view, runId, 'failed');
        note(view, 'error', str(p.error));
        break;
      case 'run.cancelled':
        setStatus(view, runId, 'cancelled');
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

  const follow = () => {
    source?.close();
    const url =
      `/api/sessions/${encodeURIComponent(sessionId)}/events/stream?after=${cursor}` +
      `&access_token=${encodeURIComponent(token)}`;
    const es = new EventSource(url);
    source = es;
    connEl.textContent = 'connecting';
    es.onopen = () => {
      connEl.textContent = 'live';
    };
    es.onerror = (event) => {
      // An `event: error` frame from the service carries data; a lost connection does not.
      const data = (event as MessageEvent<unknown>).data;
      if (typeof data === 'string') {
        const error = (JSON.parse(data) as { error?: { message?: string } }).error;
        showError(`stream: ${error?.message ?? data}`);
      }
      connEl.textContent = es.readyState === EventSource.CLOSED ? 'closed' : 'reconnecting';
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

  const openSession = async (fresh: boolean) => {
    source?.close();
    runs.clear();
    logEl.replaceChildren();
    cursor = 0;
    cursorEl.textContent = '0';
    sessionId = fresh ? '' : (localStorage.getItem('runplane.session') ?? '');
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
      localStorage.setItem('runplane.session', sessionId);
    }
    sessionEl.textContent = sessionId;
    await loadHistory();
    follow();
  };

  const start = async () => {
    const fromHash = /(?:^#|&)token=([^&]+)/.exec(location.hash)?.[1];
    if (fromHash !== undefined) {
      localStorage.setItem('runplane.token', decodeURIComponent(fromHash));
      history.replaceState(null, '', location.pathname + location.search);
    }
    token = localStorage.getItem('runplane.token') ?? '';
    tokenForm.hidden = token !== '';
    composer.hidden = token === '';
    if (token === '') return;
    try {
      await openSession(false);
    } catch (error) {
      const status = (error as { status?: number }).status;
      if (status === 401) {
        localStorage.removeItem('runplane.token');
        tokenForm.hidden = false;
        composer.hidden = true;
      }
      showError(error instanceof Error ? error.message : String(error));
    }
  };

  tokenForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const input = $('token-input') as HTMLInputElement;
    localStorage.setItem('runplane.token', input.value.trim());
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
    if (event.key === 'Enter' && !event.shiftKey) {
      event.preventDefault();
      composer.requestSubmit();
    }
  });
  $('new-session').addEventListener('click', () => {
    void openSession(true).catch((error: unknown) =>
      showError(error instanceof Error ? error.message : String(error)),
    );
  });
  void start();
}

const styles = `
  :root { color-scheme: light dark; font-family: system-ui, sans-serif; }
  [hidden] { display: none !important; }
  body { margin: 0; display: flex; flex-direction: column; height: 100vh; }
  header { display: flex; gap: 1rem; align-items: center; padding: .5rem 1rem; border-bottom: 1px solid #8884; }
  header h1 { font-size: 1.1rem; margin: 0; }
  header .meta { font-size: .8rem; opacity: .75; }
  main { flex: 1; overflow-y: auto; padding: 1rem; }
  .turn { margin-bottom: 1rem; }
  .user { display: flex; gap: .5rem; align-items: baseline; font-weight: 600; }
  .status { font-size: .75rem; font-weight: 400; padding: 0 .4rem; border-radius: .5rem; background: #8883; }
  .reply { margin: .3rem 0 0 1rem; white-space: pre-wrap; }
  .tool, .approval, .note { font-size: .85rem; opacity: .8; }
  .error, #error { color: #c33; }
  .supplement { font-style: italic; opacity: .8; margin-bottom: .5rem; }
  form { display: flex; gap: .5rem; align-items: center; padding: .5rem 1rem; border-top: 1px solid #8884; }
  textarea { flex: 1; min-height: 2.5rem; }
  button.control { margin-left: .3rem; }
`;

/**
 * The chat page: send; stop on each running message; cancel on each queued one; a preempt
 * toggle; live events over `EventSource` that resume from the last `seq`.
 *
 * @remarks The token comes from the URL fragment (`/#token=...`, never sent to the server),
 * then from `localStorage`, or from the token form. The session id is kept in `localStorage`.
 */
export const chatPageHtml = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>runplane chat</title>
<style>${styles}</style>
</head>
<body>
<header>
  <h1>runplane</h1>
  <span class="meta">session <span id="session">-</span></span>
  <span class="meta">seq <span id="cursor" data-testid="cursor">0</span></span>
  <span class="meta" id="conn">offline</span>
  <button id="new-session" type="button">New session</button>
</header>
<form id="token-form" hidden>
  <input id="token-input" placeholder="paste the token printed by runplane serve" size="50">
  <button type="submit">Use token</button>
</form>
<div id="error" role="alert" hidden></div>
<main id="log"></main>
<form id="composer" hidden>
  <textarea id="text" placeholder="Message (Enter to send)"></textarea>
  <label><input type="checkbox" id="preempt"> preempt</label>
  <button id="send" type="submit">Send</button>
</form>
<script>
var __name = function (fn) { return fn; };
(${runChatClient.toString()})();
</script>
</body>
</html>
`;
