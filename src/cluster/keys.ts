/**
 * The Redis key layout of a cluster (docs/architecture.md, "Cluster on Redis"): every key of a
 * session shares one hash tag, so every script touches one slot and the layout runs on Redis
 * Cluster too.
 *
 * @module
 * @internal
 */
import { InvalidArgumentError } from '../errors.js';
import type { SessionKey } from '../events/event-log.js';

/** @internal The default prefix of every key runplane writes. */
export const defaultKeyPrefix = 'rp:';

/**
 * @internal The keys of one session. All share the hash tag `{s:<len>:<owner>/<len>:<sid>}`.
 */
export interface SessionKeys {
  /** The hash tag, braces included. */
  readonly tag: string;
  /** String with a TTL: `<instanceId>:<fence>` of the holder. */
  readonly lease: string;
  /** String (INCR): the last fence granted; never decreases, never expires. */
  readonly fence: string;
  /** String: the last `seq` in the event Stream (the cheap "anything new?" probe). */
  readonly seq: string;
  /** String: the id of the last batch applied (a retried batch is recognised, not re-applied). */
  readonly batch: string;
  /** Stream: the event log, entry id `<seq>-0`, field `e` = the event's JSON. */
  readonly events: string;
  /** Set: every run id that logged an event (`EventLog.hasRun`). */
  readonly eventRuns: string;
  /** Set: the ids of the runs that have a record. */
  readonly runs: string;
  /** Hash: session meta fields. */
  readonly meta: string;
  /** List: the session's conversation history, one message JSON per element, oldest first. */
  readonly history: string;
  /** Stream: commands for the session from other instances, fields `r`, `i`, `c`. */
  readonly commands: string;
  /** String: the id of the last command Stream entry the holder applied. */
  readonly commandsApplied: string;
  /** Pub/sub channel (not a key): "seq N is in the Stream" nudges for followers. */
  readonly tailChannel: string;
  /** Hash: one run's record, a field per record field (JSON values). */
  run(runId: string): string;
  /** String with a TTL: the answer of the command sent with `requestId`. */
  answer(requestId: string): string;
}

/**
 * @internal Checks a key prefix: a non-empty string without braces (a brace would move the
 * hash tag into the prefix and put every session in one slot).
 *
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) otherwise
 */
export function checkKeyPrefix(prefix: string): string {
  if (typeof prefix !== 'string' || prefix.length === 0 || /[{}]/.test(prefix)) {
    throw new InvalidArgumentError(
      'keyPrefix',
      `expected \`keyPrefix\` to be a non-empty string without braces, got ${JSON.stringify(prefix)}`,
    );
  }
  return prefix;
}

/**
 * The hash tag of a session: length-prefixed ids, like `toSessionKeyString`, so no
 * choice of ids makes two sessions share keys. Redis hashes the text up to the first `}`; an id
 * holding a `}` shortens the tag, yet every key of the session still begins with the same text,
 * so they still share one slot.
 */
function toSessionTag(key: SessionKey): string {
  return `{s:${key.ownerId.length}:${key.ownerId}/${key.sessionId.length}:${key.sessionId}}`;
}

/** @internal The keys of `key`'s session under `prefix` (checked with {@link checkKeyPrefix}). */
export function toSessionKeys(key: SessionKey, prefix: string = defaultKeyPrefix): SessionKeys {
  const base = `${prefix}${toSessionTag(key)}`;
  return {
    tag: toSessionTag(key),
    lease: `${base}:lease`,
    fence: `${base}:fence`,
    seq: `${base}:seq`,
    batch: `${base}:batch`,
    events: `${base}:events`,
    eventRuns: `${base}:event-runs`,
    runs: `${base}:runs`,
    meta: `${base}:meta`,
    history: `${base}:history`,
    commands: `${base}:commands`,
    commandsApplied: `${base}:commands-applied`,
    tailChannel: `${prefix}tail:${toSessionTag(key)}`,
    run: (runId) => `${base}:run:${runId}`,
    answer: (requestId) => `${base}:answer:${requestId}`,
  };
}

/**
 * @internal The pub/sub channel of one instance: nudges for the sessions it holds ("a command
 * waits") and for the commands it sent ("its answer is in").
 */
export const toInstanceChannel = (instanceId: string, prefix: string = defaultKeyPrefix): string =>
  `${prefix}instance:${instanceId}`;
