/**
 * A session's command Stream, as data (docs/architecture.md, "Cluster on Redis"): how a command
 * for a session held elsewhere is written, read back by the holder, answered, and how instances
 * nudge each other about it.
 *
 * - An entry is `r` (the request id), `i` (the sending instance) and `c` (the command's JSON),
 *   appended by a script that refuses past a bound and answers who holds the lease.
 * - The holder reads entries past its applied cursor, in Stream order, and applies each one. The
 *   batch that carries a command's effect also carries `commands.applied` (the cursor, which
 *   trims the entries before it) and `command.answer` (the answer under the request id, with a
 *   TTL, and an "answer is in" nudge on the sender's instance channel).
 * - An answer is `{ ok: true, answer }` or `{ ok: false, error }` with `HttpError.toData()`.
 * - An instance channel carries `{ t: 'c', o, s }` ("a command for session s of owner o waits")
 *   and `{ t: 'a', r }` ("the answer of request r is in", with the answer's JSON as `a` when it
 *   is at most `maxInlineCommandBytes` (16 KiB): it is published by the batch that stored it, so
 *   it is durable as well). The append script sends the first
 *   itself, with `e` (the entry's id) and `p` (the id of the Stream's last entry before it) and,
 *   for a command of at most `maxInlineCommandBytes` (16 KiB), the entry's `r`, `i` and `c`: a holder
 *   whose applied cursor is `p` applies the entry from the nudge, without reading the Stream.
 *
 * @module
 * @internal
 */
import type { Redis } from 'ioredis';
import type { SessionKey } from '../events/event-log.js';
import { HttpError, toHttpError } from '../server/http-error.js';
import type { SessionCommand } from '../server/session-access.js';
import type { SessionKeys } from './keys.js';
import type { RecordOp } from './outbox.js';

/** @internal One entry of a command Stream, read back. */
export interface CommandEntry {
  /** The Stream entry id (`<ms>-<n>`). */
  readonly id: string;
  /** The request id the sender waits on; `''` when the entry has none. */
  readonly requestId: string;
  /** The instance that sent it (its channel gets the answer nudge). */
  readonly instanceId: string;
  /** The command, or why the entry holds none that this session can apply. */
  readonly command: SessionCommand | HttpError;
}

/**
 * @internal The entry a nudge carries: the Stream entry itself, and `previousId`, the id of the
 * Stream's last entry when it was appended (`0-0`: none).
 */
export interface NudgedEntry {
  readonly previousId: string;
  readonly requestId: string;
  readonly instanceId: string;
  readonly id: string;
  /** The command's JSON, as in the Stream entry (read with the session's key, as there). */
  readonly json: string;
}

/** @internal A message on an instance channel. */
export type InstanceMessage =
  | { readonly t: 'c'; readonly o: string; readonly s: string; readonly entry?: NudgedEntry }
  | { readonly t: 'a'; readonly r: string; readonly answer?: string };

/**
 * The largest command (bytes of JSON) a nudge carries; a larger one is read from the
 * Stream (a nudge goes to every subscriber of the channel, and is not bounded like the Stream).
 */
const maxInlineCommandBytes = 16 * 1024;

const commandTypes = new Set<string>([
  'session.create',
  'session.update',
  'session.delete',
  'session.apply_events',
]);

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Reads a command from an entry's JSON: a known `type`, for the Stream's own session. (It was
 * validated by the route that took it; this guards against an entry no instance wrote.)
 */
function toCommand(json: string | undefined, key: SessionKey): SessionCommand | HttpError {
  let value: unknown;
  try {
    value = JSON.parse(json ?? '');
  } catch {
    return new HttpError('internal', 'a command in the command Stream is not JSON');
  }
  if (
    !isRecord(value) ||
    typeof value.type !== 'string' ||
    !commandTypes.has(value.type) ||
    value.ownerId !== key.ownerId ||
    value.sessionId !== key.sessionId
  ) {
    return new HttpError('internal', "a command in the command Stream is not one of its session's");
  }
  return value as unknown as SessionCommand;
}

/**
 * @internal Reads up to `count` entries of the session's command Stream after `afterId`
 * (exclusive), oldest first.
 */
