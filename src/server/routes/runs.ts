/**
 * The run route: `GET /api/runs/:id`, the run's record with its live status.
 *
 * @module
 */
import { Hono } from 'hono';
import type { Runtime } from '../../runtime/create-runtime.js';
import type { RunRecord, RunRecords } from '../../stores/run-records.js';
import type { SessionRecords } from '../../stores/session-records.js';
import { HttpError } from '../http-error.js';
import { maxIdLength } from '../middleware/find-session.js';
import type { ServiceEnv } from '../service-env.js';

/** What the run route needs. */
export interface RunRoutesOptions {
  readonly runtime: Runtime;
  /** Where runs are recorded. */
  readonly runs: RunRecords;
  /** Where sessions are kept: a run of a deleted session is not found. */
  readonly sessions: SessionRecords;
}

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
 * The run route, to mount with `app.route('/', ...)` behind the `/api` middleware. A run in
 * flight shows its live status; a settled one its recorded outcome.
 *
 * @param options - {@link RunRoutesOptions}
 * @returns the route as a Hono app
 */
export function runRoutes(options: RunRoutesOptions): Hono<ServiceEnv> {
  const { runtime, runs, sessions } = options;
  const app = new Hono<ServiceEnv>();
  app.get('/api/runs/:id', (c) => {
    const runId = c.req.param('id');
    const found = runId.length <= maxIdLength ? runs.get(c.get('ownerId'), runId) : undefined;
    if (found === undefined || sessions.get(found.ownerId, found.sessionId) === undefined) {
      throw new HttpError('not_found', `run ${JSON.stringify(runId)} was not found`);
    }
    const live = runtime.runs.find(found.ownerId, found.sessionId, found.runId);
    return c.json(runJson(found, live?.status));
  });
  return app;
}
