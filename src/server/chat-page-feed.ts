/**
 * The chat page's feed of session events, {@link createEventFeed}: the history, then the live
 * stream. Inlined into the page like the chat client, so it uses nothing from module scope
 * (what it needs comes in as {@link EventFeedDeps}).
 *
 * @module
 */

/** An event as the API sends it. */
export interface ApiEvent {
  seq: number;
  run_id: string | null;
  type: string;
  payload: Record<string, unknown>;
}

/** What the feed borrows from the chat client. */
export interface EventFeedDeps {
  /** Calls the API with the page's token; throws an `Error` with `status` on a non-2xx. */
  readonly api: (method: string, path: string) => Promise<unknown>;
  /** Applies one event to the page (it ignores an event at or before its cursor). */
  readonly apply: (event: ApiEvent) => void;
  /** Shows an error above the conversation. */
  readonly showError: (message: string) => void;
  /** The connection indicator in the bar. */
  readonly connEl: HTMLElement;
}

/** The feed of one session at a time. */
export interface EventFeed {
  /** Applies the session's events after `after`, 1000 a page, to the end of its log. */
  loadHistory(sessionId: string, after: () => number): Promise<void>;
  /** Follows the session live from `after` (`EventSource`, which resumes with `Last-Event-ID`). */
  follow(sessionId: string, token: string, after: number): void;
  /** Stops following. */
  close(): void;
}

/**
 * The feed: `GET .../events` (pages of 1000) up to the end of the log, then
 * `EventSource(.../events/stream?after=<cursor>)`, listening to every type the service logs
 * (README "Events"), so each one moves the page's cursor, shown or not. The bar's indicator
 * says `connecting`, `live`, `reconnecting` or `closed`; an `event: error` frame from the
 * service is shown as `stream: <message>`.
 *
 * @remarks Runs in the browser only. The token goes in the stream's query (`access_token`):
 * `EventSource` sends no headers.
 * @param deps - {@link EventFeedDeps}
 * @returns the {@link EventFeed}
 */
export function createEventFeed(deps: EventFeedDeps): EventFeed {
  const { api, apply, showError, connEl } = deps;
  const eventTypes = [
    'user.message',
    'user.supplement',
    'session.run_queued',
    'session.run_started',
    'session.error',
    'session.loop_stopped',
    'run.status',
    'agent.message_delta',
    'agent.message',
    'agent.tool_use',
    'agent.tool_result',
    'agent.approval_requested',
    'agent.approval_resolved',
    'agent.hint_consumed',
    'agent.context_trimmed',
    'run.completed',
    'run.failed',
    'run.cancelled',
    'run.unsettled',
    'run.resumed',
  ];
  let source: EventSource | undefined;

  const setConn = (state: string) => {
    connEl.textContent = state;
    connEl.dataset.state = state;
  };

  return {
    async loadHistory(sessionId, after) {
      for (;;) {
        const page = (await api(
          'GET',
          `/api/sessions/${encodeURIComponent(sessionId)}/events?after=${after()}&limit=1000`,
        )) as { events: ApiEvent[]; has_more: boolean };
        for (const event of page.events) apply(event);
        if (!page.has_more) return;
      }
    },

    follow(sessionId, token, after) {
      source?.close();
      const url =
        `/api/sessions/${encodeURIComponent(sessionId)}/events/stream?after=${after}` +
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
    },

    close() {
      source?.close();
    },
  };
}
