/**
 * A scripted {@link ChatModel}: deterministic replies for tests and the demo.
 *
 * @module
 */
import { sleep, systemClock, type Clock } from '../clock.js';
import { InvalidArgumentError } from '../errors.js';
import type { ChatChunk, ChatModel, ChatUsage, ToolSpec } from './chat-model.js';
import type { Gate } from './gate.js';
import type { ChatMessage } from './messages.js';
import { ModelError } from './model-error.js';

/** One tool call a scripted reply makes. */
export interface ScriptedToolCall {
  /** @default `call_<request index>_<call index>` */
  readonly id?: string;
  readonly name: string;
  /** The arguments: an object is sent as JSON, a string as is (to script invalid JSON). */
  readonly args?: unknown;
}

/** One scripted reply. */
export interface ScriptedReply {
  /** The reply text, or its chunks in order. */
  readonly text?: string | readonly string[];
  /** Tool calls, streamed after the text (each as two deltas: header, then arguments). */
  readonly toolCalls?: readonly ScriptedToolCall[];
  /** Wait this long on the clock before each chunk (the finish chunk too), in ms. @default 0 */
  readonly chunkDelayMs?: number;
  /** Block on this gate before chunk number `gateAt` until it opens. */
  readonly gate?: Gate;
  /** Index of the chunk the gate blocks (0 = before the first). @default 0 */
  readonly gateAt?: number;
  /** Throw this after streaming the chunks (instead of the finish chunk). */
  readonly error?: Error;
  /**
   * Reported in the finish chunk. @default none: a scripted reply spent no tokens, so it
   * reports no usage (nothing in `run.completed`, no token metric)
   */
  readonly usage?: ChatUsage;
}

/** A recorded request to a scripted model. */
export interface ScriptedRequest {
  /** A deep copy of the messages the model received. */
  readonly messages: ChatMessage[];
  /** The names of the tools offered. */
  readonly toolNames: string[];
  /** The call's signal (check `aborted` to see whether the call was stopped). */
  readonly signal: AbortSignal;
}

/** A script entry: a reply, or a function of the request that returns one. */
export type ScriptEntry = ScriptedReply | ((request: ScriptedRequest) => ScriptedReply);

/** Options of {@link createScriptedModel}. */
export interface ScriptedModelOptions {
  /** The clock chunk delays wait on; pass the runtime's. @default the system clock */
  readonly clock?: Clock;
}

/** A scripted model, with the record of its requests. */
export interface ScriptedModel extends ChatModel {
  /** Every request received, in order. */
  readonly requests: readonly ScriptedRequest[];
}

/**
 * Creates a model that answers request N with script entry N.
 *
 * @remarks Chunks: the text chunks, then the tool calls, then a finish chunk (`tool_calls`
 * when there are tool calls, else `stop`). Delays run on the injected clock, so a test drives
 * them with a `SimulatedClock`; an abort rejects with the signal's reason, whether during a
 * delay, at the gate, or between chunks.
 *
 * @param script - one entry per expected request
 * @param options - {@link ScriptedModelOptions}
 * @returns the model; `requests` records what it received
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) when `script` is not an array
 * @throws {@link ModelError} (`MODEL_ERROR`, no status) while streaming, for a request past the
 *   end of the script
 * @example
 * ```ts
 * const model = createScriptedModel([
 *   { toolCalls: [{ name: 'weather', args: { city: 'Paris' } }] },
 *   { text: ['It is ', 'sunny.'] },
 * ]);
 * ```
 */
export function createScriptedModel(
  script: readonly ScriptEntry[],
  options: ScriptedModelOptions = {},
): ScriptedModel {
  if (!Array.isArray(script)) {
    throw new InvalidArgumentError(
      'script',
      `expected \`script\` to be an array, got ${typeof script}`,
    );
  }
  const entries: readonly ScriptEntry[] = script;
  const clock = options.clock ?? systemClock;
  const requests: ScriptedRequest[] = [];

  async function* play(
    index: number,
    entry: ScriptEntry | undefined,
    request: ScriptedRequest,
  ): AsyncGenerator<ChatChunk> {
    const { signal } = request;
    if (entry === undefined) {
      throw new ModelError(`scripted model has no reply for request ${index + 1}`, undefined);
    }
    const reply = typeof entry === 'function' ? entry(request) : entry;
    const texts =
      reply.text === undefined ? [] : typeof reply.text === 'string' ? [reply.text] : reply.text;
    const chunks: ChatChunk[] = texts.map((delta) => ({ type: 'text', delta }));
    (reply.toolCalls ?? []).forEach((call, i) => {
      chunks.push({
        type: 'tool_call',
        index: i,
        id: call.id ?? `call_${index}_${i}`,
        name: call.name,
      });
      chunks.push({
        type: 'tool_call',
        index: i,
        argumentsDelta: typeof call.args === 'string' ? call.args : JSON.stringify(call.args ?? {}),
      });
    });
    const finishAt = chunks.length;
    for (let i = 0; i <= finishAt; i++) {
      if (reply.gate !== undefined && i === (reply.gateAt ?? 0)) await reply.gate.wait(signal);
      if ((reply.chunkDelayMs ?? 0) > 0) await sleep(clock, reply.chunkDelayMs ?? 0, signal);
      if (signal.aborted) throw signal.reason;
      const chunk = chunks[i];
      if (chunk !== undefined) {
        yield chunk;
        continue;
      }
      if (reply.error !== undefined) throw reply.error;
      yield {
        type: 'finish',
        reason: (reply.toolCalls?.length ?? 0) > 0 ? 'tool_calls' : 'stop',
        ...(reply.usage === undefined ? {} : { usage: reply.usage }),
      };
    }
  }

  return {
    provider: 'runplane.scripted',
    model: 'scripted',
    requests,
    stream(
      messages: readonly ChatMessage[],
      streamOptions: { tools: readonly ToolSpec[]; signal: AbortSignal },
    ) {
      const request: ScriptedRequest = {
        messages: structuredClone([...messages]),
        toolNames: streamOptions.tools.map((tool) => tool.name),
        signal: streamOptions.signal,
      };
      const index = requests.length;
      requests.push(request);
      return play(index, entries[index], request);
    },
  };
}
