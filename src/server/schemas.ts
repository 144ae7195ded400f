/**
 * Request validation for the HTTP service (zod): session bodies, event batches (validated as a
 * whole, with an error per bad event) and read queries.
 *
 * @module
 */
import { z } from 'zod';
import type { SessionStrategy } from '../../machines/session.machine.js';
import { failoverPolicies } from '../stores/session-records.js';
import { HttpError } from './http-error.js';

/** The busy-session strategies, as the API spells them. */
export const strategies = ['enqueue', 'reject', 'interrupt', 'preempt'] as const;

/** `user.interrupt` modes: an immediate cancel (default), a cooperative interrupt, or a cancel at a safe point. */
export const interruptModes = [
  'immediate',
  'interrupt',
  'after_chat_model',
  'after_tool_calls',
  'any_safe_point',
] as const;

/** The most events one batch may carry. */
export const maxEventsPerBatch = 100;
/** The longest `grace_ms` or `timeout_ms` accepted, in ms (one hour). */
const maxDurationMs = 3_600_000;

const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const nonEmpty = (max: number) =>
  z
    .string({ error: `a non-empty string of at most ${max} characters` })
    .min(1, { error: `a non-empty string of at most ${max} characters` })
    .max(max, { error: `a non-empty string of at most ${max} characters` })
    // A lone UTF-16 surrogate cannot be written as JSON that strict readers accept.
    .refine((text) => !loneSurrogate.test(text), { error: 'well-formed Unicode text' });

const durationMs = z
  .number({ error: `an integer number of milliseconds from 0 to ${maxDurationMs}` })
  .int({ error: `an integer number of milliseconds from 0 to ${maxDurationMs}` })
  .min(0, { error: `an integer number of milliseconds from 0 to ${maxDurationMs}` })
  .max(maxDurationMs, { error: `an integer number of milliseconds from 0 to ${maxDurationMs}` });

const strategy = z.enum(strategies, { error: `one of ${strategies.join(', ')}` });

/** The longest `approval_timeout_ms` accepted, in ms (one day). */
const maxApprovalTimeoutMs = 86_400_000;

/** Body of `POST /api/sessions` and `PATCH /api/sessions/:id`. */
export const sessionSettingsSchema = z.strictObject({
  /** `runs` (a run per message) or `loop` (a TurnLoop); only at creation. */
  mode: z.enum(['runs', 'loop'], { error: 'one of runs, loop' }).optional(),
  strategy: strategy.optional(),
  grace_ms: durationMs.optional(),
  approval_timeout_ms: z
    .number({ error: `an integer number of milliseconds from 1 to ${maxApprovalTimeoutMs}` })
    .int({ error: `an integer number of milliseconds from 1 to ${maxApprovalTimeoutMs}` })
    .min(1, { error: `an integer number of milliseconds from 1 to ${maxApprovalTimeoutMs}` })
    .max(maxApprovalTimeoutMs, {
      error: `an integer number of milliseconds from 1 to ${maxApprovalTimeoutMs}`,
    })
    .optional(),
  /** What a cluster does with the running run when its holder is lost (README "Cluster"). */
  failover: z.enum(failoverPolicies, { error: 'one of mark, resume' }).optional(),
});

const eventSchemas = {
  'user.message': z.strictObject({
    type: z.literal('user.message'),
    payload: z.strictObject({
      text: nonEmpty(100_000),
      /** This message's strategy, instead of the session's (`runs` sessions). */
      strategy: strategy.optional(),
      /** Preempt the loop's current turn at its next safe point (`loop` sessions). */
      preempt: z.boolean({ error: 'a boolean' }).optional(),
    }),
  }),
  'user.interrupt': z.strictObject({
    type: z.literal('user.interrupt'),
    payload: z
      .strictObject({
        run_id: nonEmpty(256).optional(),
        mode: z.enum(interruptModes, { error: `one of ${interruptModes.join(', ')}` }).optional(),
        /** For a safe-point mode: escalate to an immediate cancel after this many ms. */
        timeout_ms: durationMs.optional(),
        reason: z
          .string({ error: 'a string' })
          .max(500, { error: 'at most 500 characters' })
          .optional(),
      })
      .optional(),
  }),
  'user.tool_confirmation': z.strictObject({
    type: z.literal('user.tool_confirmation'),
    payload: z
      .strictObject({
        tool_use_id: nonEmpty(256),
        allow: z.boolean({ error: 'a boolean' }),
        deny_message: z
          .string({ error: 'a string' })
          .max(10_000, { error: 'at most 10000 characters' })
          .optional(),
        /** AgentScope's spelling of `deny_message`. */
        denyMessage: z
          .string({ error: 'a string' })
          .max(10_000, { error: 'at most 10000 characters' })
          .optional(),
      })
      .refine(
        (payload) => payload.deny_message === undefined || payload.denyMessage === undefined,
        {
          error: 'absent when deny_message is given',
          path: ['denyMessage'],
        },
      ),
  }),
  'user.supplement': z.strictObject({
    type: z.literal('user.supplement'),
    payload: z.strictObject({ text: nonEmpty(100_000) }),
  }),
} as const;

