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
  duplicateToolCallId,
  toolCallSchema,
  type AssistantMessage,
  type ChatMessage,
  type ToolCall,
} from './messages.js';
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
 * @internal The index in `messages` of the last user message that is not a hint: where its last
 * turn starts (-1 when it has none).
 */
export function lastTurnStart(messages: readonly ChatMessage[]): number {
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
 * @internal The text of the cut replies (`stop: 'cancelled'`) that end a carried turn's
 * messages, in order.
 */
export function trailingCutReply(messages: readonly ChatMessage[]): string {
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
