/**
 * The ReAct agent's bounded context: a long conversation on a SQLite history stays under the
 * request budget, measured by a scripted model that counts what it receives; older turns are
 * folded into a summary (or dropped); long tool results are cut with a marker, while the stored
 * history keeps everything.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  ContextOverBudgetError,
  estimateTokens,
  fitRequest,
  type HistoryPolicy,
} from '../../src/agent/history-policy.js';
import type { ChatMessage } from '../../src/agent/messages.js';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { createScriptedModel, type ScriptEntry } from '../../src/agent/scripted-model.js';
import { defineTool } from '../../src/agent/tool.js';
import {
  createSqliteSessionStore,
  type SqliteSessionStore,
} from '../../src/stores/sqlite/session-store.js';
import { eventsOf, owner, session, setup } from './helpers.js';

let dir: string | undefined;
let store: SqliteSessionStore | undefined;
afterEach(() => {
  store?.close();
  store = undefined;
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** A runtime whose session histories are in a SQLite file. */
function sqliteSetup() {
  dir = mkdtempSync(join(tmpdir(), 'runplane-context-'));
  store = createSqliteSessionStore({ path: join(dir, 'history.db') });
  return setup({ stores: { sessionStore: store } });
}

/** The tokens of a request as the default policy counts them (4 a message plus the text). */
const tokensOf = (messages: readonly ChatMessage[]) =>
  messages.reduce(
    (sum, m) =>
      sum +
      4 +
      estimateTokens(m.content) +
      (m.role === 'assistant'
        ? (m.toolCalls ?? []).reduce((n, c) => n + estimateTokens(c.name + c.arguments), 0)
        : 0),
    0,
  );

/** A scripted model of `replies` answers that records the tokens and messages of each request. */
function countingModel(replies: number) {
  const seen: Array<{ tokens: number; messages: ChatMessage[] }> = [];
  const entries: ScriptEntry[] = Array.from({ length: replies }, (_, i) => (request) => {
    seen.push({ tokens: tokensOf(request.messages), messages: request.messages });
    return { text: `reply ${i}: ${'words of an answer '.repeat(10)}` };
  });
  return { model: createScriptedModel(entries), seen };
}

async function converse(
  runtime: ReturnType<typeof setup>['runtime'],
  agent: ReturnType<typeof createReActAgent>,
  turns: number,
) {
  for (let i = 0; i < turns; i++) {
    const run = runtime.prepare({
      ownerId: owner,
      sessionId: session,
      agent,
      input: `question ${i}: ${'tell me more about this '.repeat(8)}`,
    });
    run.start();
    expect((await run.result()).reason).toBe('completed');
  }
}

describe('a long conversation', () => {
  it('stays under the request budget: the oldest turns are folded into one summary message', async () => {
    const { runtime } = sqliteSetup();
    const { model, seen } = countingModel(30);
    const policy: HistoryPolicy = { maxRequestTokens: 1_200 };
    const agent = createReActAgent({ model, instructions: 'Be brief.', historyPolicy: policy });
    await converse(runtime, agent, 30);

    expect(seen).toHaveLength(30);
    for (const request of seen) expect(request.tokens).toBeLessThanOrEqual(1_200);
    // Without the policy the last request would have held the whole conversation.
    const history = await store?.load({}, { ownerId: owner, sessionId: session });
    expect(history).toHaveLength(60);
    expect(tokensOf(history ?? [])).toBeGreaterThan(3_000);
    const last = seen.at(-1)?.messages ?? [];
    expect(last[0]).toEqual({ role: 'system', content: 'Be brief.' });
    expect(last[1]?.role).toBe('system');
    expect(last[1]?.content).toMatch(/^Summary of the \d+ earliest turn\(s\) of this conversation/);
    expect(last[1]?.content).toContain('- user: question ');
    expect(last.at(-1)).toEqual({
      role: 'user',
      content: expect.stringMatching(/^question 29:/) as string,
    });
    // The newest earlier turn is kept whole, right before the current one.
    expect(last.at(-3)?.content).toMatch(/^question 28:/);
    expect(last.at(-2)?.content).toMatch(/^reply 28:/);
    const trimmed = (await eventsOf(runtime)).filter((e) => e.type === 'agent.context_trimmed');
    expect(trimmed.length).toBeGreaterThan(0);
    expect(trimmed.at(-1)?.payload).toMatchObject({ step: 1, truncated_results: 0 });
    expect(trimmed.at(-1)?.payload.estimated_tokens).toBe(seen.at(-1)?.tokens);
  });

  it("with overflow 'drop', leaves the oldest turns out without a summary", async () => {
    const { runtime } = sqliteSetup();
    const { model, seen } = countingModel(12);
    const agent = createReActAgent({
      model,
      historyPolicy: { maxRequestTokens: 400, overflow: 'drop' },
    });
    await converse(runtime, agent, 12);
    for (const request of seen) {
      expect(request.tokens).toBeLessThanOrEqual(400);
      expect(request.messages.some((m) => m.role === 'system')).toBe(false);
      // Whole turns only: the request starts with a question.
      expect(request.messages[0]?.content).toMatch(/^question /);
    }
    expect(seen.at(-1)?.messages.length).toBeLessThan(23);
  });
});

