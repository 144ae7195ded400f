/**
 * One execution of the reference ReAct agent (`createReActAgent` in react-agent.ts; docs/architecture.md,
 * "Agents"): the step loop, the streamed model call, tools, safe points, interrupt and cancel
 * handling, and the history save.
 *
 * @module
 * @internal
 */
import { SpanStatusCode } from '@opentelemetry/api';
import { RunplaneError } from '../errors.js';
import type { Hint } from '../inbox/inbox.js';
import { startRunChildSpan } from '../observability/run-spans.js';
import type { RunContext } from '../run/agent.js';
import { describeError } from '../run/run-log.js';
import type { ChatChunk, ChatFinishReason, ChatUsage } from './chat-model.js';
import {
  askedToolCallIds,
  createMessageId,
  duplicateToolCallId,
  type AssistantMessage,
  type ChatMessage,
  type ToolCall,
  type ToolMessage,
} from './messages.js';
import { ModelError } from './model-error.js';
import { fitRequest } from './history-policy.js';
import {
  defaultRecovery,
  type ReActAgentOptions,
  type ReActResult,
  type ReActResumeInput,
  type ReActSafePointState,
  type ReActStopReason,
} from './react-agent-options.js';
import { notRunContent, runToolCall, toolResult, type ToolOutcome } from './tool-runner.js';
import { resumedStart, type ResumedCalls } from './resumed-turn.js';
import type { Tool } from './tool.js';

