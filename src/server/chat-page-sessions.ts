/**
 * The chat page's list of the owner's earlier sessions, {@link runSessionList}: inlined into the
 * page like the chat client, so it uses nothing from module scope.
 *
 * @module
 */

/**
 * The list: `GET /api/sessions` (newest first, 20 a page, "More" for the next page), each
 * session a button with its title (its first message), its mode (`chat` or `loop`) and when it
 * was created; choosing one
 * opens it through `window.runplaneChat.openSession(id)`. It follows the page's session
 * (`runplane:session` events from the chat client) and reloads whenever it is opened.
 *
 * @remarks Runs in the browser only; the token is the chat client's (`sessionStorage`).
 */
export function runSessionList(): void {
  const nav = document.getElementById('sessions') as HTMLElement;
  const details = document.createElement('details');
  const summary = document.createElement('summary');
  summary.textContent = 'Sessions';
  const list = document.createElement('ul');
  list.className = 'session-list';
  const more = document.createElement('button');
  more.type = 'button';
  more.className = 'button';
  more.textContent = 'More';
  more.hidden = true;
  details.append(summary, list, more);
  nav.append(details);

  let current = '';
  let next: string | null = null;
  let loading = false;

  const when = (at: number) =>
    new Date(at).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });

  const load = async (after: string | null) => {
    const token = window.sessionStorage.getItem('runplane.token') ?? '';
    if (token === '' || loading) return;
    loading = true;
    try {
      const query = after === null ? '' : `&after=${encodeURIComponent(after)}`;
      const response = await fetch(`/api/sessions?limit=20${query}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      if (!response.ok) return;
      const page = (await response.json()) as {
        sessions: Array<{
          session_id: string;
          mode?: string;
          created_at: number;
          title: string | null;
        }>;
        next_after: string | null;
      };
      if (after === null) list.replaceChildren();
      for (const session of page.sessions) {
        const item = document.createElement('li');
        const open = document.createElement('button');
        open.type = 'button';
        open.className = 'session-link';
        open.dataset.sessionId = session.session_id;
        const title = document.createElement('span');
        title.className = 'session-title';
        title.textContent = session.title ?? 'New conversation';
        const time = document.createElement('span');
        time.className = 'session-time';
        time.textContent = when(session.created_at);
        const mode = document.createElement('span');
        mode.className = 'mode-badge session-mode';
        mode.dataset.mode = session.mode === 'loop' ? 'loop' : 'runs';
        mode.textContent = session.mode === 'loop' ? 'loop' : 'chat';
        const about = document.createElement('span');
        about.className = 'session-about';
        about.append(mode, time);
        open.append(title, about);
        if (session.session_id === current) open.setAttribute('aria-current', 'true');
        open.addEventListener('click', () => {
          const chat = (window as unknown as { runplaneChat?: { openSession(id: string): void } })
            .runplaneChat;
          chat?.openSession(session.session_id);
          details.open = false;
        });
        item.append(open);
        list.append(item);
      }
      next = page.next_after;
      more.hidden = next === null;
    } finally {
      loading = false;
    }
  };

  details.addEventListener('toggle', () => {
    if (details.open) void load(null);
  });
  more.addEventListener('click', () => void load(next));
  window.addEventListener('runplane:session', (event) => {
    current = String((event as CustomEvent<unknown>).detail);
    nav.hidden = false;
    for (const link of Array.from(list.querySelectorAll('button.session-link'))) {
      if ((link as HTMLElement).dataset.sessionId === current) {
        link.setAttribute('aria-current', 'true');
      } else {
        link.removeAttribute('aria-current');
      }
    }
    if (details.open) void load(null);
  });
}