describe('long tool results', () => {
  it('are cut with a marker in the request; the stored history keeps them whole', async () => {
    const { runtime } = sqliteSetup();
    const dump = defineTool({
      name: 'dump',
      description: 'Returns a lot of text',
      parameters: z.object({}),
      execute: () => 'line of output\n'.repeat(2_000),
    });
    const requests: ChatMessage[][] = [];
    const model = createScriptedModel([
      { toolCalls: [{ id: 'call_1', name: 'dump', args: {} }] },
      (request) => {
        requests.push(request.messages);
        return { text: 'done' };
      },
    ]);
    const agent = createReActAgent({
      model,
      tools: [dump],
      historyPolicy: { maxToolResultTokens: 100 },
    });
    const run = runtime.prepare({ ownerId: owner, sessionId: session, agent, input: 'dump it' });
    run.start();
    expect((await run.result()).reply).toBe('done');
    const sent = requests[0]?.find((m) => m.role === 'tool');
    expect(estimateTokens(sent?.content ?? '')).toBeLessThanOrEqual(100);
    expect(sent?.content).toMatch(/\n\[… truncated by runplane: \d+ of 10000 tokens kept\]$/);
    const stored = (await store?.load({}, { ownerId: owner, sessionId: session }))?.find(
      (m) => m.role === 'tool',
    );
    expect(stored?.content).toBe('line of output\n'.repeat(2_000));
    const trimmed = (await eventsOf(runtime)).find((e) => e.type === 'agent.context_trimmed');
    expect(trimmed?.payload).toMatchObject({ step: 2, omitted_turns: 0, truncated_results: 1 });
  });
});

/**
 * Texts of every kind with their token counts by OpenAI's tokenizers, the larger of
 * `o200k_base` and `cl100k_base` (counted with js-tiktoken 1.x, 2026-12-02).
 */
const tokenized: ReadonlyArray<readonly [string, string, number]> = [
  [
    'english',
    'The quick brown fox jumps over the lazy dog. A user clicks stop and only that run stops; a second message queues behind the first in the same session.',
    32,
  ],
  [
    'json',
    '[{"id":7,"iso":"2026-12-02T03:36:54.000Z","name":"item 7","ok":true,"score":21.99},{"id":8,"iso":"2026-12-02T03:40:00.000Z","name":"item 8","ok":false,"score":25.13}]',
    78,
  ],
  [
    'uuids',
    '550e8400-e29b-41d4-a716-446655440000\n6ba7b810-9dad-11d1-80b4-00c04fd430c8\nf47ac10b-58cc-4372-a567-0e02b2c3d479',
    67,
  ],
  ['hex', '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08', 43],
  ['digits', '3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3 2 3 8 4 6 2 6 4 3 3 8 3 2 7 9 5', 63],
  ['numbers', '31415, 92653, 58979, 32384, 62643, 38327, 95028, 84197, 16939, 93751', 38],
  [
    'chinese',
    '运行控制运行时为智能体应用提供对执行的精确控制：用户点击停止，只有那个运行会停止。',
    43,
  ],
  [
    'code',
    'export function fitRequest(parts, policy = {}) {\n  const count = policy.countTokens ?? estimateTokens;\n  return { messages, tokens: sum(messages) };\n}',
    33,
  ],
  ['emoji', '😀🎉👍 great job! 🚀✨ ship it', 18],
  [
    'german',
    'Die Laufzeitsteuerung gibt Agentenanwendungen präzise Kontrolle über Ausführungen.',
    24,
  ],
];