export async function readCommands(
  redis: Redis,
  keys: SessionKeys,
  key: SessionKey,
  afterId: string,
  count: number,
): Promise<CommandEntry[]> {
  const entries = (await redis.xrange(keys.commands, `(${afterId}`, '+', 'COUNT', count)) as Array<
    [string, string[]]
  >;
  return entries.map(([id, fields]) => {
    // Name/value pairs: a value may equal a name (an instance called "c"), so only even
    // positions are names.
    const field = (name: string) => {
      for (let at = 0; at + 1 < fields.length; at += 2) {
        if (fields[at] === name) return fields[at + 1];
      }
      return undefined;
    };
    return {
      id,
      requestId: field('r') ?? '',
      instanceId: field('i') ?? '',
      command: toCommand(field('c'), key),
    };
  });
}

/** @internal A command's outcome as the JSON of its answer (never throws). */
export function toAnswerJson(
  outcome: { ok: true; answer: unknown } | { ok: false; error: unknown },
) {
  if (outcome.ok) return JSON.stringify({ ok: true, answer: outcome.answer ?? null });
  return JSON.stringify({ ok: false, error: toHttpError(outcome.error).toData() });
}

/**
 * @internal Reads an answer's JSON back: the command's answer, or its refusal thrown as the
 * same {@link HttpError} (an answer that is not one is `internal`).
 */
export function fromAnswerJson(json: string): unknown {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new HttpError('internal', 'an internal error occurred');
  }
  if (isRecord(value) && value.ok === true) return value.answer;
  throw HttpError.fromData(isRecord(value) ? value.error : undefined);
}

/** @internal The record op that stores an answer and nudges its sender. */
export const toAnswerOp = (
  requestId: string,
  json: string,
  ttlMs: number,
  senderChannel: string,
): RecordOp => ({
  op: 'command.answer',
  requestId,
  json,
  ttlMs,
  channel: senderChannel,
  // A small answer rides in its nudge, so the sender need not read it (it deletes it unread).
  message: JSON.stringify(
    Buffer.byteLength(json, 'utf8') <= maxInlineCommandBytes
      ? { t: 'a', r: requestId, a: json }
      : { t: 'a', r: requestId },
  ),
});

/**
 * @internal The nudge that tells a holder a command of `key`'s session waits, without its
 * closing brace: the append script adds the entry's `e` and `p` (see `addCommandLua`). A command
 * of at most `maxInlineCommandBytes` (16 KiB) goes with it.
 */
export function toCommandNudgeHead(
  key: SessionKey,
  entry: { readonly requestId: string; readonly instanceId: string; readonly json: string },
): string {
  const inline = Buffer.byteLength(entry.json, 'utf8') <= maxInlineCommandBytes;
  const message = inline
    ? {
        t: 'c',
        o: key.ownerId,
        s: key.sessionId,
        r: entry.requestId,
        i: entry.instanceId,
        c: entry.json,
      }
    : { t: 'c', o: key.ownerId, s: key.sessionId };
  return JSON.stringify(message).slice(0, -1);
}

/** @internal The entry a nudge carries, as the holder applies it (see {@link readCommands}). */
export const toNudgedCommand = (entry: NudgedEntry, key: SessionKey): CommandEntry => ({
  id: entry.id,
  requestId: entry.requestId,
  instanceId: entry.instanceId,
  command: toCommand(entry.json, key),
});

/** @internal Reads a message of an instance channel; `undefined` for one that is not ours. */
export function parseInstanceMessage(message: string): InstanceMessage | undefined {
  let value: unknown;
  try {
    value = JSON.parse(message);
  } catch {
    return undefined;
  }
  if (!isRecord(value)) return undefined;
  if (value.t === 'c' && typeof value.o === 'string' && typeof value.s === 'string') {
    const { e, p, r, i, c } = value;
    if (
      typeof e === 'string' &&
      typeof p === 'string' &&
      typeof r === 'string' &&
      typeof i === 'string' &&
      typeof c === 'string'
    ) {
      const entry = { id: e, previousId: p, requestId: r, instanceId: i, json: c };
      return { t: 'c', o: value.o, s: value.s, entry };
    }
    return { t: 'c', o: value.o, s: value.s };
  }
  if (value.t === 'a' && typeof value.r === 'string') {
    return typeof value.a === 'string'
      ? { t: 'a', r: value.r, answer: value.a }
      : { t: 'a', r: value.r };
  }
  return undefined;
}

/** @internal The instance id in a lease value `<instanceId>:<fence>`. */
export const holderOf = (leaseValue: string): string =>
  leaseValue.slice(0, Math.max(0, leaseValue.lastIndexOf(':')));