/** The event types `POST /api/sessions/:id/events` accepts. */
export const eventTypes = Object.keys(eventSchemas) as Array<keyof typeof eventSchemas>;

/** One validated user event. */
export type UserEvent = {
  [K in keyof typeof eventSchemas]: z.output<(typeof eventSchemas)[K]>;
}[keyof typeof eventSchemas];

/** One entry of a 400 answer's `error.events`. */
export interface EventError {
  readonly index: number;
  readonly code: 'invalid_event' | 'invalid_run_id';
  readonly message: string;
}

const show = (value: unknown): string => {
  if (value === undefined) return 'nothing';
  if (typeof value === 'string') {
    return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  }
  try {
    const json = JSON.stringify(value);
    return json.length > 80 ? `${json.slice(0, 77)}...` : json;
  } catch {
    return typeof value;
  }
};

const pathText = (path: readonly PropertyKey[]) =>
  path.reduce<string>(
    (text, part) => (typeof part === 'number' ? `${text}[${part}]` : `${text}.${String(part)}`),
    '',
  );

const valueAt = (root: unknown, path: readonly PropertyKey[]): unknown => {
  let value = root;
  for (const part of path) {
    value =
      value !== null && typeof value === 'object'
        ? (value as Record<PropertyKey, unknown>)[part]
        : undefined;
  }
  return value;
};

/** One sentence for a zod issue: expected `<name>` to be <constraint>, got <value>. */
function describeIssue(issue: z.core.$ZodIssue, name: string, root: unknown): string {
  const where = `${name}${pathText(issue.path)}`;
  if (issue.code === 'unrecognized_keys') {
    return `expected \`${where}\` to have no key ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
  }
  const value = valueAt(root, issue.path);
  const constraint = issue.message.startsWith('Invalid') ? 'valid' : issue.message;
  return `expected \`${where}\` to be ${constraint}, got ${show(value)}`;
}

/**
 * Parses a JSON body against `schema`.
 *
 * @param schema - the zod schema
 * @param body - the parsed JSON
 * @param name - how the body is named in messages
 * @returns the parsed value
 * @throws {@link HttpError} `invalid_body` (400) naming the first problem
 */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown, name: string): T {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  throw new HttpError(
    'invalid_body',
    issue === undefined ? `expected a valid ${name}` : describeIssue(issue, name, body),
  );
}

/**
 * Validates a whole event batch `{ events: [...] }` before anything is applied.
 *
 * @remarks Every event is checked; the answer lists an error for each bad one (`index`,
 * `code`, `message`). An event whose `payload.run_id` is given but empty, null or not a string
 * has code `invalid_run_id` (it never falls back to a session-wide interrupt); the batch's
 * `error.code` is the code of the first bad event.
 *
 * @param body - the parsed JSON body
 * @returns the validated events, in order
 * @throws {@link HttpError} `invalid_body` (400) when the body is not `{ events: [1..100 events] }`;
 *   `invalid_event` or `invalid_run_id` (400) with `error.events` when an event is bad
 */
