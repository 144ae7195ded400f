/**
 * The ChatModel contract: one streamed model call (docs/architecture.md, "Agents").
 *
 * @module
 */
import type { ChatMessage } from './messages.js';

/** A tool as the model sees it: a name, a description and a JSON Schema of its arguments. */
export interface ToolSpec {
  readonly name: string;
  readonly description: string;
  /** A JSON Schema object (`type: 'object'`). */
  readonly parameters: Readonly<Record<string, unknown>>;
}

/** Token counts of one model call. */
export interface ChatUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly totalTokens: number;
}

/** Why the model stopped: a normalized OpenAI `finish_reason`. */
export type ChatFinishReason = 'stop' | 'tool_calls' | 'length' | 'content_filter' | 'other';

/**
 * One piece of a streamed reply.
 *
 * @remarks
 * - `text`: a delta of the reply text.
 * - `tool_call`: a delta of the tool call at `index`; `id` and `name` come once (usually
 *   first), `argumentsDelta` pieces concatenate to the JSON arguments.
 * - `finish`: the last chunk, with the reason and the usage when the provider reports it.
 *   A stream that ends without one was cut short.
 */
export type ChatChunk =
  | { readonly type: 'text'; readonly delta: string }
  | {
      readonly type: 'tool_call';
      readonly index: number;
      readonly id?: string | undefined;
      readonly name?: string | undefined;
      readonly argumentsDelta?: string | undefined;
    }
  | {
      readonly type: 'finish';
      readonly reason: ChatFinishReason;
      readonly usage?: ChatUsage | undefined;
    };

/** Options of {@link ChatModel.stream}. */
export interface ChatStreamOptions {
  /** The tools the model may call (empty for none). */
  readonly tools: readonly ToolSpec[];
  /** Aborting it stops the call; the iterator then rejects with the signal's reason. */
  readonly signal: AbortSignal;
}

/**
 * A chat model that streams its reply.
 *
 * @remarks Implementations: {@link createOpenAIModel} (any OpenAI-compatible endpoint) and
 * {@link createScriptedModel} (deterministic, for tests and demos). A failure of the provider is
 * a {@link ModelError} (code `MODEL_ERROR`); an abort rejects with the signal's reason.
 */
export interface ChatModel {
  /**
   * Who serves the model, for the `chat` span's `gen_ai.provider.name` (OpenTelemetry GenAI
   * conventions): `openai` for {@link createOpenAIModel}, `runplane.scripted` for
   * {@link createScriptedModel}. Optional.
   */
  readonly provider?: string;
  /** The model's name, for the `chat` span's `gen_ai.request.model`. Optional. */
  readonly model?: string;
  /**
   * Starts one model call.
   *
   * @param messages - the whole request, instructions first
   * @param options - {@link ChatStreamOptions}
   * @returns the reply as chunks, ending with a `finish` chunk
   * @throws {@link ModelError} (`MODEL_ERROR`) while iterating, when the provider fails
   */
  stream(messages: readonly ChatMessage[], options: ChatStreamOptions): AsyncIterable<ChatChunk>;
}
