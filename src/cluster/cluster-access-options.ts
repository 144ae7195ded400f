/**
 * The options of a cluster's session access (`cluster-session-access.ts`): what each field is
 * for, its constraint and its default, checked once at construction with one message shape
 * (`expected <name> to be …, got …`).
 *
 * @module
 * @internal
 */
import type { SessionKey } from '../events/event-log.js';
import type { SessionAccess } from '../server/session-access.js';
import type { ClusterInstance } from './cluster-instance.js';
import { checkInteger } from './cluster-options.js';
import type { LiveStateSource } from './live-state.js';

/** @internal Options of `createClusterSessionAccess`. Times are ms of the cluster's clock unless said. */
export interface ClusterSessionAccessOptions {
  /** This instance of the cluster: its leases, outboxes and connection. */
  readonly cluster: ClusterInstance;
  /** The single-instance access over this instance's runtime: how a held session is changed. */
  readonly local: SessionAccess;
  /**
   * This instance's runtime (the one `local` drives): the live state of the sessions held here
   * (active and queued runs, waiting approvals) is written to Redis from its events.
   */
  readonly runtime: LiveStateSource;
  /**
   * The approval timeout of a session that sets none, in ms: what a session read from Redis
   * shows (the service's `approvalTimeoutMs`). A positive integer. @default 600000
   */
  readonly defaultApprovalTimeoutMs?: number;
  /**
   * Sessions one owner may have across the cluster (the service's `maxSessionsPerOwner`): a
   * create first reserves a slot in Redis, and one more is 429 `too_many_sessions`. A positive
   * integer. @default 10000
   */
  readonly maxSessionsPerOwner?: number;
  /**
   * How long a create's reservation holds if no indexed session follows it (the create failed
   * without a word, its instance died), in ms of `now`. A positive integer. @default 60000
   */
  readonly sessionReservationMs?: number;
  /**
   * Wall-clock ms shared by the instances (give or take their skew, far below a
   * reservation's hold): when a session reservation expires. @default Date.now
   */
  readonly now?: () => number;
  /**
   * Called once each time this instance takes a session's lease, before any command of the
   * session is applied here: the place to rebuild the session from its records. A rejection
   * gives the lease back and fails the command that took it.
   */
  readonly onAcquired?: (key: SessionKey) => void | Promise<void>;
  /**
   * How long a command sent to another instance waits for its answer before it fails with
   * `COMMAND_TIMEOUT` (the command may still be applied). A positive integer. @default 30000
   */
  readonly commandTimeoutMs?: number;
  /**
   * How often a sender checks, in one round trip, for the answers it waits for and for their
   * holders' leases: the backstop of a lost answer nudge, and how a sender notices that a holder
   * died (then it takes the lease). A positive integer. @default 1000
   */
  readonly answerPollMs?: number;
  /**
   * How long Redis keeps an answer nobody has read, in ms of Redis's clock (the sender reads
   * and deletes it). An integer of at least 1000. @default 60000
   */
  readonly answerTtlMs?: number;
  /** A command's JSON, in bytes; a larger one is 413 `payload_too_large`. @default 2097152 (2 MiB) */
  readonly maxCommandBytes?: number;
  /**
   * Entries one session's command Stream may hold (applied ones are trimmed); one more is 429
   * `session_queue_full`. A positive integer. @default 1000
   */
  readonly maxPendingCommands?: number;
  /** How many command Stream entries the holder reads at a time. A positive integer. @default 64 */
  readonly readBatchSize?: number;
  /**
   * Whether a sender nudges the holder over pub/sub. `false` leaves the holder to find commands
   * on its renew beat alone (how tests show that a lost nudge delays a command and never loses
   * it). @default true
   */
  readonly nudgeHolders?: boolean;
  /** Receives failures nobody waits for: a holder's read of the Stream, a failed takeover. @default console.error */
  readonly reportError?: (error: unknown) => void;
}

/** @internal The options with every default applied. */
export interface ResolvedClusterSessionAccessOptions {
  readonly cluster: ClusterInstance;
  readonly local: SessionAccess;
  readonly runtime: LiveStateSource;
  readonly defaultApprovalTimeoutMs: number;
  readonly maxSessionsPerOwner: number;
  readonly sessionReservationMs: number;
  readonly now: () => number;
  readonly onAcquired: (key: SessionKey) => void | Promise<void>;
  readonly commandTimeoutMs: number;
  readonly answerPollMs: number;
  readonly answerTtlMs: number;
  readonly maxCommandBytes: number;
  readonly maxPendingCommands: number;
  readonly readBatchSize: number;
  readonly nudgeHolders: boolean;
  readonly reportError: (error: unknown) => void;
}

/**
 * @internal Applies the defaults and checks every option.
 *
 * @throws `InvalidArgumentError` (`INVALID_ARGUMENT`) naming the first bad option
 */
export function resolveClusterSessionAccessOptions(
  options: ClusterSessionAccessOptions,
): ResolvedClusterSessionAccessOptions {
  return {
    cluster: options.cluster,
    local: options.local,
    runtime: options.runtime,
    defaultApprovalTimeoutMs: checkInteger(
      'defaultApprovalTimeoutMs',
      options.defaultApprovalTimeoutMs,
      600_000,
      1,
    ),
    maxSessionsPerOwner: checkInteger(
      'maxSessionsPerOwner',
      options.maxSessionsPerOwner,
      10_000,
      1,
    ),
    sessionReservationMs: checkInteger(
      'sessionReservationMs',
      options.sessionReservationMs,
      60_000,
      1,
    ),
    now: options.now ?? Date.now,
    onAcquired: options.onAcquired ?? (() => undefined),
    commandTimeoutMs: checkInteger('commandTimeoutMs', options.commandTimeoutMs, 30_000, 1),
    answerPollMs: checkInteger('answerPollMs', options.answerPollMs, 1_000, 1),
    answerTtlMs: checkInteger('answerTtlMs', options.answerTtlMs, 60_000, 1_000),
    maxCommandBytes: checkInteger('maxCommandBytes', options.maxCommandBytes, 2 * 1024 * 1024, 1),
    maxPendingCommands: checkInteger('maxPendingCommands', options.maxPendingCommands, 1_000, 1),
    readBatchSize: checkInteger('readBatchSize', options.readBatchSize, 64, 1),
    nudgeHolders: options.nudgeHolders ?? true,
    reportError:
      options.reportError ?? ((error: unknown) => console.error('[runplane cluster]', error)),
  };
}
