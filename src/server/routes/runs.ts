/**
 * The run route: `GET /api/runs/:id`, the run's record with its live status.
 *
 * @module
 */
import { Hono } from 'hono';
import type { RunRecord } from '../../stores/run-records.js';
import { HttpError } from '../http-error.js';
import { maxIdLength } from '../middleware/find-session.js';
import type { SessionAccess } from '../session-access.js';
import type { ServiceEnv } from '../service-env.js';

/** What the run route needs. */
export interface RunRoutesOptions {
  /** How runs are read (`SessionAccess.getRun`: a run of a deleted session is not found). */
  readonly access: SessionAccess;
}

const runJson = (record: RunRecord) => ({
  run_id: record.runId,
  session_id: record.sessionId,
  status: record.status,
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
  const { access } = options;
  const app = new Hono<ServiceEnv>();
  app.get('/api/runs/:id', async (c) => {
    const runId = c.req.param('id');
    const found =
      runId.length <= maxIdLength ? await access.getRun(c.get('ownerId'), runId) : undefined;
    if (found === undefined) {
      throw new HttpError('not_found', `run ${JSON.stringify(runId)} was not found`);
    }
    return c.json(runJson(found));
  });
  return app;
}
