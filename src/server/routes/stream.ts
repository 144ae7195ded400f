/**
 * The session's SSE route: `GET /api/sessions/:id/events/stream`, resuming from
 * max(`after`, `Last-Event-ID`).
 *
 * @module
 */
import { Hono } from 'hono';
import { validator } from 'hono/validator';
import type { Clock } from '../../clock.js';
import { HttpError } from '../http-error.js';
import { findSession } from '../middleware/find-session.js';
import { streamQuota, type StreamRegistry } from '../middleware/stream-quota.js';
import { parseEventQuery, parseSeq } from '../schemas.js';
import type { SessionAccess } from '../session-access.js';
import type { ServiceEnv } from '../service-env.js';
import { createEventStream } from '../sse.js';
import { eventQueryOf } from './event-query.js';

/** What the stream route needs. */
export interface StreamRoutesOptions {
  /** How sessions and their logs are read (`session-access.ts`). */
  readonly access: SessionAccess;
  /** The clock the heartbeat runs on (the runtime's). */
  readonly clock: Clock;
  /** Every open stream, counted per owner. */
  readonly streams: StreamRegistry;
  /** Interval of SSE heartbeat comments, in ms (on the runtime clock). */
  readonly heartbeatMs: number;
  /** Unread bytes one stream may buffer before its reader counts as behind (`sse.ts`). */
  readonly streamBufferBytes: number | undefined;
  /** Receives a stream's unexpected failure. */
  readonly reportError: (error: unknown) => void;
}

/** The SSE response headers of the service. */
const sseHeaders = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
} as const;

/**
 * The session stream route, to mount with `app.route('/', ...)` behind the `/api` middleware.
 *
 * @param options - {@link StreamRoutesOptions}
 * @returns the route as a Hono app
 */
export function streamRoutes(options: StreamRoutesOptions): Hono<ServiceEnv> {
  const { access, clock, heartbeatMs, streamBufferBytes, reportError } = options;
  const app = new Hono<ServiceEnv>();

  app.get(
    '/api/sessions/:id/events/stream',
    findSession(access),
    validator('query', (_query, c) => {
      const query = parseEventQuery(eventQueryOf(c), false);
      const lastEventIdText = c.req.header('last-event-id');
      let after = query.after;
      if (lastEventIdText !== undefined && lastEventIdText.trim() !== '') {
        const lastEventId = parseSeq(lastEventIdText.trim());
        if (lastEventId === undefined) {
          throw new HttpError(
            'invalid_last_event_id',
            `expected the Last-Event-ID header to be a non-negative integer, got ${JSON.stringify(lastEventIdText.slice(0, 40))}`,
          );
        }
        after = Math.max(after, lastEventId);
      }
      return { after, types: query.types };
    }),
    // A cursor past the log's end would get silence forever (the log never reaches it: a
    // forged or foreign id); every event a client saw is in the log, so its id is at most that.
    async (c, next) => {
      const session = c.get('session');
      const { after } = c.req.valid('query');
      const key = { ownerId: session.ownerId, sessionId: session.sessionId };
      const lastSeq = after === 0 ? 0 : await access.events.lastSeq({}, key);
      if (after > lastSeq) {
        throw new HttpError(
          'invalid_last_event_id',
          `expected the cursor (after, or Last-Event-ID) to be at most the session's last seq ${lastSeq}, got ${after}`,
        );
      }
      await next();
    },
    streamQuota(options.streams),
    (c) => {
      const session = c.get('session');
      const { after, types } = c.req.valid('query');
      const lease = c.get('stream');
      const body = createEventStream({
        eventLog: access.events,
        key: { ownerId: session.ownerId, sessionId: session.sessionId },
        after,
        types,
        clock,
        heartbeatMs,
        maxBufferedBytes: streamBufferBytes,
        signal: lease.signal,
        reportError,
        onClose: () => lease.release(),
      });
      return new Response(body, { headers: sseHeaders });
    },
  );

  return app;
}
