import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createReActAgent } from '../../src/agent/react-agent.js';
import { createScriptedModel } from '../../src/agent/scripted-model.js';
import { defineTool } from '../../src/agent/tool.js';
import {
  eventsOf,
  flush,
  nextEvent,
  owner,
  session,
  setup,
  summarize,
  startReActRun,
} from './helpers.js';

function bookingSetup() {
  const env = setup();
  const booked: string[] = [];
  const book = defineTool({
    name: 'book_flight',
    description: 'Books a flight',
    parameters: z.object({ to: z.string() }),
    needsApproval: true,
    execute: ({ to }) => {
      booked.push(to);
      return `booked to ${to}`;
    },
  });
  const model = createScriptedModel(
    [
      {
        text: 'Booking.',
        toolCalls: [{ id: 'tu-book', name: 'book_flight', args: { to: 'Lyon' } }],
      },
      { text: 'OK, I will not book it.' },
    ],
    { clock: env.clock },
  );
  const agent = createReActAgent({ model, tools: [book] });
  return { ...env, booked, model, agent };
}

describe('tool approvals', () => {
  it('a denial gives the model a tool result with the message and the run continues', async () => {
    const { runtime, booked, model, agent } = bookingSetup();
    const requested = nextEvent(runtime, 'agent.approval_requested');
    const run = runtime.prepare({ ownerId: owner, sessionId: session, agent, input: 'Book Lyon' });
    run.start();
    const event = await requested;
    expect(event.payload).toMatchObject({
      tool_use_id: 'tu-book',
      name: 'book_flight',
      args: { to: 'Lyon' },
    });
    expect(runtime.pendingApprovals(owner, session)).toMatchObject([
      { toolUseId: 'tu-book', name: 'book_flight', runId: run.id },
    ]);
    // Another owner cannot answer it, nor can the right owner in another session.
    expect(runtime.approve('intruder', session, 'tu-book', { allow: true })).toBe('not_found');
    expect(runtime.approve(owner, 'other-session', 'tu-book', { allow: true })).toBe('not_found');
    expect(run.status).toBe('RUNNING');

    expect(
      runtime.approve(owner, session, 'tu-book', {
        allow: false,
        message: 'use the train instead',
      }),
    ).toBe('accepted');
    expect(runtime.approve(owner, session, 'tu-book', { allow: true })).toBe('not_found'); // answered
    const result = await run.result();
    expect(result).toMatchObject({ reason: 'completed', reply: 'OK, I will not book it.' });
    expect(booked).toEqual([]);
    const toolMessage = model.requests[1]?.messages.find((m) => m.role === 'tool');
    expect(toolMessage).toMatchObject({
      toolCallId: 'tu-book',
      isError: true,
      content: 'Error: the user denied this tool call: use the train instead',
    });
    const events = await eventsOf(runtime);
    expect(events.find((e) => e.type === 'agent.approval_resolved')?.payload).toMatchObject({
      tool_use_id: 'tu-book',
      outcome: 'denied',
    });
    expect(events.find((e) => e.type === 'agent.tool_result')?.payload).toMatchObject({
      tool_use_id: 'tu-book',
      status: 'denied',
    });
  });

  it('an approval lets the tool run', async () => {
    const { runtime, booked, agent } = bookingSetup();
    const requested = nextEvent(runtime, 'agent.approval_requested');
    const run = runtime.prepare({ ownerId: owner, sessionId: session, agent, input: 'Book Lyon' });
    run.start();
    await requested;
    expect(booked).toEqual([]);
    expect(runtime.approve(owner, session, 'tu-book', { allow: true })).toBe('accepted');
    await run.result();
    expect(booked).toEqual(['Lyon']);
  });

  it('cancelling the run releases a waiting approval', async () => {
    const { runtime, booked, agent } = bookingSetup();
    const requested = nextEvent(runtime, 'agent.approval_requested');
    const run = runtime.prepare({ ownerId: owner, sessionId: session, agent, input: 'Book Lyon' });
    run.start();
    await requested;
    run.cancel();
    const outcome = await run.termination;
    expect(outcome).toMatchObject({ status: 'CANCELLED', unsettled: false });
    expect(runtime.pendingApprovals(owner, session)).toEqual([]);
    expect(runtime.approve(owner, session, 'tu-book', { allow: true })).toBe('not_found');
    expect(booked).toEqual([]);
    expect(
      summarize(await runtime.sessionStore.load({}, { ownerId: owner, sessionId: session })),
    ).toEqual([
      'user: Book Lyon',
      'assistant: Booking. [book_flight]',
      'tool(error) book_flight: Error: the run was cancelled before this tool call finished.',
    ]);
  });

  it('an interrupt withdraws a waiting approval: the call is "interrupted before it ran"', async () => {
    const { runtime, booked, model, agent } = bookingSetup();
    const requested = nextEvent(runtime, 'agent.approval_requested');
    const run = runtime.prepare({ ownerId: owner, sessionId: session, agent, input: 'Book Lyon' });
    run.start();
    await requested;
    run.interrupt();
    const result = await run.result();
    expect(result.reason).toBe('interrupted');
    expect(booked).toEqual([]);
    expect(model.requests).toHaveLength(1);
    expect(runtime.pendingApprovals(owner, session)).toEqual([]);
    expect(summarize(result.messages)[2]).toBe(
      'tool(error) book_flight: Error: the run was interrupted before this tool call ran.',
    );
    const resolved = (await eventsOf(runtime)).find((e) => e.type === 'agent.approval_resolved');
    expect(resolved?.payload).toMatchObject({ tool_use_id: 'tu-book', outcome: 'withdrawn' });
  });

  it('needsApproval can depend on the arguments', async () => {
    const { clock, runtime } = setup();
    const paid: number[] = [];
    const pay = defineTool({
      name: 'pay',
      description: 'Pays',
      parameters: z.object({ amount: z.number() }),
      needsApproval: ({ amount }) => amount > 100,
      execute: ({ amount }) => paid.push(amount),
    });
    const model = createScriptedModel(
      [
        {
          toolCalls: [
            { id: 'small', name: 'pay', args: { amount: 5 } },
            { id: 'big', name: 'pay', args: { amount: 500 } },
          ],
        },
        { text: 'done' },
      ],
      { clock },
    );
    const requested = nextEvent(runtime, 'agent.approval_requested');
    const run = startReActRun(runtime, { model, tools: [pay] }, 'pay');
    expect((await requested).payload.tool_use_id).toBe('big');
    await flush();
    expect(paid).toEqual([5]); // the small one did not wait
    runtime.approve(owner, session, 'big', { allow: true });
    await run.result();
    expect(paid).toEqual([5, 500]);
  });

  it('rejects a malformed answer with INVALID_ARGUMENT', () => {
    const { runtime } = setup();
    expect(() => runtime.approve(owner, session, '', { allow: true })).toThrow(
      /INVALID_ARGUMENT: expected `toolUseId`/,
    );
    expect(() => runtime.approve(owner, session, 'x', { allow: 'yes' } as never)).toThrow(
      /expected `decision.allow` to be a boolean, got "yes"/,
    );
  });
});
