/**
 * How the service's routes and middleware reach sessions: one asynchronous interface,
 * {@link SessionAccess}, between HTTP and whatever holds a session's state (docs/architecture.md,
 * "Cluster on Redis", the seam; "Event log and HTTP service").
 *
 * A short tour:
 * - **Commands** change a session and go to the session's one writer, the holder of its lease.
 *   They are {@link SessionCommand}s, sent through {@link SessionAccess.execute}: `session.create`
 *   (`POST /api/sessions`), `session.update` (`PATCH /api/sessions/:id`), `session.delete`
 *   (`DELETE /api/sessions/:id`) and `session.apply_events` (`POST /api/sessions/:id/events`: a
 *   batch of `user.message` (a run, or a loop item), `user.interrupt` (cancel or interrupt a run
 *   by id, or the active one), `user.tool_confirmation` (answer an approval) and
 *   `user.supplement` (a hint), applied in order as one step). A command is data only (it
 *   travels as JSON through the session's command Stream in a cluster) and each one is applied
 *   whole on the holder. Its answer ({@link SessionCommandAnswers}) is data too, what the route
 *   answers; a refusal is an {@link HttpError}, which `toData`/`HttpError.fromData` carry
 *   through JSON with the same HTTP answer.
 * - **Reads** may be answered by any instance: {@link SessionAccess.findSession},
 *   {@link SessionAccess.listSessions}, {@link SessionAccess.viewSession},
 *   {@link SessionAccess.getRun} and the event log ({@link SessionAccess.events}: a page, a
 *   follow, the last `seq`). In a cluster they come from Redis, so a client sees only what is
 *   durable there.
 * - **Idempotency keys** ({@link SessionAccess.idempotencyKeys}) are per owner, shared by every
 *   instance in a cluster.
 *
 * `local-session-access.ts` is the single-instance implementation: it wraps the runtime and the
 * record stores exactly as the routes used them. What stays per instance is not here: the
 * inspect stream, metrics, health, the drain flag and the stream quota.
 *
 * @module
 */
import type { z } from 'zod';
import type { RunplaneEvent, SessionKey, StoreContext, ReadOptions } from '../events/event-log.js';
import type {
  BeginIdempotentRequest,
  IdempotencyClaim,
  StoredAnswer,
} from '../stores/idempotency-keys.js';
import type { RunRecord } from '../stores/run-records.js';
import type {
  FailoverPolicy,
  SessionCursor,
  SessionMode,
  SessionRecord,
} from '../stores/session-records.js';
import type { sessionSettingsSchema, SessionStrategy, UserEvent } from './schemas.js';
import type { EventResult } from './session-events.js';

/**
 * The settings a session is created or changed with: the body of `POST /api/sessions` and
 * `PATCH /api/sessions/:id` as `sessionSettingsSchema` (`schemas.ts`) validated it (`mode`,
 * `strategy`, `grace_ms` and `approval_timeout_ms` in ms, `failover`, each optional).
 */
export type SessionSettings = z.output<typeof sessionSettingsSchema>;

/** A session as the API shows it (`GET /api/sessions/:id`), with its live status. */
export interface SessionView {
  readonly session_id: string;
  readonly mode: SessionMode;
  /** `null` for a loop session (its TurnLoop decides). */
  readonly strategy: SessionStrategy | null;
  /** In ms. */
  readonly grace_ms: number;
  /** In ms; the service's default when the session sets none. */
  readonly approval_timeout_ms: number;
  /** What a cluster does with the running run when its holder is lost: `mark` or `resume`. */
  readonly failover: FailoverPolicy;
  readonly status: 'running' | 'queued' | 'idle';
  readonly active_run_id: string | null;
  readonly queued_run_ids: readonly string[];
  readonly pending_approvals: ReadonlyArray<{
    readonly tool_use_id: string;
    readonly name: string;
    readonly args: unknown;
    readonly run_id: string;
  }>;
  readonly last_seq: number;
  /** Clock ms. */
  readonly created_at: number;
  /** Clock ms. */
  readonly updated_at: number;
  /**
   * A cluster's only (`GET /api/sessions/:id` with `runplane serve --redis`): the instance that
   * holds the session's lease, read from Redis; `null` while nobody holds it (an idle session is
   * released after 30 s). Absent on a single instance.
   */
  readonly holder?: SessionHolder | null;
}

/** Who drives a session in a cluster: its lease holder (README "Cluster"). */
export interface SessionHolder {
  /** The holder's `--instance-id`. */
  readonly instance_id: string;
  /** The lease's fence (it only grows; a new holder has a larger one). */
  readonly fence: number;
  /**
   * When the lease expires unless renewed (every third of `--lease-ttl-ms`), as Unix ms on
   * Redis's clock (`PEXPIRETIME`).
   */
  readonly lease_expires_at: number;
}

