/**
 * The HTTP service as a web-standard fetch handler (a Hono app): sessions as event logs with
 * cursors and SSE, user events in batches, Bearer auth (DESIGN.md §11; AgentScope Service's
 * session events API).
 *
 * @module
 */
import { Hono, type Context } from 'hono';
import { z } from 'zod';
import { bodyLimit } from 'hono/body-limit';
import { CancelMode, type CancelModeValue } from '../../machines/cancel-request.js';
import { terminalRunStatuses } from '../../machines/run.machine.js';
import { SessionBusyError } from '../errors.js';
import { parseOptions } from '../validation.js';
import type { SessionKey } from '../events/event-log.js';
import { nanoid } from 'nanoid';
import type { Agent } from '../run/agent.js';
import type { RunOutcome } from '../run/run-outcome.js';
import type { Runtime } from '../runtime/create-runtime.js';
import type { RunRecordOutcome, RunRecords, RunRecord } from '../stores/run-records.js';
import type { SessionRecord, SessionRecords } from '../stores/session-records.js';
import { bearerToken, type Authenticate } from './auth.js';
import { chatPageHtml } from './chat-page.js';
import { HttpError, toHttpError } from './http-error.js';
import {
  parseBody,
  parseEventBatch,
  parseEventQuery,
  parseSeq,
  sessionSettingsSchema,
  type UserEvent,
} from './schemas.js';
import { createEventStream, toEventJson } from './sse.js';
import { renderTimelinePage } from '../inspect/timeline-page.js';
import type { TimelineHub } from '../inspect/timeline-hub.js';

/** Options of {@link createServiceApp}. */
export interface ServiceOptions {
  /** The runtime every run lives in; its event log is what the API reads. */
  readonly runtime: Runtime;
  /** The agent each `user.message` runs, with the message text as input. */
  readonly agent: Agent<string, unknown>;
  /** Where sessions (owner, strategy) are kept. */
  readonly sessions: SessionRecords;
  /** Where runs (status, outcome) are kept. */
  readonly runs: RunRecords;
  /** Maps a Bearer token to its owner. */
  readonly authenticate: Authenticate;
  /** Interval of SSE heartbeat comments, in ms (on the runtime clock). @default 15000 */
  readonly heartbeatMs?: number;
  /** Unread bytes one SSE stream may buffer before its reader counts as behind (`sse.ts`). @default 262144 */
  readonly streamBufferBytes?: number;
  /** The largest request body, in bytes; bigger is 413. @default 1048576 (1 MiB) */
  readonly maxBodyBytes?: number;
  /**
   * Open SSE streams one owner may hold at once (session and inspect streams together); one
   * more is 429 `too_many_streams`. Bounds what one client replaying a long log many times
   * over can take from everyone else. @default 128
   */
  readonly maxStreamsPerOwner?: number;
  /** Hints (`user.supplement`) that may wait in one session; one more is 429 `too_many_hints`. @default 100 */
  readonly maxPendingHints?: number;
  /** Total budget of each run, queue time included, in ms. @default none */
  readonly runTimeoutMs?: number;
  /** `grace_ms` of a new session that names none, in ms. @default 5000 */
  readonly defaultGraceMs?: number;
  /** Receives unexpected errors (answered as 500 `internal`). @default console.error */
  readonly reportError?: (error: unknown) => void;
  /**
   * The live lifecycle timeline: when given (its `inspect` handed to the runtime), `GET /inspect`
   * serves the timeline viewer and `GET /api/inspect/stream` streams the caller's transitions.
   */
  readonly timeline?: TimelineHub;
}

/** The service: the app and its lifecycle controls. */
export interface Service {
  /** The Hono app (`app.request(...)` in tests). */
  readonly app: Hono<{ Variables: { ownerId: string } }>;
  /** The web-standard handler: `fetch(request) → response`. */
  readonly fetch: (request: Request) => Response | Promise<Response>;
  /** Whether new work is refused (503) because the service is shutting down. */
  readonly draining: boolean;
  /** How many SSE streams are open. */
  readonly openStreams: number;
  /** Starts refusing new work: new sessions and `user.message` get 503 `shutting_down`. */
  drain(): void;
  /** Ends every open SSE stream (each client sees a clean end of stream). */
  closeStreams(): void;
}

