/**
 * The TurnLoop's options: the config, push and stop option schemas with the one message shape
 * (`expected <name> to be <constraint>, got <value>`), and the strategy answer's check
 * (docs/architecture.md, "TurnLoop").
 *
 * @module
 */
import { z } from 'zod';
import { CancelMode } from '../../machines/cancel-request.js';
import type { PreemptSpec } from '../../machines/turn-loop.types.js';
import { durationMs, nonEmptyString } from '../validation.js';
import type { PreemptOptions } from './turn-loop-types.js';

const isFunction = (value: unknown): boolean => typeof value === 'function';
const fn = (what: string) => z.custom<unknown>(isFunction, { error: what });

/** The options of `loop.run()`. @internal */
export const runSchema = z.strictObject({ answer: z.unknown().optional() });

/** The config of `createTurnLoop`. @internal */
export const configSchema = z
  .strictObject({
    runtime: z.custom<unknown>(
      (value) =>
        typeof value === 'object' &&
        value !== null &&
        isFunction((value as { prepare?: unknown }).prepare) &&
        typeof (value as { clock?: unknown }).clock === 'object',
      { error: 'a runtime from createRuntime()' },
    ),
    ownerId: nonEmptyString,
    sessionId: nonEmptyString,
    genInput: fn('a function (items, info) => { input, consumed, remaining? }'),
    prepareAgent: fn('a function (consumed, info) => Agent'),
    onAgentEvents: fn('a function (turn, events) => error | undefined').optional(),
    genResume: fn(
      'a function ({ interrupted, unhandled, newItems, agentState }) => plan',
    ).optional(),
    store: z
      .custom<unknown>(
        (value) =>
          typeof value === 'object' &&
          value !== null &&
          ['get', 'set', 'delete'].every((m) => isFunction((value as Record<string, unknown>)[m])),
        { error: 'a CheckpointStore with get, set and delete' },
      )
      .optional(),
    checkpointId: nonEmptyString.optional(),
    codec: z
      .custom<unknown>(
        (value) =>
          typeof value === 'object' &&
          value !== null &&
          isFunction((value as { encode?: unknown }).encode) &&
          isFunction((value as { decode?: unknown }).decode),
        { error: 'a CheckpointCodec with encode and decode' },
      )
      .optional(),
    requeuePreempted: z.boolean({ error: 'a boolean' }).optional(),
    itemIdOf: fn('a function (item) => its id in the log').optional(),
    compactAfterPatches: z
      .number({ error: 'an integer ≥ 1' })
      .int({ error: 'an integer ≥ 1' })
      .min(1, { error: 'an integer ≥ 1' })
      .optional(),
    inspect: z
      .custom<unknown>(
        (value) =>
          isFunction(value) ||
          (typeof value === 'object' &&
            value !== null &&
            isFunction((value as { next?: unknown }).next)),
        { error: 'an XState inspection observer or function' },
      )
      .optional(),
  })
  .superRefine((config, ctx) => {
    if (config.store !== undefined && config.checkpointId === undefined) {
      ctx.addIssue({ code: 'custom', path: ['checkpointId'], message: 'set when `store` is set' });
    }
    if (config.checkpointId !== undefined && config.store === undefined) {
      ctx.addIssue({ code: 'custom', path: ['store'], message: 'set when `checkpointId` is set' });
    }
  });

const preemptMode = z
  .number({ error: 'a safe-point CancelMode (AfterChatModel, AfterToolCalls or AnySafePoint)' })
  .int({ error: 'a safe-point CancelMode (AfterChatModel, AfterToolCalls or AnySafePoint)' })
  .min(CancelMode.AfterChatModel, {
    error: 'a safe-point CancelMode (AfterChatModel, AfterToolCalls or AnySafePoint), not 0',
  })
  .max(CancelMode.AnySafePoint, {
    error: 'a safe-point CancelMode (AfterChatModel, AfterToolCalls or AnySafePoint)',
  });

const preemptShape = {
  preempt: preemptMode.optional(),
  preemptTimeoutMs: durationMs.optional(),
  preemptDelayMs: durationMs.optional(),
};

const needsPreempt = (options: PreemptOptions, ctx: z.RefinementCtx) => {
  for (const field of ['preemptTimeoutMs', 'preemptDelayMs'] as const) {
    if (options[field] !== undefined && options.preempt === undefined) {
      ctx.addIssue({ code: 'custom', path: [field], message: 'used together with `preempt`' });
    }
  }
};

/** The options of `push`. @internal */
export const pushSchema = z
  .strictObject({
    ...preemptShape,
    strategy: fn('a function (turn) => preempt options').optional(),
  })
  .superRefine((options, ctx) => {
    needsPreempt(options, ctx);
    if (
      options.strategy !== undefined &&
      (options.preempt !== undefined ||
        options.preemptTimeoutMs !== undefined ||
        options.preemptDelayMs !== undefined)
    ) {
      ctx.addIssue({
        code: 'custom',
        path: ['strategy'],
        message: 'given without preempt options (the strategy answers them)',
      });
    }
  });

/** A strategy's answer, validated under the field name `strategy()`. @internal */
export const strategyAnswerSchema = z.object({
  'strategy()': z
    .custom<object>(
      (answer) =>
        typeof answer === 'object' &&
        answer !== null &&
        !isFunction((answer as { then?: unknown }).then),
      { error: 'preempt options or undefined, answered synchronously (not a promise)' },
    )
    // A `strategy` in the answer is ignored (Eino's semantics); any other unknown key is a typo.
    .pipe(
      z
        .strictObject({ ...preemptShape, strategy: z.unknown().optional() })
        .superRefine(needsPreempt),
    ),
});

const stopModes = ['afterTurn', 'graceful', 'immediate'] as const;
/** The options of `stop`. @internal */
export const stopSchema = z
  .strictObject({
    mode: z.enum(stopModes, { error: `one of ${stopModes.join(', ')}` }).optional(),
    graceMs: durationMs.optional(),
    idleForMs: durationMs.optional(),
    cause: z.string({ error: 'a string' }).optional(),
    skipCheckpoint: z.boolean({ error: 'a boolean' }).optional(),
    initiator: z.enum(['user', 'shutdown'], { error: 'one of user, shutdown' }).optional(),
  })
  .superRefine((options, ctx) => {
    if (
      options.graceMs !== undefined &&
      options.mode !== undefined &&
      options.mode !== 'graceful'
    ) {
      ctx.addIssue({ code: 'custom', path: ['graceMs'], message: "used with mode 'graceful'" });
    }
    // An idle stop commits only when no turn runs: a mode or a grace would never apply, and
    // merged into a later stop they would cancel a turn that stop meant to let finish.
    if (options.idleForMs !== undefined) {
      for (const field of ['mode', 'graceMs'] as const) {
        if (options[field] !== undefined && !(field === 'mode' && options.mode === 'afterTurn')) {
          ctx.addIssue({
            code: 'custom',
            path: [field],
            message: 'not used with `idleForMs` (an idle stop commits when no turn runs)',
          });
        }
      }
    }
  });

/** Validated preempt options as the machine's spec. @internal */
export const toSpec = (options: PreemptOptions): PreemptSpec | undefined =>
  options.preempt === undefined
    ? undefined
    : {
        mode: options.preempt,
        timeoutMs: options.preemptTimeoutMs,
        delayMs: options.preemptDelayMs,
      };
