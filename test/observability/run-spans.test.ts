/**
 * Run spans through `@opentelemetry/api` (README "Observability"): the span tree of a run that
 * spawns a nested run and is cancelled at a safe point with escalation, on a simulated clock.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  CancelMode,
  createReActAgent,
  createRuntime,
  createScriptedModel,
  defineTool,
  type Agent,
  type RunplaneEvent,
} from '../../src/index.js';
import { createOtelRunMetrics } from '../../src/observability/run-metrics.js';
import { createTestClock } from '../../src/testing/index.js';
import { createSpanRecorder } from './span-recorder.js';

// An epoch time: a span time below the process's age would be read as a performance.now() time.
const epoch = Date.UTC(2026, 11, 1);

describe('run spans', () => {
  it('a nested run is a child of its parent run; a safe-point cancel that escalates is on the span', async () => {
    const recorder = createSpanRecorder();
    const clock = createTestClock(epoch);
    const runtime = createRuntime({ clock, tracer: recorder.tracer, reportError: () => {} });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    // Ignores nothing: it ends when its signal fires.
    const waiting: Agent<null, string> = {
      execute: (_input, ctx) =>
        new Promise((_resolve, reject) =>
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error), {
            once: true,
          }),
        ),
    };
    const parent = runtime.prepare({
      ownerId: 'u1',
      sessionId: 's1',
      input: null,
      agent: {
        async execute(_input, ctx) {
          const nested = ctx.spawn(waiting, null);
          await released;
          // Not the safe point the cancel waits for: the deadline escalates it.
          ctx.safePoint('afterChatModel');
          return nested.result();
        },
      } satisfies Agent<null, string>,
    });
    parent.start();
    await clock.flush();
    const cancel = parent.cancel({
      mode: CancelMode.AfterToolCalls,
      timeoutMs: 500,
      reason: 'enough',
    });
    release();
    await clock.flush();
    expect(parent.status).toBe('RUNNING');
    await clock.advance(500);
    expect(await cancel.outcome).toBe('escalated');
    await parent.termination;
    await clock.flush();

    const trees = recorder.trees();
    expect(trees).toHaveLength(1);
    const [run] = trees;
    expect(run).toMatchObject({
      name: 'runplane.run',
      attributes: {
        'runplane.run.id': parent.id,
        'runplane.session.id': 's1',
        'runplane.run.status': 'CANCELLED',
        'runplane.run.cancel_cause': 'cancel',
        'runplane.run.escalated': true,
        'runplane.run.queue_wait_ms': 0,
      },
      events: ['runplane.cancel_requested', 'runplane.safe_point'],
    });
    expect(run?.children).toHaveLength(1);
    expect(run?.children[0]).toMatchObject({
      name: 'runplane.run',
      attributes: {
        'runplane.run.parent_id': parent.id,
        'runplane.run.status': 'CANCELLED',
        'runplane.run.cancel_cause': 'cancel',
        'runplane.run.escalated': false,
      },
      children: [],
    });
    // Times come from the runtime's clock: the run span lasts from prepare to settled.
    const parentSpan = recorder
      .spans()
      .find((span) => span.attributes['runplane.run.id'] === parent.id);
    expect(parentSpan?.duration).toEqual([0, 500_000_000]);
    // The mode by its README name; a reason only when one was given.
    expect(parentSpan?.events[0]?.attributes).toEqual({
      'runplane.cancel.mode': 'after_tool_calls',
      'runplane.cancel.cause': 'cancel',
      'runplane.cancel.reason': 'enough',
      'runplane.cancel.recursive': false,
    });
  });

  it('model calls, tool calls and approvals are child spans; usage is on the span, in run.completed and a metric', async () => {
    const recorder = createSpanRecorder();
    const clock = createTestClock(epoch);
    const tokens: Array<[number, number]> = [];
    const runtime = createRuntime({
      clock,
      tracer: recorder.tracer,
      metrics: {
        ...createOtelRunMetrics(),
        modelTokens: (input, output) => tokens.push([input, output]),
      },
      reportError: () => {},
    });
    const book = defineTool({
      name: 'book_flight',
      description: 'Books a flight',
      parameters: z.object({ to: z.string() }),
      needsApproval: true,
      execute: ({ to }) => `booked to ${to}`,
    });
    const model = createScriptedModel(
      [
        {
          text: 'Booking.',
          toolCalls: [{ id: 'tu-book', name: 'book_flight', args: { to: 'Lyon' } }],
          usage: { promptTokens: 120, completionTokens: 8, totalTokens: 128 },
        },
        { text: 'Booked.', usage: { promptTokens: 150, completionTokens: 3, totalTokens: 153 } },
      ],
      { clock },
    );
    const agent = createReActAgent({ model, tools: [book] });
    const events: RunplaneEvent[] = [];
    runtime.onEvent((event) => {
      events.push(event);
      if (event.type === 'agent.approval_requested') {
        runtime.approve('u1', 's1', 'tu-book', { allow: true });
      }
    });
    const run = runtime.prepare({ ownerId: 'u1', sessionId: 's1', agent, input: 'Book Lyon' });
    run.start();
    await run.result();
    await clock.flush();

    const usage = { input_tokens: 270, output_tokens: 11 };
    expect(events.find((event) => event.type === 'run.completed')?.payload).toEqual({
      reason: 'completed',
      usage,
    });
    expect(tokens).toEqual([
      [120, 8],
      [150, 3],
    ]);
    const [tree] = recorder.trees();
    expect(tree?.attributes).toMatchObject({
      'runplane.run.status': 'COMPLETED',
      'gen_ai.usage.input_tokens': 270,
      'gen_ai.usage.output_tokens': 11,
    });
    expect(
      tree?.children.map((child) => [
        child.name,
        child.attributes['gen_ai.usage.input_tokens'] ??
          child.attributes['runplane.approval.outcome'] ??
          child.attributes['runplane.tool.status'],
      ]),
    ).toEqual([
      ['chat', 120],
      ['execute_tool book_flight', 'ok'],
      ['chat', 150],
    ]);
    expect(tree?.children[0]?.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'runplane.scripted',
      'gen_ai.request.model': 'scripted',
    });
    expect(tree?.children[1]?.children).toMatchObject([
      {
        name: 'runplane.approval book_flight',
        attributes: { 'runplane.approval.outcome': 'allowed' },
      },
    ]);
  });
  it('a tool name the model made up stays out of the span name unless it is a plain, short one', async () => {
    const recorder = createSpanRecorder();
    const clock = createTestClock(epoch);
    const runtime = createRuntime({ clock, tracer: recorder.tracer, reportError: () => {} });
    const huge = 'x'.repeat(5_000);
    const model = createScriptedModel(
      [
        {
          text: 'Calling.',
          toolCalls: [
            { id: 'tu-1', name: huge, args: {} },
            { id: 'tu-2', name: 'two\nlines', args: {} },
            { id: 'tu-3', name: 'lookup_v2', args: {} },
          ],
        },
        { text: 'Done.' },
      ],
      { clock },
    );
    const run = runtime.prepare({
      ownerId: 'u1',
      sessionId: 's1',
      agent: createReActAgent({ model }),
      input: 'go',
    });
    run.start();
    await run.result();
    await clock.flush();

    const tools = recorder.trees()[0]?.children.filter((child) => child.name !== 'chat');
    expect(tools?.map((child) => child.name)).toEqual([
      'execute_tool',
      'execute_tool',
      'execute_tool lookup_v2',
    ]);
    expect(tools?.map((child) => child.attributes['gen_ai.tool.name'])).toEqual([
      huge.slice(0, 256),
      'two\nlines',
      'lookup_v2',
    ]);
  });

  it('a tool call and its approval still open when the run is cancelled end as cancelled', async () => {
    const recorder = createSpanRecorder();
    const clock = createTestClock(epoch);
    const runtime = createRuntime({ clock, tracer: recorder.tracer, reportError: () => {} });
    const book = defineTool({
      name: 'book_flight',
      description: 'Books a flight',
      parameters: z.object({}),
      needsApproval: true,
      execute: () => 'booked',
    });
    const model = createScriptedModel(
      [{ text: 'Booking.', toolCalls: [{ id: 'tu-1', name: 'book_flight', args: {} }] }],
      { clock },
    );
    let asked!: () => void;
    const approvalAsked = new Promise<void>((resolve) => (asked = resolve));
    runtime.onEvent((event) => {
      if (event.type === 'agent.approval_requested') asked();
    });
    const run = runtime.prepare({
      ownerId: 'u1',
      sessionId: 's1',
      agent: createReActAgent({ model, tools: [book] }),
      input: 'Book',
    });
    run.start();
    await approvalAsked;
    await run.cancel().outcome;
    await run.termination;
    await clock.flush();
    expect(
      recorder
        .spans()
        .find((span) => span.name === 'runplane.run')
        ?.events.find((event) => event.name === 'runplane.cancel_requested')?.attributes,
    ).toEqual({
      'runplane.cancel.mode': 'immediate',
      'runplane.cancel.cause': 'cancel',
      'runplane.cancel.recursive': true,
    });

    const tool = recorder.trees()[0]?.children.find((child) => child.name !== 'chat');
    expect(tool).toMatchObject({
      name: 'execute_tool book_flight',
      attributes: { 'runplane.tool.status': 'cancelled' },
      children: [
        {
          name: 'runplane.approval book_flight',
          attributes: { 'runplane.approval.outcome': 'cancelled' },
        },
      ],
    });
  });
});