/** Streamed text that has just completed a sentence: `.`, `!` or `?` (maybe quoted) before whitespace. */
const sentenceEnd = /[.!?]["')\]]?\s+$/;

const addUsage = (a: ChatUsage, b: ChatUsage | undefined): ChatUsage =>
  b === undefined
    ? a
    : {
        promptTokens: a.promptTokens + b.promptTokens,
        completionTokens: a.completionTokens + b.completionTokens,
        totalTokens: a.totalTokens + b.totalTokens,
      };

interface ModelTurn {
  readonly text: string;
  readonly toolCalls: ToolCall[];
  readonly finishReason: ChatFinishReason | undefined;
  readonly usage: ChatUsage | undefined;
  readonly interrupted: boolean;
}

/** @internal The state of one execution; an agent object is shared by many runs, this is not. */
export class ReActExecution {
  readonly #options: ReActAgentOptions;
  readonly #ctx: RunContext;
  readonly #tools: ReadonlyMap<string, Tool>;
  readonly #past: readonly ChatMessage[];
  readonly #saveHistory: boolean;
  /** Everything this run added, in conversation order. */
  readonly #produced: ChatMessage[] = [];
  /** Text streamed in the current step, not yet committed as a message. */
  #partial: { id: string; text: string } | undefined;
  /** The tool calls of the current step and the results so far. */
  #pending: { calls: readonly ToolCall[]; results: Map<string, ToolMessage> } | undefined;
  #saving: Promise<void> | undefined;
  #usage: ChatUsage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };
  #steps = 0;
  /**
   * A carried turn's reply cut so far (its cut replies, one per lost attempt, README
   * "Cluster"): the run's reply, when it is the message that continues them, starts with it.
   */
  #carriedReply = '';
  /** The id of the message that continues {@link #carriedReply} (the run's first model call). */
  #continuationId: string | undefined;
  /**
   * A resumed turn's tool calls that had not run: those of the reply its state ends with (an
   * `afterChatModel` safe point), not answered there; from a session history, the ones the cut
   * saved as cancelled, asked again ({@link reissuedCalls}). The run runs them before its first step.
   */
  #resumedCalls: ResumedCalls | undefined;
  /** The reply that asks a resumed turn's calls again, when the session history answered them "cancelled". */
  #reissued: AssistantMessage | undefined;
  /** Where the current turn starts in the history: a history-resumed turn's is there, saved by its cut. */
  #turnStart: number;

  constructor(
    options: ReActAgentOptions,
    ctx: RunContext,
    tools: ReadonlyMap<string, Tool>,
    past: readonly ChatMessage[],
    saveHistory: boolean,
    input: string | ReActResumeInput,
  ) {
    this.#options = options;
    this.#ctx = ctx;
    this.#tools = tools;
    this.#past = past;
    this.#saveHistory = saveHistory;
    this.#turnStart = past.length;
    if (typeof input === 'string') {
      this.#produced.push({ role: 'user', content: input });
    } else {
      // A resumed turn: with a session history, the cut run's cancel saved the turn up to its
      // safe point there (the reply so far marked `cancelled`), so the model continues from it.
      // A carried turn (a cluster's failover), or one whose save failed, comes with the input.
      this.#steps = input.resume.step;
      const start = resumedStart(input, past, saveHistory);
      this.#produced.push(...start.produced);
      this.#resumedCalls = start.calls;
      this.#reissued = start.reissued;
      this.#turnStart = start.turnStart;
      this.#carriedReply = start.carriedReply;
    }
  }

  async run(): Promise<ReActResult> {
    const ctx = this.#ctx;
    const maxSteps = this.#options.maxSteps ?? 10;
    let last: AssistantMessage | undefined;
    const resumed = this.#resumedCalls;
    if (resumed !== undefined) {
      this.#resumedCalls = undefined;
      last = resumed.reply;
      this.#pending = { calls: resumed.calls, results: new Map() };
      if (last === this.#reissued) {
        this.#commitAssistant(last, this.#steps, undefined);
        // Its own safe point: a turn cut again while these calls run resumes from this reply,
        // not the first cut's, whose calls the history now answers twice (README "Agents").
        ctx.safePoint('afterChatModel', { step: this.#steps, messages: [...this.#produced] });
      }
      const ended = await this.#act(last.id, this.#steps);
      if (ended !== undefined) return ended;
    }
    while (this.#steps < maxSteps) {
      if (ctx.interruptRequested) return this.#finishInterrupted();
      const step = ++this.#steps;
      const messageId = createMessageId();
      if (this.#carriedReply !== '') this.#continuationId ??= messageId;
      this.#drainInbox(messageId, step);
      const turn = await this.#tracedModelCall(messageId, step);
      if (turn.interrupted) {
        let partial: AssistantMessage | undefined;
        if (turn.text !== '') {
          partial = { role: 'assistant', id: messageId, content: turn.text, stop: 'interrupted' };
          this.#commitAssistant(partial, step, turn);
        }
        return this.#finishInterrupted(partial);
      }
      last = {
        role: 'assistant',
        id: messageId,
        content: turn.text,
        ...(turn.toolCalls.length > 0 ? { toolCalls: turn.toolCalls } : {}),
      };
      this.#commitAssistant(last, step, turn);
      if (turn.toolCalls.length === 0) return this.#finish(last, 'completed');
      this.#pending = { calls: turn.toolCalls, results: new Map() };
      ctx.safePoint('afterChatModel', { step, messages: [...this.#produced] });
      const ended = await this.#act(messageId, step);
      if (ended !== undefined) return ended;
    }
    return this.#finish(last, 'max_steps');
  }

  /**
   * Runs the pending tool calls of reply `messageId` (of `step`) and reports `afterToolCalls`;
   * on an interrupt they do not run, and the run ends with its recovery reply (returned).
   */
  async #act(messageId: string, step: number): Promise<ReActResult | undefined> {
    const ctx = this.#ctx;
    if (ctx.interruptRequested) {
      for (const call of this.#pending?.calls ?? []) {
        this.#recordResult(messageId, toolResult(call, 'interrupted', notRunContent.interrupted));
      }
      this.#commitResults();
      return this.#finishInterrupted();
    }
    await this.#runTools(messageId);
    this.#commitResults();
    ctx.safePoint('afterToolCalls', { step, messages: [...this.#produced] });
    return undefined;
  }

  /** Saves what the run produced, once; never rejects (a failure is a `session.error` event). */
  save(stop: 'cancelled' | 'failed' | undefined): Promise<void> {
    if (this.#saving !== undefined) return this.#saving;
    const messages = [...this.#produced];
    if (this.#partial !== undefined && this.#partial.text !== '') {
      messages.push({
        role: 'assistant',
        id: this.#partial.id,
        content: this.#partial.text,
        stop: stop ?? 'cancelled',
      });
    }
    if (this.#pending !== undefined) {
      // Never half a tool call: every call of the last reply gets a result.
      const { calls, results } = this.#pending;
      const content = stop === 'failed' ? notRunContent.failed : notRunContent.cancelled;
      for (const call of calls) {
        messages.push(results.get(call.id) ?? toolResult(call, 'cancelled', content).message);
      }
    }
    this.#saving = this.#saveHistory
      ? this.#ctx.history.append(messages).catch(() => {
          // Already logged as a `session.error` event by ctx.history; the reply still stands.
        })
      : Promise.resolve();
    return this.#saving;
  }

  #drainInbox(messageId: string, step: number): void {
    const format = this.#options.formatHint ?? ((hint: Hint) => hint.text);
    for (const hint of this.#ctx.inbox.drain()) {
      this.#produced.push({ role: 'user', content: format(hint), hintId: hint.id });
      this.#ctx.emit('agent.hint_consumed', {
        hint_id: hint.id,
        message_id: messageId,
        step,
        source: hint.source,
      });
    }
  }

  async #callModel(messageId: string, step: number): Promise<ModelTurn> {
    const ctx = this.#ctx;
    const instructions = this.#options.instructions;
    const fitted = fitRequest(
      {
        instructions:
          instructions === undefined || instructions === ''
            ? []
            : [{ role: 'system', content: instructions }],
        past: this.#past.slice(0, this.#turnStart),
        current: [...this.#past.slice(this.#turnStart), ...this.#produced],
      },
      this.#options.historyPolicy,
    );
    if (fitted.omittedTurns > 0 || fitted.truncatedResults > 0) {
      ctx.emit('agent.context_trimmed', {
        step,
        omitted_turns: fitted.omittedTurns,
        truncated_results: fitted.truncatedResults,
        estimated_tokens: fitted.tokens,
      });
    }
    const request = fitted.messages;
    const partial = { id: messageId, text: '' };
    this.#partial = partial;
    const calls = new Map<
      number,
      { id?: string | undefined; name?: string | undefined; args: string }
    >();
    let finish: Extract<ChatChunk, { type: 'finish' }> | undefined;
    let interrupted = false;
    try {
      const chunks = this.#options.model.stream(request, {
        tools: [...this.#tools.values()].map((tool) => tool.spec),
        // An interrupt stops a call that waits for its next chunk, not only between chunks.
        signal: AbortSignal.any([ctx.signal, ctx.interruptSignal]),
      });
      for await (const chunk of chunks) {
        if (chunk.type === 'text') {
          if (chunk.delta !== '') {
            partial.text += chunk.delta;
            ctx.emit('agent.message_delta', { message_id: messageId, step, delta: chunk.delta });
            if (this.#options.streamSafePoints === 'sentence' && sentenceEnd.test(partial.text)) {
              const state: ReActSafePointState = {
                step,
                messages: [...this.#produced],
                partial: partial.text,
              };
              ctx.safePoint('afterChatModel', state);
            }
          }
        } else if (chunk.type === 'tool_call') {
          const call = calls.get(chunk.index) ?? { args: '' };
          // An empty id is none (DashScope repeats `"id": ""` on each continuation delta).
          if (chunk.id !== undefined && chunk.id !== '') call.id = chunk.id;
          if (chunk.name !== undefined) call.name = (call.name ?? '') + chunk.name;
          if (chunk.argumentsDelta !== undefined) call.args += chunk.argumentsDelta;
          calls.set(chunk.index, call);
        } else {
          finish = chunk;
        }
        // Checked at every chunk (AgentScope's interrupt checkpoint); a finished reply is whole.
        if (chunk.type !== 'finish' && ctx.interruptRequested) {
          interrupted = true;
          break;
        }
      }
    } catch (error) {
      if (ctx.signal.aborted) throw ctx.signal.reason;
      if (!ctx.interruptRequested) {
        throw error instanceof RunplaneError
          ? error
          : new ModelError(
              `the model failed: ${error instanceof Error ? error.message : String(error)}`,
              undefined,
              { cause: error },
            );
      }
      interrupted = true;
    }
    if (ctx.signal.aborted) throw ctx.signal.reason;
    if (!interrupted && finish === undefined) {
      throw new ModelError('the model stream ended without a finish chunk', undefined);
    }
    const asked = calls.size === 0 ? new Set() : askedToolCallIds(this.#past, this.#produced);
    const toolCalls = [...calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([index, call]): ToolCall => ({
        id: call.id === undefined || asked.has(call.id) ? `${messageId}_${index}` : call.id,
        name: call.name ?? '',
        arguments: call.args,
      }));
    const duplicate = interrupted ? undefined : duplicateToolCallId(toolCalls);
    if (duplicate !== undefined) {
      // A malformed reply, refused before anything runs; its text stays as a failed partial reply.
      throw new ModelError(
        `the model replied with two tool calls of id ${JSON.stringify(duplicate)}`,
        undefined,
      );
    }
    this.#partial = undefined;
    return {
      text: partial.text,
      // Tool calls of a reply cut short are half calls: dropped.
      toolCalls: interrupted ? [] : toolCalls,
      finishReason: finish?.reason,
      usage: finish?.usage,
      interrupted,
    };
  }

  /** {@link #callModel} as a `chat` span inside the run's span, when that span records. */
  async #tracedModelCall(messageId: string, step: number): Promise<ModelTurn> {
    const { provider, model } = this.#options.model;
    const traced = startRunChildSpan(this.#ctx.runId, 'chat', {
      'gen_ai.operation.name': 'chat',
      ...(typeof provider === 'string' ? { 'gen_ai.provider.name': provider } : {}),
      ...(typeof model === 'string' ? { 'gen_ai.request.model': model } : {}),
      'runplane.step': step,
      'runplane.message.id': messageId,
    });
    if (traced === undefined) return this.#callModel(messageId, step);
    const { span } = traced;
    try {
      const turn = await this.#callModel(messageId, step);
      if (turn.usage !== undefined) {
        span.setAttribute('gen_ai.usage.input_tokens', turn.usage.promptTokens);
        span.setAttribute('gen_ai.usage.output_tokens', turn.usage.completionTokens);
      }
      if (turn.finishReason !== undefined) {
        span.setAttribute('gen_ai.response.finish_reasons', [turn.finishReason]);
      }
      span.setAttribute('runplane.interrupted', turn.interrupted);
      return turn;
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: describeError(error) });
      throw error;
    } finally {
      traced.end();
    }
  }

  /**
   * Adds a reply to the conversation and logs it: `agent.message`, then `agent.tool_use` per
   * call. `turn` is the model call that produced it (`undefined` for a reply the run wrote: one
   * that asks a resumed turn's calls again, a recovery reply).
   */
  #commitAssistant(message: AssistantMessage, step: number, turn: ModelTurn | undefined): void {
    this.#usage = addUsage(this.#usage, turn?.usage);
    this.#produced.push(message);
    this.#ctx.emit('agent.message', {
      message_id: message.id,
      step,
      content: message.content,
      tool_use_ids: (message.toolCalls ?? []).map((call) => call.id),
      finish_reason: turn?.finishReason ?? null,
      stop: message.stop ?? null,
      usage: turn?.usage ?? null,
    });
    for (const call of message.toolCalls ?? []) {
      this.#ctx.emit('agent.tool_use', {
        message_id: message.id,
        tool_use_id: call.id,
        name: call.name,
        arguments: call.arguments,
      });
    }
  }

  async #runTools(messageId: string): Promise<void> {
    const ctx = this.#ctx;
    const pending = this.#pending;
    if (pending === undefined) return;
    const signal = AbortSignal.any([ctx.signal, ctx.interruptSignal]);
    // allSettled: a tool that ignores a cancel keeps the run unsettled, as it should (docs/architecture.md, "A run's life").
    const settled = await Promise.allSettled(
      pending.calls.map(async (call) => {
        const outcome = await runToolCall(call, this.#tools.get(call.name), ctx, signal);
        this.#recordResult(messageId, outcome);
      }),
    );
    if (ctx.signal.aborted) throw ctx.signal.reason;
    for (const result of settled) if (result.status === 'rejected') throw result.reason;
  }

  #recordResult(messageId: string, outcome: ToolOutcome): void {
    const pending = this.#pending;
    if (pending === undefined) return;
    pending.results.set(outcome.message.toolCallId, outcome.message);
    this.#ctx.emit('agent.tool_result', {
      message_id: messageId,
      tool_use_id: outcome.message.toolCallId,
      name: outcome.message.name,
      status: outcome.status,
      is_error: outcome.message.isError,
      content: outcome.message.content,
    });
  }

  /** Moves the current step's results into the conversation, in call order. */
  #commitResults(): void {
    const pending = this.#pending;
    if (pending === undefined) return;
    for (const call of pending.calls) {
      const result = pending.results.get(call.id);
      if (result !== undefined) this.#produced.push(result);
    }
    this.#pending = undefined;
  }

  async #finishInterrupted(partial?: AssistantMessage): Promise<ReActResult> {
    const ctx = this.#ctx;
    const recovery = this.#options.recoveryReply ?? defaultRecovery;
    const content =
      typeof recovery === 'string'
        ? ctx.interruptCause === 'shutdown'
          ? ''
          : recovery
        : recovery({ interruptMessage: ctx.interruptMessage, interruptCause: ctx.interruptCause });
    // Nothing to say (a shutdown): the partial reply, if any, is what the conversation keeps.
    if (content === '') return this.#finish(partial, 'interrupted');
    const message: AssistantMessage = {
      role: 'assistant',
      id: createMessageId(),
      content,
      stop: 'interrupted',
    };
    this.#commitAssistant(message, this.#steps, undefined);
    return this.#finish(message, 'interrupted');
  }

  async #finish(last: AssistantMessage | undefined, reason: ReActStopReason): Promise<ReActResult> {
    await this.save(undefined);
    return {
      reply:
        last === undefined
          ? ''
          : last.id === this.#continuationId
            ? `${this.#carriedReply}${last.content}`
            : last.content,
      messageId: last?.id,
      reason,
      steps: this.#steps,
      usage: this.#usage,
      messages: [...this.#produced],
    };
  }
}
