/**
 * What a resumed ReAct turn (`{ resume: state }`, README "Agents") starts from, read off its
 * safe-point state's messages: the cut replies it continues, and the tool calls not run yet.
 *
 * @module
 * @internal
 */
import { InvalidArgumentError } from '../errors.js';
import { z } from 'zod';
import {
  createMessageId,
  duplicateToolCallId,
  toolCallSchema,
  type AssistantMessage,
  type ChatMessage,
  type ToolCall,
} from './messages.js';
import type { ReActResumeInput } from './react-agent-options.js';
import { notRunContent } from './tool-runner.js';

/** @internal Tool calls of one assistant reply that have no result yet. */
export interface ResumedCalls {
  readonly reply: AssistantMessage;
  readonly calls: readonly ToolCall[];
}

/**
 * @internal The tool calls of the assistant reply that ends `messages` (only tool results
 * after it) that no tool result there answers: at an `afterChatModel` safe point, the calls
 * not run yet; a call answered there ran before the cut.
 *
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) when that reply's `toolCalls` is
 *   not a list of calls each with a string `id`, `name` and `arguments`, or two calls share an
 *   `id` (a state no safe point records: read as is, the run failed on a bare TypeError, or
 *   ran both calls)
 */
export function unansweredCalls(messages: readonly ChatMessage[]): ResumedCalls | undefined {
  const answered = new Set<string>();
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message?.role === 'tool') {
      answered.add(message.toolCallId);
      continue;
    }
    if (message?.role !== 'assistant' || message.toolCalls === undefined) return undefined;
    checkToolCalls(message.toolCalls);
    const calls = message.toolCalls.filter((call) => !answered.has(call.id));
    return calls.length === 0 ? undefined : { reply: message, calls };
  }
  return undefined;
}

/**
 * @internal The calls a turn resumed from the session history runs first, as a reply of their
 * own. The cut run's cancel saved `pending.reply` there with a not-run result for each call it
 * had not finished (README "Agents"), and an id takes one result only: so the calls `past`
 * answers with that not-run result are asked again in a new reply (`messageId`, no text, each
 * call under the id `<messageId>_<index>`), which the run adds and answers. A call `past`
 * answers otherwise ran before the cut and is not asked again.
 *
 * @param past - the session history the run loaded, ending with the cut turn
 * @param pending - {@link unansweredCalls} of the resumed state's messages
 * @param messageId - the new reply's id
 * @returns `undefined` when `past` does not end with `pending.reply` and its results (a history
 *   the cut did not save, or saved past), or when no call is left to ask again
 */
export function reissuedCalls(
  past: readonly ChatMessage[],
  pending: ResumedCalls,
  messageId: string,
): ResumedCalls | undefined {
  const start = past.findLastIndex((m) => m.role === 'assistant' && m.id === pending.reply.id);
  const saved = past.slice(start + 1);
  if (start < 0 || saved.some((message) => message.role !== 'tool')) return undefined;
  const notRun = (call: ToolCall) =>
    saved.some(
      (m) => m.role === 'tool' && m.toolCallId === call.id && m.content === notRunContent.cancelled,
    );
  const calls = pending.calls
    .filter(notRun)
    .map((call, index): ToolCall => ({ ...call, id: `${messageId}_${index}` }));
  if (calls.length === 0) return undefined;
  return { reply: { role: 'assistant', id: messageId, content: '', toolCalls: calls }, calls };
}

/**
 * The index in `messages` of the last user message that is not a hint: where its last
 * turn starts (-1 when it has none).
 */
function lastTurnStart(messages: readonly ChatMessage[]): number {
  return messages.findLastIndex((m) => m.role === 'user' && m.hintId === undefined);
}

function checkToolCalls(toolCalls: unknown): void {
  const parsed = z.array(toolCallSchema).safeParse(toolCalls);
  if (!parsed.success || duplicateToolCallId(parsed.data) !== undefined) {
    throw new InvalidArgumentError(
      'input',
      `expected the resumed reply's \`toolCalls\` to be a list of calls, each with a string id (unique), name and arguments, got ${JSON.stringify(toolCalls)?.slice(0, 200)}`,
    );
  }
}

/**
 * The text of the cut replies (`stop: 'cancelled'`) that end a carried turn's
 * messages, in order.
 */
function trailingCutReply(messages: readonly ChatMessage[]): string {
  let start = messages.length;
  while (start > 0) {
    const message = messages[start - 1];
    if (message?.role !== 'assistant' || message.stop !== 'cancelled') break;
    start--;
  }
  return messages
    .slice(start)
    .map((message) => message.content)
    .join('');
}

/** @internal Where a resumed turn starts (see {@link resumedStart}). */
export interface ResumedStart {
  /** The turn so far, added to the run's own messages: the state's (and its cut partial reply). */
  readonly produced: ChatMessage[];
  /** The calls the run runs before its first model call. */
  readonly calls: ResumedCalls | undefined;
  /** The reply that asks the calls again ({@link reissuedCalls}), when the history answered them. */
  readonly reissued: AssistantMessage | undefined;
  /** Where the current turn starts in the session history (the history policy's current turn). */
  readonly turnStart: number;
  /** The cut replies a carried turn continues (its final reply starts with them). */
  readonly carriedReply: string;
}

/**
 * Whether the session history `past` holds the turn `messages` (a resumed state's)
 * recorded: the cut run's cancel saved it there, unless that save failed (a `session.error`).
 * Found by the state's last reply id, or, for a state holding only the question, by the
 * history's last user message.
 */
function historyHoldsTurn(past: readonly ChatMessage[], messages: readonly ChatMessage[]): boolean {
  const reply = messages.findLast((m) => m.role === 'assistant');
  if (reply !== undefined) return past.some((m) => m.role === 'assistant' && m.id === reply.id);
  const question = messages.find((m) => m.role === 'user');
  return (
    question === undefined || past.findLast((m) => m.role === 'user')?.content === question.content
  );
}

/**
 * @internal Where a resumed turn starts (README "Agents"). From the session history (`past`,
 * `saveHistory`): the cut saved the turn there, so the run adds nothing and asks the calls the
 * history answered `cancelled` again. Carried (a cluster's failover), without a history, or when
 * the history lacks the turn (the cut's save failed): the turn comes from the state, its calls
 * not run yet run under their own ids, and a carried turn's reply continues its cut replies.
 *
 * @param input - the resume input
 * @param past - the session history the run loaded (empty without one)
 * @param saveHistory - whether the run reads and saves the session history
 * @returns {@link ResumedStart}
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for malformed tool calls (see
 *   {@link unansweredCalls})
 */
export function resumedStart(
  input: ReActResumeInput,
  past: readonly ChatMessage[],
  saveHistory: boolean,
): ResumedStart {
  const { messages, partial } = input.resume;
  const pending = unansweredCalls(messages);
  const carried = input.carried === true || (saveHistory && !historyHoldsTurn(past, messages));
  if (saveHistory && !carried) {
    const calls = pending && reissuedCalls(past, pending, createMessageId());
    const turnStart = Math.max(0, lastTurnStart(past));
    return { produced: [], calls, reissued: calls?.reply, turnStart, carriedReply: '' };
  }
  const produced = [...messages];
  if (carried && partial !== undefined && partial !== '') {
    produced.push({
      role: 'assistant',
      id: createMessageId(),
      content: partial,
      stop: 'cancelled',
    });
  }
  return {
    produced,
    calls: pending,
    reissued: undefined,
    turnStart: past.length,
    carriedReply: carried ? trailingCutReply(produced) : '',
  };
}
