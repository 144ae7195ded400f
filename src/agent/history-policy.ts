/**
 * The ReAct agent's bounded model context (docs/architecture.md, "Agents"): every model request
 * fits a token budget, estimated locally (no network, no tokenizer download). Older turns of
 * the session are dropped, or folded into one summary message; long tool results are cut with
 * a marker. The stored history is never changed: only what one request sends.
 *
 * @module
 */
import { z } from 'zod';
import { RunplaneError } from '../errors.js';
import type { ChatMessage, ToolMessage } from './messages.js';

/** How a ReAct agent fits its requests to the model's context (`createReActAgent`'s `context`). */
export interface HistoryPolicy {
  /**
   * The token budget of one model request: instructions, the kept history and the current
   * turn together, as {@link HistoryPolicy.countTokens} estimates them. The current turn (the
   * user's message and what this run produced; for a turn resumed from the session history,
   * what its cut saved there too) comes first; older turns fill what is left,
   * newest first. When the current turn alone is over the budget, its oldest tool results are
   * left out (each replaced by a marker, the call itself kept) until it fits; when it still
   * does not fit, the model is not called and the run fails with
   * {@link ContextOverBudgetError}. A positive integer. @default 24000
   */
  readonly maxRequestTokens?: number;
  /**
   * A tool result longer than this many tokens is cut to it, the closing marker included:
   * `[… truncated by runplane: N of M tokens kept]`. A positive integer. @default 4000
   */
  readonly maxToolResultTokens?: number;
  /**
   * What becomes of the older turns that do not fit: `summary` folds them into one system
   * message after the instructions (each turn's user message and final reply, shortened, newest
   * kept first; at most an eighth of the budget), `drop` leaves them out. @default 'summary'
   */
  readonly overflow?: 'summary' | 'drop';
  /**
   * Counts the tokens of a text. The default, {@link estimateTokens}, needs no tokenizer; pass
   * an exact one (e.g. `js-tiktoken`'s `encode(text).length`) for a tight budget.
   */
  readonly countTokens?: (text: string) => number;
}

/** @internal The schema of {@link HistoryPolicy}. */
export const historyPolicySchema = z.strictObject({
  maxRequestTokens: z
    .number({ error: 'a positive integer' })
    .int({ error: 'a positive integer' })
    .positive({ error: 'a positive integer' })
    .optional(),
  maxToolResultTokens: z
    .number({ error: 'a positive integer' })
    .int({ error: 'a positive integer' })
    .positive({ error: 'a positive integer' })
    .optional(),
  overflow: z.enum(['summary', 'drop'], { error: "one of 'summary', 'drop'" }).optional(),
  countTokens: z
    .custom<(text: string) => number>((value) => typeof value === 'function', {
      error: 'a function of a text to a number of tokens',
    })
    .optional(),
});

/**
 * A model request cannot fit its token budget even with every older turn and every tool result
 * of the current turn left out: the instructions and the user's message alone are over
 * {@link HistoryPolicy.maxRequestTokens}. Code `CONTEXT_OVER_BUDGET`; the model is not called.
 */
export class ContextOverBudgetError extends RunplaneError {
  /**
   * @param tokens - the estimated tokens of the smallest request that could be built
   * @param budget - the policy's `maxRequestTokens`
   */
  constructor(
    readonly tokens: number,
    readonly budget: number,
  ) {
    super(
      'CONTEXT_OVER_BUDGET',
      `the smallest request is ${tokens} tokens, over the budget of ${budget} (maxRequestTokens)`,
    );
  }
}

/** What one message costs beyond its text (role, separators), in tokens. */
const messageOverheadTokens = 4;
/** The longest excerpt of a message in the summary, in characters. */
const summaryExcerptChars = 120;

/**
 * The pieces a BPE tokenizer tends to keep apart: a word (split where a capital starts one), up
 * to three digits, a run of whitespace, a run of ASCII punctuation, any other character.
 */
