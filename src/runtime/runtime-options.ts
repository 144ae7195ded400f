/**
 * The options of `createRuntime` and `runtime.prepare`: their types, defaults and schemas, in
 * one place (one message shape: expected `name` to be <constraint>, got <value>).
 *
 * @module
 */
import type { Tracer } from '@opentelemetry/api';
import type { InspectionEvent, Observer } from 'xstate';
import { z } from 'zod';
import type { SessionStrategy } from '../../machines/session.machine.js';
import type { Clock } from '../clock.js';
import type { EventLog } from '../events/event-log.js';
import type { Inbox } from '../inbox/inbox.js';
import type { RunMetrics } from '../observability/run-metrics.js';
import type { Agent } from '../run/agent.js';
import type { SessionStore } from '../stores/session-store.js';
import {
  durationMs,
  isNonEmptyString,
  isOptionalDurationMs,
  isStrictObjectOf,
  nonEmptyString,
  withMethods,
} from '../validation.js';

/**
 * The default cap on a session's runs that have not settled (`maxQueuedRuns`).
 *
 * @remarks Chosen from the measured per-run cost curve (README "Performance"): with up to this
 * many runs in one session, a run costs at most 1.5× what it costs alone.
 */
export const defaultMaxQueuedRuns = 32;

/** Options of {@link createRuntime}. Every field is optional. */
export interface RuntimeOptions {
  /** Time source for every timer and deadline. @default the system clock */
  readonly clock?: Clock;
  /** XState inspection observer handed to every session and run actor (e.g. `@statelyai/inspect`). */
  readonly inspect?: Observer<InspectionEvent> | ((event: InspectionEvent) => void);
  /**
   * Where events are logged, histories kept and hints queued.
   * `eventLog` @default an in-memory log; `sessionStore` (conversation histories) @default in
   * memory; `inbox` (hints) @default in memory.
   */
  readonly stores?: {
    readonly eventLog?: EventLog;
    readonly sessionStore?: SessionStore;
    readonly inbox?: Inbox;
  };
  /** How long a cancelled agent may ignore its signal before it is abandoned, in ms. @default 5000 */
  readonly unwindTimeoutMs?: number;
  /** How long an idle session actor is kept before it is stopped, in ms. @default 60000 */
  readonly sessionIdleTtlMs?: number;
  /** Cap on top-level runs RUNNING at once across all sessions; a positive integer. @default unlimited */
  readonly maxConcurrentRuns?: number;
  /**
   * Cap on one owner's top-level runs RUNNING at once; a positive integer. Over it a run waits
   * (its session is busy, as for `maxConcurrentRuns`), and a freed slot goes to the owners
   * round-robin, so one owner's flood never keeps another's runs from starting. @default unlimited
   */
  readonly maxRunningRunsPerOwner?: number;
  /**
   * Cap on a session's runs that have not settled (prepared, queued and running; a positive
   * integer); the same cap bounds each run's nested runs. Over it, `prepare()` (or `ctx.spawn`)
   * throws `SESSION_QUEUE_FULL`. @default 32
   */
  readonly maxQueuedRuns?: number;
  /** Receives errors that must not escape: a throwing event listener, an actor bug. @default console.error */
  readonly reportError?: (error: unknown) => void;
  /**
   * The OpenTelemetry tracer of run spans (README "Observability"). Its spans record only under
   * a registered tracer provider. @default trace.getTracer('runplane') (the global provider)
   */
  readonly tracer?: Tracer;
  /**
   * Where run measurements go (runs by status, active and queued runs, cancel → settled, model
   * tokens). @default the OpenTelemetry metrics API (meter `runplane`; a no-op until an
   * application registers an SDK)
   */
  readonly metrics?: RunMetrics;
}

/** Options of {@link Runtime.prepare}. */
export interface PrepareOptions<TInput, TOutput> {
  /** The authenticated user; never taken from a request body. */
  readonly ownerId: string;
  /** The conversation; runs of one (ownerId, sessionId) run one at a time. */
  readonly sessionId: string;
  readonly agent: Agent<TInput, TOutput>;
  readonly input: TInput;
  /** Total budget from `start()` to a terminal status, queue time included, in ms. */
  readonly timeoutMs?: number;
  /** Aborting it cancels the run immediately (cause `signal`). */
  readonly signal?: AbortSignal;
  /** What to do when the session is busy. @default 'enqueue' */
  readonly strategy?: SessionStrategy;
  /** For `interrupt` / `preempt`: the active run's grace before it is cancelled, in ms. @default 5000 */
  readonly graceMs?: number;
  /** Use this run id instead of a fresh nanoid; must be unused. */
  readonly runId?: string;
  /**
   * The TurnLoop items this run's turn consumed, by id: logged on its `session.run_started`
   * as `item_ids` (a loop session's log tells which messages each turn answered). @default none
   */
  readonly itemIds?: readonly string[];
}

const strategies = ['enqueue', 'reject', 'interrupt', 'preempt'] as const;