type AppContext = Context<{ Variables: { ownerId: string } }>;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null;

const cancelModes: Record<string, CancelModeValue> = {
  immediate: CancelMode.Immediate,
  after_chat_model: CancelMode.AfterChatModel,
  after_tool_calls: CancelMode.AfterToolCalls,
  any_safe_point: CancelMode.AnySafePoint,
};

/** `application/json` or a `+json` type such as `application/merge-patch+json`, any parameters. */
const isJsonMediaType = (contentType: string): boolean => {
  const essence = contentType.split(';', 1)[0]?.trim().toLowerCase() ?? '';
  return essence === 'application/json' || /^application\/[\w.+-]+\+json$/.test(essence);
};

/** What a run ended as, in the record's form. */
export function toRecordOutcome(outcome: RunOutcome<unknown>): RunRecordOutcome {
  if (outcome.status === 'COMPLETED') {
    const output = isRecord(outcome.output) ? outcome.output : {};
    return {
      status: 'COMPLETED',
      reason:
        typeof output.reason === 'string'
          ? output.reason
          : outcome.interrupted
            ? 'interrupted'
            : 'completed',
      reply: typeof output.reply === 'string' ? output.reply : undefined,
    };
  }
  if (outcome.status === 'FAILED') {
    const { error } = outcome;
    return { status: 'FAILED', error: error instanceof Error ? error.message : String(error) };
  }
  return {
    status: 'CANCELLED',
    cause: outcome.cause,
    reason: outcome.reason,
    escalated: outcome.escalated,
    unsettled: outcome.unsettled,
  };
}

const positiveInt = z
  .number({ error: 'a positive integer' })
  .int({ error: 'a positive integer' })
  .positive({ error: 'a positive integer' });

const serviceOptionsSchema = z.object({
  authenticate: z.custom<Authenticate>((value) => typeof value === 'function', {
    error: 'a function of a token to an owner',
  }),
  heartbeatMs: positiveInt.optional(),
  streamBufferBytes: positiveInt.optional(),
  maxBodyBytes: positiveInt.optional(),
  maxStreamsPerOwner: positiveInt.optional(),
  maxPendingHints: positiveInt.optional(),
  runTimeoutMs: positiveInt.optional(),
  defaultGraceMs: z
    .number({ error: 'a non-negative integer' })
    .int({ error: 'a non-negative integer' })
    .nonnegative({ error: 'a non-negative integer' })
    .optional(),
});

const runJson = (record: RunRecord, liveStatus: string | undefined) => ({
  run_id: record.runId,
  session_id: record.sessionId,
  status: liveStatus ?? record.status,
  input: record.input,
  outcome: record.outcome ?? null,
  created_at: record.createdAt,
  updated_at: record.updatedAt,
  ended_at: record.endedAt ?? null,
});

/**
 * Creates the HTTP service.
 *
 * @remarks Routes (every `/api` route needs `Authorization: Bearer <token>`; the stream also
 * takes `?access_token=` because `EventSource` cannot send headers):
 * - `GET /` the chat page; `GET /healthz` liveness (503 while draining).
 * - `POST /api/sessions` `{ strategy?, grace_ms? }` → 201 session; `GET` / `PATCH
 *   /api/sessions/:id` → the session with its status, active run and queued runs.
 * - `POST /api/sessions/:id/events` `{ events: [...] }` → `{ results: [...] }`, one per event;
 *   the whole batch is validated before any event is applied.
 * - `GET /api/sessions/:id/events?after&limit&types`; `GET .../events/stream?after&types` (SSE,
 *   resuming from max(after, Last-Event-ID)).
 * - `GET /api/runs/:id` → the run's record.
 *
 * Errors are `{ error: { code, message } }`; someone else's session or run is 404, exactly
 * like one that does not exist. A run is recorded when it is created and again with its
 * outcome once it has settled (one write each); in between, its status is the live one.
 *
 * @param options - {@link ServiceOptions}
 * @returns the {@link Service}
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a bad option, e.g. a
 *   `heartbeatMs` that is not a positive integer
 * @example
 * ```ts
 * const service = createServiceApp({ runtime, agent, sessions, runs, authenticate });
 * const res = await service.app.request('/healthz');
 * ```
 */