export function parseEventBatch(body: unknown): UserEvent[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new HttpError(
      'invalid_body',
      `expected the body to be an object { events: [...] }, got ${show(body)}`,
    );
  }
  const extra = Object.keys(body).filter((key) => key !== 'events');
  if (extra.length > 0) {
    throw new HttpError(
      'invalid_body',
      `expected the body to have no key ${extra.map((k) => JSON.stringify(k)).join(', ')}`,
    );
  }
  const events = (body as { events?: unknown }).events;
  if (!Array.isArray(events) || events.length === 0 || events.length > maxEventsPerBatch) {
    throw new HttpError(
      'invalid_body',
      `expected \`events\` to be an array of 1 to ${maxEventsPerBatch} events, got ${
        Array.isArray(events) ? `${events.length} events` : show(events)
      }`,
    );
  }
  const parsed: UserEvent[] = [];
  const errors: EventError[] = [];
  events.forEach((event: unknown, index) => {
    const name = `events[${index}]`;
    const type =
      event !== null && typeof event === 'object' ? (event as { type?: unknown }).type : undefined;
    const schema =
      typeof type === 'string' && Object.hasOwn(eventSchemas, type)
        ? eventSchemas[type as keyof typeof eventSchemas]
        : undefined;
    if (schema === undefined) {
      errors.push({
        index,
        code: 'invalid_event',
        message:
          event === null || typeof event !== 'object' || Array.isArray(event)
            ? `expected \`${name}\` to be an object { type, payload }, got ${show(event)}`
            : `expected \`${name}.type\` to be one of ${eventTypes.join(', ')}, got ${show(type)}`,
      });
      return;
    }
    const result = schema.safeParse(event);
    if (result.success) {
      parsed.push(result.data);
      return;
    }
    const runIdIssue = result.error.issues.find(
      (issue) =>
        issue.path.length === 2 && issue.path[0] === 'payload' && issue.path[1] === 'run_id',
    );
    const issue = runIdIssue ?? result.error.issues[0];
    errors.push({
      index,
      code: runIdIssue === undefined ? 'invalid_event' : 'invalid_run_id',
      message:
        issue === undefined
          ? `expected \`${name}\` to be valid`
          : describeIssue(issue, name, event),
    });
  });
  const first = errors[0];
  if (first !== undefined) {
    throw new HttpError(
      first.code,
      errors.length === 1
        ? first.message
        : `${errors.length} events are invalid; first: ${first.message}`,
      { events: errors },
    );
  }
  return parsed;
}

/** Parsed query of `GET .../events` and `GET .../events/stream`. */
export interface EventQuery {
  readonly after: number;
  readonly limit: number;
  readonly types: string[] | undefined;
}

const seqPattern = /^(0|[1-9]\d{0,15})$/;

/**
 * Parses a `seq` cursor (a non-negative integer in decimal).
 *
 * @returns the number, or `undefined` when `text` is not a valid cursor
 */
export function parseSeq(text: string): number | undefined {
  if (!seqPattern.test(text)) return undefined;
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : undefined;
}

/**
 * Parses `after`, `limit` and `types` of an events query.
 *
 * @param query - the query parameters (the last value of each)
 * @param withLimit - whether `limit` is allowed (not for the stream)
 * @returns `after` (exclusive, default 0), `limit` (default 100, 1–1000), `types` (a comma
 *   list of up to 50 event types, or `undefined` for all)
 * @throws {@link HttpError} `invalid_query` (400) naming the bad parameter
 */
export function parseEventQuery(
  query: Readonly<Record<string, string | undefined>>,
  withLimit: boolean,
): EventQuery {
  const { after: afterText, limit: limitText, types: typesText } = query;
  const after = afterText === undefined ? 0 : parseSeq(afterText);
  if (after === undefined) {
    throw new HttpError(
      'invalid_query',
      `expected \`after\` to be a non-negative integer, got ${show(afterText)}`,
    );
  }
  let limit = 100;
  if (limitText !== undefined) {
    const parsed = withLimit ? parseSeq(limitText) : undefined;
    if (!withLimit) throw new HttpError('invalid_query', 'expected no `limit` on a stream');
    if (parsed === undefined || parsed < 1 || parsed > 1000) {
      throw new HttpError(
        'invalid_query',
        `expected \`limit\` to be an integer from 1 to 1000, got ${show(limitText)}`,
      );
    }
    limit = parsed;
  }
  let types: string[] | undefined;
  if (typesText !== undefined) {
    types = typesText.split(',').map((type) => type.replace(/^ +| +$/g, ''));
    if (types.length > 50 || types.some((type) => !/^[A-Za-z0-9_.@-]{1,100}$/.test(type))) {
      throw new HttpError(
        'invalid_query',
        `expected \`types\` to be a comma-separated list of up to 50 event types, got ${show(typesText)}`,
      );
    }
  }
  return { after, limit, types };
}

/** The strategy type, re-exported for the service. */
export type { SessionStrategy };
