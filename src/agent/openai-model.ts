/**
 * The OpenAI-compatible {@link ChatModel}, on the official `openai` package: streaming chat
 * completions with tools, against any base URL (OpenAI, vLLM, Ollama, LiteLLM, ...).
 *
 * @module
 */
import OpenAI, { APIConnectionError, APIError, APIUserAbortError } from 'openai';
import type {
  ChatCompletionChunk,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import { z } from 'zod';
import { nonEmptyString, parseOptions } from '../validation.js';
import type {
  ChatChunk,
  ChatFinishReason,
  ChatModel,
  ChatStreamOptions,
  ChatUsage,
  ToolSpec,
} from './chat-model.js';
import type { ChatMessage } from './messages.js';
import { ModelError } from './model-error.js';

/** Options of {@link createOpenAIModel}. */
export interface OpenAIModelOptions {
  /** The API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8000/v1`. @default the OpenAI API */
  readonly baseURL?: string;
  /** The bearer key; a local server may accept any non-empty string. */
  readonly apiKey: string;
  /** The model name sent with every request. */
  readonly model: string;
  /**
   * How many times the `openai` client retries a 408, 409, 429 or 5xx answer (honouring
   * `retry-after-ms` / `retry-after`) before the call fails. A non-negative integer. @default 2
   */
  readonly maxRetries?: number;
  /** The `openai` client's per-request timeout, in ms. @default 600000 */
  readonly timeoutMs?: number;
  /** Sampling temperature, sent only when given. */
  readonly temperature?: number;
  /** Ask for `stream_options.include_usage` (some servers refuse it). @default true */
  readonly includeUsage?: boolean;
  /** The `fetch` the client sends requests with (a proxy's, an instrumented one). @default globalThis.fetch */
  readonly fetch?: typeof globalThis.fetch;
}

const optionsSchema = z.object({
  baseURL: z.url({ error: 'an http(s) URL' }).optional(),
  apiKey: nonEmptyString,
  model: nonEmptyString,
  maxRetries: z
    .number({ error: 'a non-negative integer' })
    .int({ error: 'a non-negative integer' })
    .nonnegative({ error: 'a non-negative integer' })
    .optional(),
  timeoutMs: z
    .number({ error: 'a positive number' })
    .positive({ error: 'a positive number' })
    .optional(),
  temperature: z.number({ error: 'a number' }).optional(),
  includeUsage: z.boolean({ error: 'a boolean' }).optional(),
  fetch: z
    .custom<typeof globalThis.fetch>((value) => typeof value === 'function', {
      error: 'a fetch function',
    })
    .optional(),
});

/**
 * Maps runplane messages to the chat-completions wire format.
 *
 * @remarks An assistant message with tool calls gets `content: null` when it has no text and
 * `tool_calls` of type `function`; a tool result becomes `{ role: 'tool', tool_call_id }`. A
 * hint is sent as a plain user message; runplane-only fields (`id`, `stop`, `hintId`,
 * `isError`) are not sent.
 *
 * @param messages - the conversation, instructions first
 * @returns the `messages` field of a chat-completions request
 */
export function toOpenAIMessages(messages: readonly ChatMessage[]): ChatCompletionMessageParam[] {
  return messages.map((message): ChatCompletionMessageParam => {
    switch (message.role) {
      case 'system':
        return { role: 'system', content: message.content };
      case 'user':
        return { role: 'user', content: message.content };
      case 'assistant':
        return message.toolCalls !== undefined && message.toolCalls.length > 0
          ? {
              role: 'assistant',
              content: message.content === '' ? null : message.content,
              tool_calls: message.toolCalls.map((call) => ({
                id: call.id,
                type: 'function',
                function: { name: call.name, arguments: call.arguments },
              })),
            }
          : { role: 'assistant', content: message.content };
      case 'tool':
        return { role: 'tool', tool_call_id: message.toolCallId, content: message.content };
    }
  });
}

const toOpenAITools = (tools: readonly ToolSpec[]): ChatCompletionTool[] =>
  tools.map((tool) => ({
    type: 'function',
    function: {
      name: tool.name,
      description: tool.description,
      parameters: { ...tool.parameters },
    },
  }));

const finishReasons: Record<string, ChatFinishReason> = {
  stop: 'stop',
  tool_calls: 'tool_calls',
  function_call: 'tool_calls',
  length: 'length',
  content_filter: 'content_filter',
};

const toUsage = (usage: NonNullable<ChatCompletionChunk['usage']>): ChatUsage => ({
  promptTokens: usage.prompt_tokens,
  completionTokens: usage.completion_tokens,
  totalTokens: usage.total_tokens,
});

const toModelError = (error: unknown): ModelError => {
  if (error instanceof ModelError) return error;
  if (error instanceof APIConnectionError) {
    return new ModelError(`connection to the model failed: ${error.message}`, undefined, {
      cause: error,
    });
  }
  if (error instanceof APIError) {
    const status: unknown = error.status;
    const httpStatus = typeof status === 'number' ? status : undefined;
    return new ModelError(
      `the model answered ${httpStatus ?? 'an error'}: ${error.message}`,
      httpStatus,
      { cause: error },
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  return new ModelError(`the model stream failed: ${message}`, undefined, { cause: error });
};

/** `promise`, or a rejection with `signal`'s reason as soon as it aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => undefined);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- passed on as thrown
        reject(error);
      },
    );
  });
}

/**
 * The index of each streamed tool-call delta. Gemini's OpenAI-compatible endpoint sends none
 * (read as is, every call fell on one index and they merged into one): a delta without an
 * index that brings an id opens a call of its own, one that brings none continues the last.
 */
function toolCallSlots() {
  let last = -1;
  let next = 0;
  return {
    indexOf(call: { index?: number | null; id?: string | null }): number {
      if (typeof call.index === 'number') last = call.index;
      else if (last < 0 || (typeof call.id === 'string' && call.id !== '')) last = next;
      next = Math.max(next, last + 1);
      return last;
    },
  };
}

/**
 * Creates a model that streams chat completions from an OpenAI-compatible endpoint.
 *
 * @remarks
 * A 408, 409, 429 or 5xx answer is retried by the `openai` client itself (`maxRetries`, with
 * its exponential backoff or the server's `retry-after`); a cancel ends the call at once, also
 * while it waits to retry.
 * Text deltas become `text` chunks, `tool_calls` deltas become `tool_call` chunks (by index;
 * a delta without one opens a call when it brings an id, else continues the last call),
 * and the `finish_reason` plus the usage chunk become the final `finish` chunk. The call is
 * aborted by the stream's signal (the HTTP request is closed) and the iterator then rejects
 * with the signal's reason. A stream that ends without a `finish_reason` (the server closed
 * the connection early) is an error, never a silently short reply.
 *
 * @param options - {@link OpenAIModelOptions}
 * @returns the model
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a bad option
 * @throws {@link ModelError} (`MODEL_ERROR`) while streaming: `status` is the HTTP status of an
 *   error answer (429, 500, ...), `undefined` for a broken connection or a malformed stream
 * @example
 * ```ts
 * const model = createOpenAIModel({ baseURL: 'http://127.0.0.1:8000/v1', apiKey: 'local', model: 'qwen' });
 * const agent = createReActAgent({ model, tools: [weather] });
 * ```
 */
export function createOpenAIModel(options: OpenAIModelOptions): ChatModel {
  parseOptions(optionsSchema, options, 'options');
  const client = new OpenAI({
    baseURL: options.baseURL,
    apiKey: options.apiKey,
    maxRetries: options.maxRetries ?? 2,
    timeout: options.timeoutMs,
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  });
  const includeUsage = options.includeUsage ?? true;

  async function* stream(
    messages: readonly ChatMessage[],
    streamOptions: ChatStreamOptions,
  ): AsyncGenerator<ChatChunk> {
    const { signal } = streamOptions;
    if (signal.aborted) throw signal.reason;
    let finishReason: ChatFinishReason | undefined;
    let usage: ChatUsage | undefined;
    const slots = toolCallSlots();
    try {
      // The client waits out its retry backoff without looking at the signal (openai 6.x): a
      // cancel must not wait for it. The abandoned attempt sends nothing more (the client checks
      // the signal before each request) and its rejection is swallowed.
      const completion = await untilAborted(
        client.chat.completions.create(
          {
            model: options.model,
            messages: toOpenAIMessages(messages),
            ...(streamOptions.tools.length > 0
              ? { tools: toOpenAITools(streamOptions.tools) }
              : {}),
            ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
            stream: true,
            ...(includeUsage ? { stream_options: { include_usage: true } } : {}),
          },
          { signal },
        ),
        signal,
      );
      // The openai stream ends quietly on abort; the signal check below turns that into a throw.
      for await (const chunk of completion) {
        if (chunk.usage) usage = toUsage(chunk.usage);
        for (const choice of chunk.choices) {
          const { delta } = choice;
          if (typeof delta?.content === 'string' && delta.content !== '') {
            yield { type: 'text', delta: delta.content };
          }
          for (const call of delta?.tool_calls ?? []) {
            yield {
              type: 'tool_call',
              index: slots.indexOf(call),
              id: call.id ?? undefined,
              name: call.function?.name ?? undefined,
              argumentsDelta: call.function?.arguments ?? undefined,
            };
          }
          if (choice.finish_reason) finishReason = finishReasons[choice.finish_reason] ?? 'other';
        }
      }
    } catch (error) {
      if (signal.aborted || error instanceof APIUserAbortError) throw signal.reason ?? error;
      throw toModelError(error);
    }
    if (signal.aborted) throw signal.reason;
    if (finishReason === undefined) {
      throw new ModelError(
        'the model stream ended before a finish_reason (connection closed early?)',
        undefined,
      );
    }
    yield { type: 'finish', reason: finishReason, usage };
  }

  return { provider: 'openai', model: options.model, stream };
}