/**
 * A change to one session, as data (JSON in a cluster's command Stream). `ownerId` is the
 * authenticated owner; `sessionId` of `session.create` is the new session's id, chosen by the
 * receiving instance so that the command can be routed (and retried) before the session exists.
 */
export type SessionCommand =
  | {
      readonly type: 'session.create';
      readonly ownerId: string;
      readonly sessionId: string;
      readonly settings: SessionSettings;
    }
  | {
      readonly type: 'session.update';
      readonly ownerId: string;
      readonly sessionId: string;
      readonly settings: SessionSettings;
    }
  | { readonly type: 'session.delete'; readonly ownerId: string; readonly sessionId: string }
  | {
      readonly type: 'session.apply_events';
      readonly ownerId: string;
      readonly sessionId: string;
      /** Validated by `parseEventBatch` (`schemas.ts`). */
      readonly events: readonly UserEvent[];
    };

/** What each {@link SessionCommand} answers, by its `type` (the route's body, as data). */
export interface SessionCommandAnswers {
  /** Answered `201` by the route. */
  readonly 'session.create': SessionView;
  readonly 'session.update': SessionView;
  /** Answered once the session's runs have settled (`204` by the route). */
  readonly 'session.delete': null;
  /** One result per event, in order. */
  readonly 'session.apply_events': { readonly results: readonly EventResult[] };
}

/** The answer of a command of type `TType`. */
export type SessionCommandAnswer<TType extends SessionCommand['type']> =
  SessionCommandAnswers[TType];

/** The event log, read: the part of `EventLog` a reader on any instance has (all async). */
export interface SessionEventReads {
  /** Stored events after `options.after`, oldest first. */
  read(ctx: StoreContext, key: SessionKey, options?: ReadOptions): Promise<RunplaneEvent[]>;
  /** Replays from `options.after`, then follows until `ctx.signal` aborts (then it ends). */
  follow(ctx: StoreContext, key: SessionKey, options?: ReadOptions): AsyncIterable<RunplaneEvent>;
  /** The last `seq` of the session, 0 when empty. */
  lastSeq(ctx: StoreContext, key: SessionKey): Promise<number>;
}

/** The idempotency keys of `IdempotencyKeys` (`stores/idempotency-keys.ts`), asynchronous. */
export interface IdempotencyKeyAccess {
  /** Claims a key, or says what holds it. */
  begin(request: BeginIdempotentRequest): Promise<IdempotencyClaim>;
  /** Keeps the answer of a claimed key. */
  complete(ownerId: string, key: string, answer: StoredAnswer): Promise<void>;
  /** Forgets a claimed key whose request applied nothing. */
  release(ownerId: string, key: string): Promise<void>;
  /** Forgets the answered keys of every request about a session. */
  forgetSession(ownerId: string, sessionId: string): Promise<void>;
}

/**
 * How routes and middleware reach sessions (see the module's tour). Every method is async; a
 * rejection is an {@link HttpError} (e.g. `not_found`, `session_busy` with `results`) or a
 * `RunplaneError` (`STORE_FAILED`), which the app answers through `toHttpError`.
 */
export interface SessionAccess {
  /** Read: the caller's live session, or `undefined` (another owner's, deleted, or none). */
  findSession(ownerId: string, sessionId: string): Promise<SessionRecord | undefined>;
  /** Read: the owner's sessions, newest first, after `page.after`; at most `page.limit`. */
  listSessions(
    ownerId: string,
    page: { readonly after?: SessionCursor | undefined; readonly limit: number },
  ): Promise<SessionRecord[]>;
  /** Read: a session with its live status, active and queued runs, and waiting approvals. */
  viewSession(session: SessionRecord): Promise<SessionView>;
  /**
   * Read: the run of `runId` when `ownerId` owns it and its session is live, its `status` the
   * live one while it runs; else `undefined`.
   */
  getRun(ownerId: string, runId: string): Promise<RunRecord | undefined>;
  /** Reads of sessions' event logs. */
  readonly events: SessionEventReads;
  /** The `Idempotency-Key` store. */
  readonly idempotencyKeys: IdempotencyKeyAccess;
  /**
   * Applies a command on the session's holder.
   *
   * @param command - a {@link SessionCommand}
   * @returns its {@link SessionCommandAnswers} entry
   * @throws {@link HttpError} with the route's refusal: `not_found` (the session is gone),
   *   `invalid_body`, `too_many_sessions`, `session_busy`, `session_queue_full`,
   *   `too_many_runs`, `too_many_hints`, `invalid_event`, `shutting_down`; `RunplaneError`
   *   (`STORE_FAILED`) when a store fails
   */
  execute<TCommand extends SessionCommand>(
    command: TCommand,
  ): Promise<SessionCommandAnswer<TCommand['type']>>;
}
