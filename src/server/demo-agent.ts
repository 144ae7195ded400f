/**
 * The agent `runplane serve` runs by default: the ReAct agent with two real tools (a
 * calculator and a clock) on a scripted demo model that streams at a human pace, so that stop,
 * queueing and preemption can be watched; or on an OpenAI-compatible model.
 *
 * @module
 */
import { nanoid } from 'nanoid';
import { z } from 'zod';
import type { ChatModel } from '../agent/chat-model.js';
import type { ChatMessage, ToolMessage, UserMessage } from '../agent/messages.js';
import type { HistoryPolicy } from '../agent/history-policy.js';
import { createReActAgent, type ReActResult, type ReActResumeInput } from '../agent/react-agent.js';
import { createScriptedModel, type ScriptedReply } from '../agent/scripted-model.js';
import { defineTool, type Tool } from '../agent/tool.js';
import { notRunContent } from '../agent/tool-runner.js';
import { systemClock, type Clock } from '../clock.js';
import { InvalidArgumentError } from '../errors.js';
import type { Agent } from '../run/agent.js';
import { evaluateArithmetic } from './calculator.js';

/** The instructions the default agent sends first in every request. */
export const demoInstructions =
  'You are the runplane demo assistant. Use the calculator tool for arithmetic and the clock ' +
  'tool for the current date and time. Answer briefly.';

/** The names of the demo tools. */
export type DemoToolName = 'calculator' | 'clock';

/**
 * Creates the demo tools: `calculator` (evaluates arithmetic with {@link evaluateArithmetic})
 * and `clock` (reads the runtime clock).
 *
 * @param options - `confirm`: the tools that need the user's approval before each call
 *   (`user.tool_confirmation`) @default ['clock']
 * @returns the two tools
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for an unknown name in `confirm`
 */
export function createDemoTools(options: { confirm?: readonly string[] } = {}): Tool[] {
  const confirm = new Set(options.confirm ?? ['clock']);
  for (const name of confirm) {
    if (name !== 'calculator' && name !== 'clock') {
      throw new InvalidArgumentError(
        'confirm',
        `expected \`confirm\` to name only calculator and clock, got ${JSON.stringify(name)}`,
      );
    }
  }
  const calculator = defineTool({
    name: 'calculator',
    description:
      'Evaluates an arithmetic expression: + - * / % ^, parentheses, pi, e, and sqrt abs round ' +
      'floor ceil sin cos tan ln log exp.',
    parameters: z.object({ expression: z.string().min(1).max(500) }),
    needsApproval: confirm.has('calculator'),
    execute: ({ expression }) => ({ expression, value: evaluateArithmetic(expression) }),
  });
  const clock = defineTool({
    name: 'clock',
    description: "Reads the server's current date and time (ISO 8601, UTC) and its time zone.",
    parameters: z.object({}),
    needsApproval: confirm.has('clock'),
    execute: (_args, ctx) => {
      const now = ctx.clock.now();
      return {
        iso: new Date(now).toISOString(),
        time_zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
      };
    },
  });
  return [calculator, clock];
}

const arithmetic = /[-+(]*[\d.]+[\d.\s()]*(?:(?:\*\*|[-+*/%^×÷])[\s(]*[-+]?[\d.]+[\d.\s()]*)+/;
const asksTime = /\b(time|clock|date|day|today|hour)\b/i;

const longReply = (question: string) =>
  `You said: "${question.length > 120 ? `${question.slice(0, 117)}...` : question}". ` +
  'This reply streams word by word at a human pace, so you have time to try the controls. ' +
  'Press stop on this message and only this run is cancelled; its history is kept. ' +
  'Send another message while I am talking and it waits in the queue, where you can cancel it. ' +
  'Turn on preempt and a new message cancels this run at its next safe point and starts at once. ' +
  'Ask me to compute something like (2 + 3) * 7, or ask what time it is, to see the tools at work.';

const wordsOf = (text: string): string[] => text.match(/\S+\s*/g) ?? [text];

const summaryOf = (result: ToolMessage): string => {
  if (result.isError) return `the ${result.name} tool did not run (${result.content})`;
  try {
    const value = JSON.parse(result.content) as Record<string, unknown>;
    if (result.name === 'calculator') {
      return `${String(value.expression)} = ${String(value.value)}`;
    }
    if (result.name === 'clock') {
      return `the server time is ${String(value.iso)} (time zone ${String(value.time_zone)})`;
    }
  } catch {
    // Not JSON: quote it as is.
  }
  return `${result.name} says ${result.content}`;
};

/**
 * Decides the demo model's next reply from the conversation (a pure function).
 *
 * @remarks The turn is everything after the last user message that is not a hint. With tool
 * results in the turn: a sentence per result (not for the "cancelled" result of a call the turn
 * asked again after a cut: the new result speaks for it). Otherwise a question with arithmetic calls the
 * calculator, one about the time calls the clock, and anything else gets a long reply. Hints
 * drained into the turn are acknowledged first. A turn that ends with a reply cut by a cancel
 * (`stop: 'cancelled'`, e.g. a loop session's turn stopped at a safe point and resumed after a
 * restart) is continued: the rest of that reply, not the whole of it again.
 *
 * @param messages - the request (instructions, history, the turn)
 * @returns the words to stream, and the tool calls to make
 */
export function planDemoReply(messages: readonly ChatMessage[]): {
  words: string[];
  toolCalls: Array<{ id: string; name: DemoToolName; args: Record<string, unknown> }>;
} {
  let start = messages.length;
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message?.role === 'user' && message.hintId === undefined) {
      start = i;
      break;
    }
  }
  const question = (messages[start] as UserMessage | undefined)?.content ?? '';
  const whole = messages.slice(start + 1);
  const last = whole.at(-1);
  const cut = last?.role === 'assistant' && last.stop === 'cancelled' ? last.content : '';
  const plan = planTurn(question, cut === '' ? whole : whole.slice(0, -1));
  const text = plan.words.join('');
  if (cut === '' || !text.startsWith(cut)) return plan;
  return { words: wordsOf(text.slice(cut.length)), toolCalls: plan.toolCalls };
}

