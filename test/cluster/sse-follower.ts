/**
 * An SSE client for the cluster process tests and the cluster bench: it follows one session's
 * stream on one instance (from `after` or a `Last-Event-ID`), keeps every event with the moment
 * it arrived, and lets a test wait for an event with a bound, never for a duration.
 */

/** One event frame as a client reads it (README "HTTP API"), with its arrival time. */
export interface StreamEvent {
  readonly seq: number;
  readonly id: string;
  readonly type: string;
  readonly run_id: string | null;
  readonly payload: Record<string, unknown>;
  readonly at: number;
  /** `performance.now()` when the frame's bytes were read. */
  readonly arrivedAt: number;
}

/** A session's SSE stream, open on one instance. */
export interface Follower {
  /** Every event read so far, in arrival order. */
  readonly events: readonly StreamEvent[];
  /** The frames' `id:` lines, in arrival order (the `Last-Event-ID` a client would resend). */
  readonly lastEventId: () => string | undefined;
  /**
   * Resolves with the first event (already read or to come) that matches `test`.
   *
   * @throws Error naming `what` when the stream ends, sends an `error` frame or none matches
   *   within `timeoutMs`
   */
  until(
    test: (event: StreamEvent) => boolean,
    what: string,
    timeoutMs?: number,
  ): Promise<StreamEvent>;
  /** Closes the stream (the client disconnects; the run goes on). */
  close(): void;
}

interface Waiter {
  readonly test: (event: StreamEvent) => boolean;
  readonly resolve: (event: StreamEvent) => void;
  readonly reject: (error: Error) => void;
}

/**
 * Opens `GET /api/sessions/:id/events/stream` on `baseUrl`; resolves once the server answered
 * 200 (the subscription is in place), then reads frames in the background.
 *
 * @param options - `after` (query) and `lastEventId` (header): where the stream resumes
 * @throws Error with the status and body when the server does not answer 200
 */
export async function followSession(
  baseUrl: string,
  token: string,
  sessionId: string,
  options: { readonly after?: number; readonly lastEventId?: string } = {},
): Promise<Follower> {
  const controller = new AbortController();
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (options.lastEventId !== undefined) headers['last-event-id'] = options.lastEventId;
  const query = options.after === undefined ? '' : `?after=${options.after}`;
  const response = await fetch(`${baseUrl}/api/sessions/${sessionId}/events/stream${query}`, {
    headers,
    signal: controller.signal,
  });
  if (response.status !== 200 || response.body === null) {
    throw new Error(`SSE on ${baseUrl}: ${response.status} ${await response.text()}`);
  }
  const events: StreamEvent[] = [];
  const ids: string[] = [];
  const waiters = new Set<Waiter>();
  let ended: Error | undefined;
  const end = (error: Error) => {
    ended ??= error;
    for (const waiter of waiters) waiter.reject(ended);
    waiters.clear();
  };
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  void (async () => {
    let buffer = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return end(new Error(`the SSE stream on ${baseUrl} ended`));
      const arrivedAt = performance.now();
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const data = /^data: (.*)$/m.exec(frame)?.[1];
        if (data === undefined) continue;
        if (/^event: error$/m.test(frame)) return end(new Error(`SSE error frame: ${data}`));
        const id = /^id: (.*)$/m.exec(frame)?.[1];
        if (id !== undefined) ids.push(id);
        const event = { ...(JSON.parse(data) as Omit<StreamEvent, 'arrivedAt'>), arrivedAt };
        events.push(event);
        for (const waiter of [...waiters]) {
          if (waiter.test(event)) {
            waiters.delete(waiter);
            waiter.resolve(event);
          }
        }
      }
    }
  })().catch((error: unknown) =>
    end(error instanceof Error ? error : new Error(`the SSE stream failed: ${String(error)}`)),
  );
  return {
    events,
    lastEventId: () => ids.at(-1),
    until(test, what, timeoutMs = 20_000) {
      const seen = events.find(test);
      if (seen !== undefined) return Promise.resolve(seen);
      if (ended !== undefined) return Promise.reject(new Error(`${what}: ${ended.message}`));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          reject(new Error(`no SSE event ${what} within ${timeoutMs} ms on ${baseUrl}`));
        }, timeoutMs);
        const waiter: Waiter = {
          test,
          resolve: (event) => {
            clearTimeout(timer);
            resolve(event);
          },
          reject: (error) => {
            clearTimeout(timer);
            reject(new Error(`${what}: ${error.message}`));
          },
        };
        waiters.add(waiter);
      });
    },
    close() {
      controller.abort();
      end(new Error('closed by the test'));
    },
  };
}