const positiveInt = z
  .number({ error: 'a positive integer' })
  .int({ error: 'a positive integer' })
  .positive({ error: 'a positive integer' });

/** @internal */
export const runtimeOptionsSchema = z.strictObject({
  clock: withMethods<Clock>(
    ['now', 'setTimeout', 'clearTimeout'],
    'a clock with now(), setTimeout() and clearTimeout()',
  ).optional(),
  inspect: z
    .custom<RuntimeOptions['inspect']>(
      (value) =>
        typeof value === 'function' ||
        (typeof value === 'object' && value !== null && 'next' in value),
      { error: 'an inspection observer (a function or an object with next())' },
    )
    .optional(),
  stores: z
    .strictObject({
      eventLog: withMethods<EventLog>(
        ['append', 'read', 'follow', 'hasRun', 'lastSeq'],
        'an EventLog (append, read, follow, hasRun, lastSeq)',
      ).optional(),
      sessionStore: withMethods<SessionStore>(['load', 'append'], 'a SessionStore').optional(),
      inbox: withMethods<Inbox>(['push', 'drain'], 'an Inbox').optional(),
    })
    .optional(),
  unwindTimeoutMs: durationMs.optional(),
  sessionIdleTtlMs: durationMs.optional(),
  maxConcurrentRuns: positiveInt.optional(),
  maxRunningRunsPerOwner: positiveInt.optional(),
  maxQueuedRuns: positiveInt.optional(),
  reportError: z
    .custom<(error: unknown) => void>((value) => typeof value === 'function', {
      error: 'a function',
    })
    .optional(),
  tracer: withMethods<Tracer>(['startSpan'], 'an OpenTelemetry Tracer (startSpan)').optional(),
  metrics: withMethods<RunMetrics>(
    ['runStatusChanged', 'runEnded', 'cancelSettled', 'modelTokens', 'preemptToNextTurn'],
    'a RunMetrics (runStatusChanged, runEnded, cancelSettled, modelTokens, preemptToNextTurn)',
  ).optional(),
});

/** @internal */
export const prepareSchema = z.strictObject({
  input: z.unknown(),
  ownerId: nonEmptyString,
  sessionId: nonEmptyString,
  agent: z.custom<Agent>(
    (value) =>
      typeof value === 'object' && value !== null && typeof (value as Agent).execute === 'function',
    { error: 'an agent with an execute(input, ctx) method' },
  ),
  timeoutMs: durationMs.optional(),
  graceMs: durationMs.optional(),
  strategy: z.enum(strategies, { error: `one of ${strategies.join(', ')}` }).optional(),
  runId: nonEmptyString.optional(),
  signal: z
    .custom<AbortSignal>((value) => value instanceof AbortSignal, { error: 'an AbortSignal' })
    .optional(),
  itemIds: z.array(nonEmptyString, { error: 'an array of non-empty strings' }).optional(),
});

const prepareKeys: ReadonlySet<string> = new Set(Object.keys(prepareSchema.shape));
const strategySet: ReadonlySet<unknown> = new Set(strategies);

/**
 * @internal The fast path of {@link prepareSchema} (`parseOptions`' `isValid`): accepts only
 * what the schema accepts, so valid options skip zod (it cost 2–6 % of a lifecycle).
 */
export const isValidPrepare = (value: unknown): value is z.infer<typeof prepareSchema> => {
  if (!isStrictObjectOf(value, prepareKeys)) return false;
  const options = value as Record<string, unknown>;
  const { agent, strategy, runId, signal, itemIds } = options;
  return (
    // zod wants the `input` key present, even if its value is undefined.
    'input' in options &&
    isNonEmptyString(options.ownerId) &&
    isNonEmptyString(options.sessionId) &&
    typeof agent === 'object' &&
    agent !== null &&
    typeof (agent as Agent).execute === 'function' &&
    isOptionalDurationMs(options.timeoutMs) &&
    isOptionalDurationMs(options.graceMs) &&
    (strategy === undefined || strategySet.has(strategy)) &&
    (runId === undefined || isNonEmptyString(runId)) &&
    (signal === undefined || signal instanceof AbortSignal) &&
    (itemIds === undefined || (Array.isArray(itemIds) && itemIds.every(isNonEmptyString)))
  );
};

/** @internal */
export const sessionKeySchema = z.object({ ownerId: nonEmptyString, sessionId: nonEmptyString });
/** @internal */
export const shutdownSchema = z.strictObject({ graceMs: durationMs.optional() });
/** @internal */
export const spawnOptionsSchema = z.strictObject({ timeoutMs: durationMs.optional() });
/** @internal */
export const approvalSchema = z.object({
  ownerId: nonEmptyString,
  sessionId: nonEmptyString,
  toolUseId: nonEmptyString,
  decision: z.object({
    allow: z.boolean({ error: 'a boolean' }),
    message: z.string({ error: 'a string' }).optional(),
    reason: z.enum(['user', 'timeout'], { error: 'one of user, timeout' }).optional(),
  }),
});
