/**
 * The options of `createReActAgent` (docs/architecture.md, "Agents"): each field's purpose,
 * constraints and default, and the schema that checks them.
 *
 * @module
 */
import { z } from 'zod';
import type { Hint } from '../inbox/inbox.js';
import type { InterruptCause } from '../run/agent.js';
import type { ChatModel, ChatUsage } from './chat-model.js';
import { historyPolicySchema, type HistoryPolicy } from './history-policy.js';
import type { ChatMessage } from './messages.js';
import type { Tool } from './tool.js';

/** Which history a run reads and writes. */
export type ReActHistoryMode = 'auto' | 'session' | 'none';

/** Options of {@link createReActAgent}. */
export interface ReActAgentOptions {
  /** The model to reason with. */
  readonly model: ChatModel;
  /** The tools the model may call; names must be unique. @default none */
  readonly tools?: readonly Tool[];
  /** The system instructions, sent first in every request (never stored in the history). */
  readonly instructions?: string;
  /** At most this many model calls per run; a positive integer. @default 10 */
  readonly maxSteps?: number;
  /**
   * `session`: load the session's history before the run and append what the run produced;
   * `none`: start from the input alone and store nothing; `auto`: `session` for a top-level
   * run, `none` for a nested run (`ctx.spawn`), so a sub-agent never writes into its parent's
   * conversation. @default 'auto'
   */
  readonly history?: ReActHistoryMode;
  /**
   * The recovery reply written on interrupt (AgentScope's). A function gets the interrupt's
   * message and cause and may return `''` to write none. A string (or the default) is not
   * written when the interrupt is the runtime's shutdown: the user did not speak, so the
   * conversation keeps just the partial reply, marked interrupted.
   * @default "I noticed that you have interrupted me. What can I do for you?"
   */
  readonly recoveryReply?: string | ((info: RecoveryInfo) => string);
  /** How a drained hint is phrased in the request. @default its text as is */
  readonly formatHint?: (hint: Hint) => string;
  /**
   * How each model request fits the model's context: a token budget (estimated locally), older
   * turns dropped or folded into a summary, long tool results cut with a marker. When it
   * leaves something out, the step logs `agent.context_trimmed`. @default
   * `{ maxRequestTokens: 24000, maxToolResultTokens: 4000, overflow: 'summary' }`
   */
  readonly historyPolicy?: HistoryPolicy;
  /**
   * Safe points while the model streams: `'sentence'` reports one each time the streamed text
   * completes a sentence (`.`, `!` or `?` before whitespace), as kind `afterChatModel` with the
   * reply so far in its state, so that a safe-point cancel (a preempt, a graceful stop) lands
   * between sentences instead of after the whole reply; the reply so far is kept, marked
   * `cancelled`. `'none'`: only the safe points between steps. @default 'none'
   */
  readonly streamSafePoints?: 'none' | 'sentence';
}

/**
 * What the agent passes to `ctx.safePoint(kind, state)`: the step, the messages the run added
 * so far (its user message first), and, at a safe point while streaming, the reply so far.
 * A TurnLoop keeps it in a mid-turn checkpoint and hands it back through `genResume`.
 */
export interface ReActSafePointState {
  /** The model calls made so far in the turn: an integer, 0 or more (a resume counts on from it). */
  readonly step: number;
  readonly messages: readonly ChatMessage[];
  /** The reply streamed so far, at a safe point inside a model call (`streamSafePoints`). */
  readonly partial?: string | undefined;
}

/**
 * The input of a run that resumes a turn cut at a safe point (a TurnLoop's `genResume`):
 * `{ resume: state }`, with the {@link ReActSafePointState} the cut run reported last.
 */