describe('estimateTokens and fitRequest', () => {
  it('is within 10 % under and 80 % over what real tokenizers count, on every kind of text', () => {
    for (const [kind, text, real] of tokenized) {
      const estimate = estimateTokens(text);
      expect(real / estimate, kind).toBeLessThanOrEqual(1.1);
      expect(estimate / real, kind).toBeLessThanOrEqual(1.8);
    }
    expect(estimateTokens('')).toBe(0);
  });

  it('takes an exact counter when given one, and keeps the current turn whole when it fits', () => {
    const question = 'x'.repeat(80);
    const fitted = fitRequest(
      {
        instructions: [],
        past: [
          { role: 'user', content: 'old' },
          { role: 'assistant', id: 'a1', content: 'old reply' },
        ],
        current: [{ role: 'user', content: question }],
      },
      { maxRequestTokens: 90, overflow: 'drop', countTokens: (text) => text.length },
    );
    expect(fitted.messages).toEqual([{ role: 'user', content: question }]);
    expect(fitted.omittedTurns).toBe(1);
    expect(fitted.tokens).toBe(84);
  });

  it("leaves out the current turn's oldest tool results, keeping their calls, until it fits", () => {
    const call = (id: string) => ({
      role: 'assistant' as const,
      id: `a_${id}`,
      content: '',
      toolCalls: [{ id, name: 'read', arguments: '{}' }],
    });
    const result = (id: string): ChatMessage => ({
      role: 'tool',
      toolCallId: id,
      name: 'read',
      content: 'r'.repeat(300),
      isError: false,
    });
    const current: ChatMessage[] = [
      { role: 'user', content: 'read three pages' },
      call('t1'),
      result('t1'),
      call('t2'),
      result('t2'),
      call('t3'),
      result('t3'),
    ];
    const policy = { maxRequestTokens: 800, countTokens: (text: string) => text.length };
    const fitted = fitRequest({ instructions: [], past: [], current }, policy);
    const tools = fitted.messages.filter((m) => m.role === 'tool');
    expect(tools.map((m) => m.content.length)).toEqual([expect.any(Number) as number, 300, 300]);
    expect(tools[0]?.content).toBe(
      '[… tool result left out by runplane to fit the context: 300 tokens]',
    );
    expect(fitted.messages.filter((m) => m.role === 'assistant')).toHaveLength(3);
    expect(fitted.truncatedResults).toBe(1);
    expect(fitted.tokens).toBe(729);
    // The request is never over its budget, whatever the budget.
    for (let budget = 200; budget <= 1_000; budget += 50) {
      const attempt = () =>
        fitRequest(
          { instructions: [], past: [], current },
          { ...policy, maxRequestTokens: budget },
        );
      let tokens: number;
      try {
        tokens = attempt().tokens;
      } catch (error) {
        expect(error).toBeInstanceOf(ContextOverBudgetError);
        continue;
      }
      expect(tokens).toBeLessThanOrEqual(budget);
    }
  });

  it('fails with CONTEXT_OVER_BUDGET, without calling the model, when the message alone is over', async () => {
    const { runtime } = sqliteSetup();
    let calls = 0;
    const model = createScriptedModel([
      () => {
        calls++;
        return { text: 'never' };
      },
    ]);
    const agent = createReActAgent({ model, historyPolicy: { maxRequestTokens: 50 } });
    const run = runtime.prepare({
      ownerId: owner,
      sessionId: session,
      agent,
      input: 'a question far too long for the budget '.repeat(20),
    });
    run.start();
    const outcome = await run.result().catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(ContextOverBudgetError);
    expect(outcome).toMatchObject({ code: 'CONTEXT_OVER_BUDGET', budget: 50 });
    expect(calls).toBe(0);
    const failed = (await eventsOf(runtime)).find((e) => e.type === 'run.failed');
    expect(failed?.payload).toMatchObject({ code: 'CONTEXT_OVER_BUDGET' });
  });

  it('never cuts a tool result inside a surrogate pair (no lone half of an emoji)', () => {
    const result: ChatMessage = {
      role: 'tool',
      toolCallId: 't1',
      name: 'emoji',
      content: '😀'.repeat(5_000),
      isError: false,
    };
    const fitted = fitRequest(
      { instructions: [], past: [], current: [result] },
      // 57 = the marker's 54 characters + 3 for the head, which ends inside the second emoji.
      { maxToolResultTokens: 57, countTokens: (text) => text.length },
    );
    const content = (fitted.messages[0] as { content: string }).content;
    expect(content).toBe('😀\n[… truncated by runplane: 2 of 10000 tokens kept]');
    expect(content.length).toBeLessThanOrEqual(57); // the marker counts against the limit
    expect(content).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/); // no lone high surrogate
  });

  it('refuses a bad policy with INVALID_ARGUMENT', () => {
    const model = createScriptedModel([]);
    expect(() => createReActAgent({ model, historyPolicy: { maxRequestTokens: 0 } })).toThrow(
      /maxRequestTokens/,
    );
    expect(() =>
      createReActAgent({ model, historyPolicy: { overflow: 'fold' } as unknown as HistoryPolicy }),
    ).toThrow(/overflow/);
  });
});