export function createServiceApp(options: ServiceOptions): Service {
  parseOptions(serviceOptionsSchema, options, 'options');
  const { runtime, agent, sessions, runs, authenticate } = options;
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const defaultGraceMs = options.defaultGraceMs ?? 5_000;
  const reportError =
    options.reportError ?? ((error: unknown) => console.error('[runplane serve]', error));
  const clock = runtime.clock;
  const eventLog = runtime.eventLog;
  const streams = new Set<AbortController>();
  const maxStreamsPerOwner = options.maxStreamsPerOwner ?? 128;
  const maxPendingHints = options.maxPendingHints ?? 100;
  const streamsOf = new Map<string, number>();
  /** Counts an owner's open stream; @returns its release. @throws HttpError too_many_streams */
  const openStream = (ownerId: string): (() => void) => {
    const open = streamsOf.get(ownerId) ?? 0;
    if (open >= maxStreamsPerOwner) {
      throw new HttpError(
        'too_many_streams',
        `expected at most ${maxStreamsPerOwner} open streams per owner; close one first`,
      );
    }
    streamsOf.set(ownerId, open + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (streamsOf.get(ownerId) ?? 1) - 1;
      if (left === 0) streamsOf.delete(ownerId);
      else streamsOf.set(ownerId, left);
    };
  };
  let draining = false;

  const record = (fn: () => void) => {
    try {
      fn();
    } catch (error) {
      reportError(error);
    }
  };

  const app = new Hono<{ Variables: { ownerId: string } }>();

  app.onError((error, c) => {
    const httpError = toHttpError(error);
    if (httpError.code === 'internal' || httpError.code === 'store_failed') reportError(error);
    return c.json(httpError.toBody(), httpError.status as 400);
  });
  // A path the service knows, asked with a method it does not answer there, is 405 with Allow.
  const routePatterns = new Map<string, RegExp>();
  const allowedMethods = (path: string): string[] => {
    const methods = new Set<string>();
    for (const route of app.routes) {
      if (route.method === 'ALL') continue; // middleware
      let pattern = routePatterns.get(route.path);
      if (pattern === undefined) {
        const source = route.path
          .split('/')
          .map((part) =>
            part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'),
          )
          .join('/');
        pattern = new RegExp(`^${source}$`);
        routePatterns.set(route.path, pattern);
      }
      if (pattern.test(path)) methods.add(route.method);
    }
    return [...methods];
  };
  app.notFound((c) => {
    const allow = allowedMethods(c.req.path);
    if (allow.length > 0) {
      const error = new HttpError(
        'method_not_allowed',
        `expected one of ${allow.join(', ')} for ${c.req.path}, got ${c.req.method}`,
      );
      return c.json(error.toBody(), 405, { allow: allow.join(', ') });
    }
    return c.json(
      new HttpError('not_found', `no route for ${c.req.method} ${c.req.path}`).toBody(),
      404,
    );
  });

  app.get('/', (c) => c.html(chatPageHtml));
  if (options.timeline !== undefined) {
    // The page holds no data; the stream is owner-scoped and behind the /api auth below.
    const inspectPage = renderTimelinePage({
      title: 'runplane live',
      liveUrl: '/api/inspect/stream',
    });
    app.get('/inspect', (c) => c.html(inspectPage));
  }
  app.get('/healthz', (c) =>
    draining
      ? c.json(
          {
            status: 'draining',
            ...new HttpError('shutting_down', 'the service is shutting down').toBody(),
          },
          503,
        )
      : c.json({ status: 'ok' }),
  );

  // Authentication: every /api route; the stream may carry the token as ?access_token=.
  app.use('/api/*', async (c, next) => {
    const header = c.req.header('authorization');
    let token = bearerToken(header);
    if (token === undefined && header === undefined && c.req.path.endsWith('/events/stream')) {
      token = c.req.query('access_token');
    }
    const ownerId = token === undefined ? undefined : authenticate(token);
    if (ownerId === undefined) {
      c.header('WWW-Authenticate', 'Bearer realm="runplane"');
      throw new HttpError(
        'unauthorized',
        header === undefined && token === undefined
          ? 'expected an Authorization: Bearer <token> header'
          : 'the token is not valid',
      );
    }
    c.set('ownerId', ownerId);
    await next();
  });
  app.use(
    '/api/*',
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: () => {
        throw new HttpError(
          'payload_too_large',
          `expected a body of at most ${maxBodyBytes} bytes`,
        );
      },
    }),
  );

  const readJson = async (c: AppContext, emptyAs?: unknown): Promise<unknown> => {
    const text = await c.req.text();
    if (text.trim() === '' && emptyAs !== undefined) return emptyAs;
    // A body sent as a form or as text is a client mistake, not JSON to guess at.
    const type = c.req.header('content-type');
    if (text.trim() !== '' && type !== undefined && !isJsonMediaType(type)) {
      throw new HttpError(
        'unsupported_media_type',
        `expected Content-Type application/json (or a +json type), got ${JSON.stringify(type)}`,
      );
    }
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new HttpError(
        'invalid_json',
        text.trim() === '' ? 'expected a JSON body, got nothing' : 'expected the body to be JSON',
      );
    }
  };

  /** The query parameters, refusing a repeated `after`, `limit` or `types` (never a silent pick). */
  const eventQueryOf = (c: AppContext): Record<string, string | undefined> => {
    const all = c.req.queries();
    for (const name of ['after', 'limit', 'types']) {
      if ((all[name]?.length ?? 0) > 1) {
        throw new HttpError('invalid_query', `expected \`${name}\` at most once in the query`);
      }
    }
    return c.req.query();
  };

  const findSession = (c: AppContext): SessionRecord => {
    const sessionId = c.req.param('id') ?? '';
    const found = sessionId.length <= 256 ? sessions.get(c.get('ownerId'), sessionId) : undefined;
    if (found === undefined) {
      throw new HttpError('not_found', `session ${JSON.stringify(sessionId)} was not found`);
    }
    return found;
  };

  const sessionJson = (session: SessionRecord) => {
    const handle = runtime.session(session.ownerId, session.sessionId);
    const activeRunId = handle.activeRunId ?? null;
    const queued = handle.queuedRunIds;
    const key = { ownerId: session.ownerId, sessionId: session.sessionId };
    return {
      session_id: session.sessionId,
      strategy: session.strategy,
      grace_ms: session.graceMs,
      status: activeRunId !== null ? 'running' : queued.length > 0 ? 'queued' : 'idle',
      active_run_id: activeRunId,
      queued_run_ids: queued,
      pending_approvals: runtime
        .pendingApprovals(session.ownerId, session.sessionId)
        .map((p) => ({ tool_use_id: p.toolUseId, name: p.name, args: p.args, run_id: p.runId })),
      last_seq: eventLog.lastSeq({}, key),
      created_at: session.createdAt,
      updated_at: session.updatedAt,
    };
  };

  const refuseWhileDraining = () => {
    if (draining) {
      throw new HttpError('shutting_down', 'the service is shutting down and takes no new work');
    }
  };

  app.post('/api/sessions', async (c) => {
    refuseWhileDraining();
    const settings = parseBody(sessionSettingsSchema, await readJson(c, {}), 'body');
    const created = sessions.create({
      ownerId: c.get('ownerId'),
      sessionId: nanoid(),
      strategy: settings.strategy ?? 'enqueue',
      graceMs: settings.grace_ms ?? defaultGraceMs,
      at: clock.now(),
    });
    if (created === undefined) throw new HttpError('internal', 'a session id collided');
    return c.json(sessionJson(created), 201);
  });

  app.get('/api/sessions/:id', (c) => c.json(sessionJson(findSession(c))));

  app.patch('/api/sessions/:id', async (c) => {
    const session = findSession(c);
    const settings = parseBody(sessionSettingsSchema, await readJson(c), 'body');
    if (settings.strategy === undefined && settings.grace_ms === undefined) {
      throw new HttpError('invalid_body', 'expected the body to set `strategy` or `grace_ms`');
    }
    const updated = sessions.update(
      session.ownerId,
      session.sessionId,
      { strategy: settings.strategy, graceMs: settings.grace_ms },
      clock.now(),
    );
    if (updated === undefined) throw new HttpError('not_found', 'the session was not found');
    return c.json(sessionJson(updated));
  });

  const recordOutcome = (runId: string, outcome: RunOutcome<unknown>) =>
    record(() => runs.finish(runId, toRecordOutcome(outcome), clock.now()));

  const applyEvent = (
    session: SessionRecord,
    event: UserEvent,
    index: number,
    results: unknown[],
  ): Record<string, unknown> => {
    const { ownerId, sessionId } = session;
    const key: SessionKey = { ownerId, sessionId };
    switch (event.type) {
      case 'user.message': {
        const strategy = event.payload.strategy ?? session.strategy;
        const handle = runtime.session(ownerId, sessionId);
        const busy = () =>
          new HttpError(
            'session_busy',
            `session ${sessionId} is busy with run ${handle.activeRunId ?? '(queued work)'}`,
            { active_run_id: handle.activeRunId ?? null, event_index: index },
            { results },
          );
        if (
          strategy === 'reject' &&
          (handle.activeRunId !== undefined || handle.queuedRunIds.length > 0)
        ) {
          throw busy();
        }
        const run = runtime.prepare({
          ownerId,
          sessionId,
          agent,
          input: event.payload.text,
          strategy,
          graceMs: session.graceMs,
          timeoutMs: options.runTimeoutMs,
        });
        try {
          runs.create({
            runId: run.id,
            ownerId,
            sessionId,
            input: event.payload.text,
            at: clock.now(),
          });
          eventLog.append({}, key, {
            runId: run.id,
            type: 'user.message',
            payload: { run_id: run.id, text: event.payload.text },
            at: clock.now(),
          });
        } catch (error) {
          // Never leave a prepared run behind that nobody can see.
          run.cancel({ reason: 'the store failed before the run started' });
          throw error;
        }
        void run.termination.then((outcome) => recordOutcome(run.id, outcome));
        try {
          run.start();
        } catch (error) {
          if (error instanceof SessionBusyError) throw busy();
          throw error;
        }
        return { type: event.type, result: 'accepted', run_id: run.id, status: run.status };
      }
      case 'user.interrupt': {
        const payload = event.payload ?? {};
        const mode = payload.mode ?? 'immediate';
        const reason = payload.reason ?? 'user.interrupt';
        const act = (runId: string) =>
          mode === 'interrupt'
            ? runtime.runs.interrupt(ownerId, sessionId, runId, reason)
            : runtime.runs.cancel(ownerId, sessionId, runId, {
                mode: cancelModes[mode] ?? CancelMode.Immediate,
                timeoutMs: payload.timeout_ms,
                reason,
              });
        if (payload.run_id !== undefined) {
          return { type: event.type, result: act(payload.run_id), run_id: payload.run_id };
        }
        // Without run_id: the session's active run now, or nothing (nothing is remembered).
        const activeRunId = runtime.session(ownerId, sessionId).activeRunId;
        const active =
          activeRunId === undefined
            ? undefined
            : runtime.runs.find(ownerId, sessionId, activeRunId);
        if (
          activeRunId === undefined ||
          active === undefined ||
          terminalRunStatuses.has(active.status)
        ) {
          return { type: event.type, result: 'idle', run_id: null };
        }
        const result = act(activeRunId);
        return {
          type: event.type,
          result: result === 'accepted' ? 'accepted' : 'idle',
          run_id: result === 'accepted' ? activeRunId : null,
        };
      }
      case 'user.tool_confirmation': {
        const { tool_use_id: toolUseId, allow } = event.payload;
        const message = event.payload.deny_message ?? event.payload.denyMessage;
        const result = runtime.approve(ownerId, sessionId, toolUseId, { allow, message });
        return { type: event.type, result, tool_use_id: toolUseId };
      }
      case 'user.supplement': {
        // Hints wait for the session's next reasoning step; a client that floods them would
        // grow every later model request.
        if (runtime.inbox.size(ownerId, sessionId) >= maxPendingHints) {
          throw new HttpError(
            'too_many_hints',
            `expected at most ${maxPendingHints} hints waiting in session ${sessionId}; wait for a run to read them`,
            { event_index: index },
            { results },
          );
        }
        const hintId = runtime.inbox.push(ownerId, sessionId, {
          text: event.payload.text,
          source: 'user-supplement',
        });
        eventLog.append({}, key, {
          type: 'user.supplement',
          payload: { hint_id: hintId, text: event.payload.text },
          at: clock.now(),
        });
        return { type: event.type, result: 'accepted', hint_id: hintId };
      }
    }
  };

  app.post('/api/sessions/:id/events', async (c) => {
    const session = findSession(c);
    const events = parseEventBatch(await readJson(c));
    if (events.some((event) => event.type === 'user.message')) refuseWhileDraining();
    const results: unknown[] = [];
    events.forEach((event, index) => results.push(applyEvent(session, event, index, results)));
    return c.json({ results });
  });

  app.get('/api/sessions/:id/events', async (c) => {
    const session = findSession(c);
    const query = parseEventQuery(eventQueryOf(c), true);
    const key = { ownerId: session.ownerId, sessionId: session.sessionId };
    const lastSeq = eventLog.lastSeq({}, key);
    const read = await eventLog.read({}, key, {
      after: query.after,
      limit: query.limit + 1,
      types: query.types,
    });
    const page = read.slice(0, query.limit);
    return c.json({
      events: page.map(toEventJson),
      // Never past the end: a client that follows it must not skip events yet to come.
      next_after: page.at(-1)?.seq ?? Math.min(query.after, lastSeq),
      has_more: read.length > query.limit,
      last_seq: lastSeq,
    });
  });

  app.get('/api/sessions/:id/events/stream', (c) => {
    const session = findSession(c);
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
    const release = openStream(c.get('ownerId'));
    const stop = new AbortController();
    const onRequestAbort = () => stop.abort();
    c.req.raw.signal.addEventListener('abort', onRequestAbort, { once: true });
    streams.add(stop);
    const body = createEventStream({
      eventLog,
      key: { ownerId: session.ownerId, sessionId: session.sessionId },
      after,
      types: query.types,
      clock,
      heartbeatMs,
      maxBufferedBytes: options.streamBufferBytes,
      signal: stop.signal,
      reportError,
      onClose: () => {
        release();
        streams.delete(stop);
        c.req.raw.signal.removeEventListener('abort', onRequestAbort);
      },
    });
    return new Response(body, {
      headers: {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        'x-accel-buffering': 'no',
      },
    });
  });

  if (options.timeline !== undefined) {
    const hub = options.timeline;
    // Registered after the /api auth middleware: the owner comes from the token.
    app.get('/api/inspect/stream', (c) => {
      const raw = c.req.header('last-event-id') ?? c.req.query('after') ?? '0';
      if (!/^\d{1,15}$/.test(raw)) {
        throw new HttpError('invalid_query', 'expected `after` to be a non-negative integer');
      }
      const release = openStream(c.get('ownerId'));
      const controller = new AbortController();
      streams.add(controller);
      controller.signal.addEventListener(
        'abort',
        () => {
          release();
          streams.delete(controller);
        },
        { once: true },
      );
      c.req.raw.signal.addEventListener('abort', () => controller.abort(), { once: true });
      const body = hub.stream(c.get('ownerId'), {
        after: Number(raw),
        signal: controller.signal,
        heartbeatMs,
      });
      return new Response(body, {
        headers: {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache',
          'x-accel-buffering': 'no',
        },
      });
    });
  }

  app.get('/api/runs/:id', (c) => {
    const runId = c.req.param('id');
    const found = runId.length <= 256 ? runs.get(c.get('ownerId'), runId) : undefined;
    if (found === undefined) {
      throw new HttpError('not_found', `run ${JSON.stringify(runId)} was not found`);
    }
    const live = runtime.runs.find(found.ownerId, found.sessionId, found.runId);
    return c.json(runJson(found, live?.status));
  });

  return {
    app,
    fetch: (request) => app.fetch(request),
    get draining() {
      return draining;
    },
    get openStreams() {
      return streams.size;
    },
    drain() {
      draining = true;
    },
    closeStreams() {
      for (const stop of [...streams]) stop.abort();
    },
  };
}