export interface ReActResumeInput {
  readonly resume: ReActSafePointState;
  /**
   * `true` when the session history does not hold the cut turn (a cluster's failover policy
   * `resume`: the holder died, or a drain cut the run without saving it, README "Cluster"):
   * the run starts from the state's messages, its user message first, and its `partial` reply
   * as a cut reply (`stop: 'cancelled'`), and saves them with the rest of the turn at its end;
   * its {@link ReActResult.reply} is then the whole reply, the cut replies before it. Tool
   * calls of the state's last reply that have no result in it run first (README "Agents").
   * Absent: the cut run's cancel saved the turn, and the state's messages are not added again.
   */
  readonly carried?: boolean | undefined;
}

/** What a {@link ReActOptions.recoveryReply} function is told about the interrupt. */
export interface RecoveryInfo {
  readonly interruptMessage: string | undefined;
  /** `'interrupt'` (a user or a newer run) or `'shutdown'` (the runtime is stopping). */
  readonly interruptCause: InterruptCause | undefined;
}

/** Why a ReAct run stopped. */
export type ReActStopReason = 'completed' | 'interrupted' | 'max_steps';

/** The output of a ReAct run. */
export interface ReActResult {
  /**
   * The final reply text (for `interrupted`, the recovery reply). A carried turn's
   * ({@link ReActResumeInput.carried}) final reply, when it continues the cut replies, starts
   * with them: the run's whole reply.
   */
  readonly reply: string;
  /** The id of the final assistant message, if any. */
  readonly messageId: string | undefined;
  readonly reason: ReActStopReason;
  /** Model calls made. */
  readonly steps: number;
  /** Token usage summed over the run's model calls. */
  readonly usage: ChatUsage;
  /** What the run added to the conversation: the input, hints, replies and tool results. */
  readonly messages: readonly ChatMessage[];
}

/** @internal The recovery reply when none is given (AgentScope's). */
export const defaultRecovery = 'I noticed that you have interrupted me. What can I do for you?';

/** @internal The schema of {@link ReActAgentOptions}. */
export const reactOptionsSchema = z.object({
  model: z.custom<ChatModel>(
    (value) =>
      typeof value === 'object' &&
      value !== null &&
      typeof (value as ChatModel).stream === 'function',
    { error: 'a ChatModel with a stream(messages, options) method' },
  ),
  tools: z
    .array(
      z.custom<Tool>(
        (value) =>
          typeof value === 'object' &&
          value !== null &&
          typeof (value as Tool).parseArgs === 'function' &&
          typeof (value as Tool).execute === 'function',
        { error: 'a tool made by defineTool' },
      ),
      { error: 'an array of tools made by defineTool' },
    )
    .optional(),
  instructions: z.string({ error: 'a string' }).optional(),
  maxSteps: z
    .number({ error: 'a positive integer' })
    .int({ error: 'a positive integer' })
    .positive({ error: 'a positive integer' })
    .optional(),
  history: z
    .enum(['auto', 'session', 'none'], { error: "one of 'auto', 'session', 'none'" })
    .optional(),
  recoveryReply: z
    .union([z.string(), z.custom<(info: RecoveryInfo) => string>((v) => typeof v === 'function')], {
      error: 'a string or a function',
    })
    .optional(),
  formatHint: z
    .custom<(hint: Hint) => string>((v) => typeof v === 'function', { error: 'a function' })
    .optional(),
  historyPolicy: historyPolicySchema.optional(),
  streamSafePoints: z.enum(['none', 'sentence'], { error: "one of 'none', 'sentence'" }).optional(),
});

/** @internal Whether `input` is a {@link ReActResumeInput} (its state's shape checked). */
export const isResumeInput = (input: unknown): input is ReActResumeInput => {
  if (typeof input !== 'object' || input === null) return false;
  const state = (input as { resume?: unknown }).resume;
  return (
    typeof state === 'object' &&
    state !== null &&
    Number.isInteger((state as ReActSafePointState).step) &&
    (state as ReActSafePointState).step >= 0 &&
    Array.isArray((state as ReActSafePointState).messages)
  );
};