const pieces = /[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d{1,3}|\s+|[!-/:-@[-`{-~]+|[^\sA-Za-z\d]/gu;

const isAsciiLetter = (code: number) => (code >= 65 && code <= 90) || (code >= 97 && code <= 122);
const isDigit = (code: number) => code >= 48 && code <= 57;
const isSpace = (code: number) => code === 32 || (code >= 9 && code <= 13);

/**
 * Estimates the tokens of a text without a tokenizer, piece by piece as a BPE tokenizer splits
 * it: a word costs a token per five letters (at least one), split at each capital; up to three
 * digits, one; a single space before a word, nothing (it joins the word), other whitespace a
 * token per four characters; ASCII punctuation a token per two characters; any other character
 * one, and three outside the Basic Multilingual Plane (an emoji).
 *
 * @remarks Measured against OpenAI's `o200k_base` and `cl100k_base` (the larger count of the
 * two; `test/agent/history-policy.test.ts` keeps the samples): UUIDs, hex, digits, numbers,
 * CJK, German and JSON are within 10 %; English prose, URLs and emoji are overestimated by
 * 20–30 %, code by up to 70 %, Cyrillic about threefold; random base64 is the worst case,
 * underestimated by about 25 %. Pass an exact counter as {@link HistoryPolicy.countTokens}
 * for a tight budget.
 *
 * @param text - any text
 * @returns the estimated number of tokens, at least 0
 */
export function estimateTokens(text: string): number {
  let tokens = 0;
  for (const match of text.matchAll(pieces)) {
    const piece = match[0];
    const code = piece.charCodeAt(0);
    if (isAsciiLetter(code)) {
      tokens += Math.ceil(piece.length / 5);
    } else if (isDigit(code)) {
      tokens += 1;
    } else if (isSpace(code)) {
      const joinsWord = piece === ' ' && isAsciiLetter(text.charCodeAt(match.index + 1));
      if (!joinsWord) tokens += Math.ceil(piece.length / 4);
    } else if (code < 128) {
      tokens += Math.ceil(piece.length / 2);
    } else {
      tokens += piece.length === 2 ? 3 : 1; // a surrogate pair: outside the BMP
    }
  }
  return tokens;
}

/** What {@link fitRequest} did to one request. */
export interface FittedRequest {
  /** The messages to send. */
  readonly messages: ChatMessage[];
  /** The estimated tokens of `messages`. */
  readonly tokens: number;
  /** Turns of the history left out (folded into the summary, or dropped). */
  readonly omittedTurns: number;
  /** Tool results cut to `maxToolResultTokens`. */
  readonly truncatedResults: number;
}

/**
 * @internal Builds one model request within the policy's budget.
 *
 * @throws {@link ContextOverBudgetError} (code `CONTEXT_OVER_BUDGET`) when the instructions and
 *   the current turn, with all its tool results left out, are still over the budget
 * @param parts - `instructions` (sent first, always), `past` (the session's history, oldest
 *   first), `current` (this run's messages, always sent)
 * @param policy - the {@link HistoryPolicy}
 * @returns the request and what was left out
 */
export function fitRequest(
  parts: {
    readonly instructions: readonly ChatMessage[];
    readonly past: readonly ChatMessage[];
    readonly current: readonly ChatMessage[];
  },
  policy: HistoryPolicy = {},
): FittedRequest {
  const count = policy.countTokens ?? estimateTokens;
  const budget = policy.maxRequestTokens ?? 24_000;
  const maxResult = policy.maxToolResultTokens ?? 4_000;
  let truncatedResults = 0;
  const shorten = (message: ChatMessage): ChatMessage => {
    if (message.role !== 'tool') return message;
    const cut = truncateToolResult(message, maxResult, count);
    if (cut !== message) truncatedResults++;
    return cut;
  };
  const costOf = (message: ChatMessage): number =>
    messageOverheadTokens +
    count(message.content) +
    (message.role === 'assistant'
      ? (message.toolCalls ?? []).reduce((sum, call) => sum + count(call.name + call.arguments), 0)
      : 0);
  const sum = (messages: readonly ChatMessage[]) =>
    messages.reduce((total, message) => total + costOf(message), 0);

  const current = parts.current.map(shorten);
  let fixed = sum(parts.instructions) + sum(current);
  for (let i = 0; fixed > budget && i < current.length; i++) {
    const message = current[i];
    if (message?.role !== 'tool') continue;
    const stub = {
      ...message,
      content: `[… tool result left out by runplane to fit the context: ${count(message.content)} tokens]`,
    };
    if (costOf(stub) >= costOf(message)) continue; // a short result stays: its stub would cost more
    fixed += costOf(stub) - costOf(message);
    current[i] = stub;
    truncatedResults++;
  }
  if (fixed > budget) throw new ContextOverBudgetError(fixed, budget);
  const turns = splitTurns(parts.past.map(shorten));
  const costs = turns.map(sum);
  /** How many of the newest turns fit in `room`. */
  const fitting = (room: number): number => {
    let used = 0;
    let kept = 0;
    for (let i = turns.length - 1; i >= 0; i--) {
      used += costs[i] ?? 0;
      if (used > room) break;
      kept++;
    }
    return kept;
  };
  let kept = fitting(budget - fixed);
  let summary: ChatMessage | undefined;
  if (kept < turns.length && (policy.overflow ?? 'summary') === 'summary') {
    const reserve = Math.min(Math.floor(budget / 8), Math.max(0, budget - fixed));
    kept = fitting(budget - fixed - reserve);
    summary = summarize(turns.slice(0, turns.length - kept), reserve, count);
  }
  const messages = [
    ...parts.instructions,
    ...(summary === undefined ? [] : [summary]),
    ...turns.slice(turns.length - kept).flat(),
    ...current,
  ];
  return {
    messages,
    tokens: sum(messages),
    omittedTurns: turns.length - kept,
    truncatedResults,
  };
}

/** Splits a history into turns: each starts at a user message that is not a hint. */
function splitTurns(history: readonly ChatMessage[]): ChatMessage[][] {
  const turns: ChatMessage[][] = [];
  for (const message of history) {
    const last = turns.at(-1);
    if (last === undefined || (message.role === 'user' && message.hintId === undefined)) {
      turns.push([message]);
    } else {
      last.push(message);
    }
  }
  return turns;
}

/** The first `chars` UTF-16 units of `text`, one fewer if the cut would split a surrogate pair. */
function sliceWhole(text: string, chars: number): string {
  const code = text.charCodeAt(chars - 1);
  return code >= 0xd800 && code <= 0xdbff ? text.slice(0, chars - 1) : text.slice(0, chars);
}

/** A tool result cut to `maxTokens`, with the marker; the message itself when it fits. */
function truncateToolResult(
  message: ToolMessage,
  maxTokens: number,
  count: (text: string) => number,
): ToolMessage {
  const total = count(message.content);
  if (total <= maxTokens) return message;
  const marker = (kept: number) => `\n[… truncated by runplane: ${kept} of ${total} tokens kept]`;
  // The marker is part of the result: the head gets what it leaves of `maxTokens`.
  const room = Math.max(0, maxTokens - count(marker(total)));
  let chars = Math.floor((message.content.length * room) / total);
  let head = sliceWhole(message.content, chars);
  while (chars > 0 && count(head) > room) {
    chars = Math.floor(chars * 0.9);
    head = sliceWhole(message.content, chars);
  }
  return {
    ...message,
    content: `${head}${marker(count(head))}`,
  };
}

/**
 * One system message that stands for `turns`: per turn, the user's message and the final
 * reply, shortened; the newest turns are kept first when `maxTokens` is short.
 */
function summarize(
  turns: readonly ChatMessage[][],
  maxTokens: number,
  count: (text: string) => number,
): ChatMessage | undefined {
  const excerpt = (text: string) =>
    text.length <= summaryExcerptChars
      ? text
      : `${sliceWhole(text, summaryExcerptChars).trimEnd()}…`;
  const header = `Summary of the ${turns.length} earliest turn(s) of this conversation, left out to fit the model's context:`;
  const lines: string[] = [];
  let used = messageOverheadTokens + count(header);
  for (let i = turns.length - 1; i >= 0; i--) {
    const turn = turns[i] ?? [];
    const asked = turn.find((m) => m.role === 'user');
    const answered = turn.findLast((m) => m.role === 'assistant' && m.content !== '');
    const line = [
      asked === undefined ? undefined : `- user: ${excerpt(asked.content)}`,
      answered === undefined ? undefined : `  assistant: ${excerpt(answered.content)}`,
    ]
      .filter((part) => part !== undefined)
      .join('\n');
    if (line === '') continue;
    const cost = count(line) + 1;
    if (used + cost > maxTokens) break;
    used += cost;
    lines.unshift(line);
  }
  if (lines.length === 0) return undefined;
  return { role: 'system', content: [header, ...lines].join('\n') };
}