function planTurn(
  question: string,
  turn: readonly ChatMessage[],
): ReturnType<typeof planDemoReply> {
  const hints = turn.filter((m): m is UserMessage => m.role === 'user' && m.hintId !== undefined);
  const noted = hints.length > 0 ? `Noted: "${hints.map((h) => h.content).join('", "')}". ` : '';
  // A call a cut left "cancelled" and a later reply asked again (a resumed turn, README
  // "Agents") is reported by its new result only.
  const lastAsk = turn.findLastIndex((m) => m.role === 'assistant' && m.toolCalls !== undefined);
  const results = turn.filter(
    (m, i): m is ToolMessage =>
      m.role === 'tool' && (i > lastAsk || m.content !== notRunContent.cancelled),
  );
  if (results.length > 0) {
    const text = `${noted}${results.map(summaryOf).join('; ')}.`;
    return { words: wordsOf(text.charAt(0).toUpperCase() + text.slice(1)), toolCalls: [] };
  }
  const expression = arithmetic.exec(question)?.[0].trim();
  if (expression !== undefined) {
    return {
      words: wordsOf(`${noted}Let me calculate that.`),
      toolCalls: [{ id: `toolu_${nanoid(12)}`, name: 'calculator', args: { expression } }],
    };
  }
  if (asksTime.test(question)) {
    return {
      words: wordsOf(`${noted}Let me look at the clock.`),
      toolCalls: [{ id: `toolu_${nanoid(12)}`, name: 'clock', args: {} }],
    };
  }
  return { words: wordsOf(`${noted}${longReply(question)}`), toolCalls: [] };
}

/** Options of {@link createDemoModel}. */
export interface DemoModelOptions {
  /** The clock the chunk delays wait on; pass the runtime's. @default the system clock */
  readonly clock?: Clock;
  /** The pause before each streamed word, in ms; a non-negative number. @default 60 */
  readonly chunkDelayMs?: number;
}

/**
 * Creates the scripted demo model: every request is answered by {@link planDemoReply},
 * streamed by a one-entry scripted model (so delays and aborts behave exactly as in tests).
 *
 * @param options - {@link DemoModelOptions}
 * @returns the {@link ChatModel}
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a bad `chunkDelayMs`
 */
export function createDemoModel(options: DemoModelOptions = {}): ChatModel {
  const clock = options.clock ?? systemClock;
  const chunkDelayMs = options.chunkDelayMs ?? 60;
  if (!(Number.isFinite(chunkDelayMs) && chunkDelayMs >= 0)) {
    throw new InvalidArgumentError(
      'chunkDelayMs',
      `expected \`chunkDelayMs\` to be a non-negative number of milliseconds, got ${String(chunkDelayMs)}`,
    );
  }
  return {
    provider: 'runplane.scripted',
    model: 'demo',
    stream(messages, streamOptions) {
      const plan = planDemoReply(messages);
      const reply: ScriptedReply = { text: plan.words, toolCalls: plan.toolCalls, chunkDelayMs };
      return createScriptedModel([reply], { clock }).stream(messages, streamOptions);
    },
  };
}

/** Options of {@link createDemoAgent}. */
export interface DemoAgentOptions extends DemoModelOptions {
  /** Use this model instead of the demo model (e.g. `createOpenAIModel(...)`). */
  readonly model?: ChatModel;
  /** The tools that need the user's approval. @default ['clock'] */
  readonly confirmTools?: readonly string[];
  /** How each model request fits its budget. @default the ReAct agent's defaults */
  readonly historyPolicy?: HistoryPolicy;
}

/**
 * Creates the default agent of `runplane serve`: {@link createReActAgent} with the demo tools,
 * on the demo model unless `model` is given, reporting a safe point between streamed sentences
 * (`streamSafePoints: 'sentence'`), and resuming a cut turn from `{ resume: state }`.
 *
 * @param options - {@link DemoAgentOptions}
 * @returns an agent of the user's text to a {@link ReActResult}
 * @throws {@link InvalidArgumentError} (`INVALID_ARGUMENT`) for a bad option
 * @example
 * ```ts
 * const agent = createDemoAgent({ clock: runtime.clock, chunkDelayMs: 60 });
 * ```
 */
export function createDemoAgent(
  options: DemoAgentOptions = {},
): Agent<string | ReActResumeInput, ReActResult> {
  return createReActAgent({
    model: options.model ?? createDemoModel(options),
    // A preempt or a graceful stop lands between sentences, within a second of streaming.
    streamSafePoints: 'sentence',
    tools: createDemoTools({ confirm: options.confirmTools }),
    instructions: demoInstructions,
    maxSteps: 6,
    ...(options.historyPolicy === undefined ? {} : { historyPolicy: options.historyPolicy }),
  });
}
