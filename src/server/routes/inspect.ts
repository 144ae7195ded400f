/**
 * The live lifecycle timeline: `GET /inspect` (the viewer page, no data in it) and
 * `GET /api/inspect/stream` (SSE of the caller's own transitions).
 *
 * @module
 */
import { Hono } from 'hono';
import { validator } from 'hono/validator';
import type { TimelineHub } from '../../inspect/timeline-hub.js';
import { renderTimelinePage } from '../../inspect/timeline-page.js';
import { HttpError } from '../http-error.js';
import { pageSecurityPolicy } from '../middleware/security-headers.js';
import { streamQuota, type StreamRegistry } from '../middleware/stream-quota.js';
import type { ServiceEnv } from '../service-env.js';

/** What the inspect routes need. */
export interface InspectRoutesOptions {
  /** The hub whose `inspect` the runtime was given. */
  readonly timeline: TimelineHub;
  /** Every open stream, counted per owner. */
  readonly streams: StreamRegistry;
  /** Interval of SSE heartbeat comments, in ms. */
  readonly heartbeatMs: number;
}

/**
 * The viewer page, to mount anywhere: it holds no data.
 *
 * @returns the route as a Hono app
 */
export function inspectPageRoutes(): Hono<ServiceEnv> {
  const app = new Hono<ServiceEnv>();
  const page = renderTimelinePage({
    title: 'runplane live',
    liveUrl: '/api/inspect/stream',
    messagesUrl: '/api/sessions/{session}/events',
  });
  const policy = pageSecurityPolicy(page);
  app.get('/inspect', (c) => c.html(page, 200, { 'content-security-policy': policy }));
  return app;
}

/**
 * The caller's transition stream, to mount behind the `/api` middleware (the owner comes from
 * the token).
 *
 * @param options - {@link InspectRoutesOptions}
 * @returns the route as a Hono app
 */
export function inspectStreamRoutes(options: InspectRoutesOptions): Hono<ServiceEnv> {
  const { timeline, heartbeatMs } = options;
  const app = new Hono<ServiceEnv>();
  app.get(
    '/api/inspect/stream',
    validator('query', (_query, c) => {
      const raw = c.req.header('last-event-id') ?? c.req.query('after') ?? '0';
      if (!/^\d{1,15}$/.test(raw)) {
        throw new HttpError('invalid_query', 'expected `after` to be a non-negative integer');
      }
      return { after: Number(raw) };
    }),
    streamQuota(options.streams),
    (c) => {
      const lease = c.get('stream');
      lease.signal.addEventListener('abort', () => lease.release(), { once: true });
      const body = timeline.stream(c.get('ownerId'), {
        after: c.req.valid('query').after,
        signal: lease.signal,
        heartbeatMs,
      });
      return new Response(body, {
        headers: {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache',
          'x-accel-buffering': 'no',
        },
      });
    },
  );
  return app;
}
