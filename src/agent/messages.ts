/**
 * The conversation format: the messages a {@link ChatModel} reads and a session store keeps.
 *
 * @remarks Provider-neutral and JSON-serializable, so a session store can persist it as is and
 * an adapter (OpenAI-compatible, scripted) maps it to its own wire format. An assistant message
 * that carries tool calls is always followed, in a stored history, by exactly one tool message
 * per call: runplane never stores half a tool call (AgentScope issue #3237 is the
 * anti-example).
 *
 * @module
 */
import { nanoid } from 'nanoid';
import { z } from 'zod';

/** The instructions of an agent; never stored in a session's history. */
export interface SystemMessage {
  readonly role: 'system';
  readonly content: string;
}

/** A user's message, or a hint drained from the session inbox (then `hintId` names it). */
export interface UserMessage {
  readonly role: 'user';
  readonly content: string;
  /** Set when this message is a hint pushed with `runtime.inbox.push`; its hint id. */
  readonly hintId?: string | undefined;
}

/** One tool call requested by the model. `arguments` is the raw JSON text the model produced. */
export interface ToolCall {
  /** The tool-use id (the model's own id when it gave one); links `agent.tool_use` and `agent.tool_result`. */
  readonly id: string;
  readonly name: string;
  readonly arguments: string;
}

/** Why an assistant message ended early, when it did. */
export type AssistantStop = 'interrupted' | 'cancelled' | 'failed';

/** A reply of the model (or a recovery reply written by the agent). */
export interface AssistantMessage {
  readonly role: 'assistant';
  /** The message id, shared by its `agent.message_delta` and `agent.message` events. */
  readonly id: string;
  readonly content: string;
  readonly toolCalls?: readonly ToolCall[] | undefined;
  /** Set on partial text cut by an interrupt, a cancel or a failure, and on an interrupt's recovery reply. */
  readonly stop?: AssistantStop | undefined;
}

/** The result of one tool call, as the model sees it. */
export interface ToolMessage {
  readonly role: 'tool';
  readonly toolCallId: string;
  readonly name: string;
  readonly content: string;
  /** True for an error result (invalid arguments, denial, timeout, interrupt, a throwing tool). */
  readonly isError: boolean;
}

/** Any message of a conversation. */
export type ChatMessage = SystemMessage | UserMessage | AssistantMessage | ToolMessage;

/** A fresh message id (nanoid). */
export function createMessageId(): string {
  return nanoid();
}

/**
 * @internal The first id that two of `calls` share, or `undefined` when each id is unique. A
 * reply whose calls share an id cannot be answered (one result per id: the OpenAI API refuses
 * a history that answers an id twice), so the ReAct agent refuses it.
 */
export function duplicateToolCallId(calls: readonly ToolCall[]): string | undefined {
  const seen = new Set<string>();
  for (const call of calls) {
    if (seen.has(call.id)) return call.id;
    seen.add(call.id);
  }
  return undefined;
}

/**
 * @internal The tool-call ids the replies of `conversations` asked. A model reply that asks
 * one of them again (providers that number calls per reply: `call_0`) gets an id of its own
 * from the ReAct agent: kept, the id would be answered twice in every later request, which
 * strict APIs refuse (README "Agents").
 */
export function askedToolCallIds(
  ...conversations: ReadonlyArray<readonly ChatMessage[]>
): Set<string> {
  const ids = new Set<string>();
  for (const messages of conversations) {
    for (const message of messages) {
      if (message.role === 'assistant')
        for (const call of message.toolCalls ?? []) ids.add(call.id);
    }
  }
  return ids;
}

/** @internal Validates one {@link ToolCall} (a stored message's, or a resumed state's). */
export const toolCallSchema = z.object({ id: z.string(), name: z.string(), arguments: z.string() });

/**
 * Validates a stored message (used by session stores when they load).
 *
 * @remarks Unknown extra fields are dropped; a message of an unknown role fails.
 */
export const chatMessageSchema: z.ZodType<ChatMessage> = z.discriminatedUnion('role', [
  z.object({ role: z.literal('system'), content: z.string() }),
  z.object({ role: z.literal('user'), content: z.string(), hintId: z.string().optional() }),
  z.object({
    role: z.literal('assistant'),
    id: z.string(),
    content: z.string(),
    toolCalls: z.array(toolCallSchema).optional(),
    stop: z.enum(['interrupted', 'cancelled', 'failed']).optional(),
  }),
  z.object({
    role: z.literal('tool'),
    toolCallId: z.string(),
    name: z.string(),
    content: z.string(),
    isError: z.boolean(),
  }),
]);
