/**
 * The Hono environment every route and middleware of the service shares: what a request
 * carries once the middleware before it have run.
 *
 * @module
 */
import type { SessionRecord } from '../stores/session-records.js';
import type { StreamLease } from './middleware/stream-quota.js';

/** The variables middleware set on a request's context. */
export interface ServiceVariables {
  /** The owner the Bearer token names (set by {@link bearerAuth}). */
  ownerId: string;
  /** The caller's session named by `:id` (set by `findSession`). */
  session: SessionRecord;
  /** The parsed JSON body (set by `jsonBody`). */
  body: unknown;
  /** The open stream's lease: its stop signal and its release (set by `streamQuota`). */
  stream: StreamLease;
}

/** The Hono environment of the service. */
export interface ServiceEnv {
  Variables: ServiceVariables;
}
