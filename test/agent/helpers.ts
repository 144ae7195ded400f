import { SimulatedClock } from 'xstate';
import { expect } from 'vitest';
import { z } from 'zod';
import type { ChatMessage } from '../../src/agent/messages.js';
import { createReActAgent, type ReActAgentOptions } from '../../src/agent/react-agent.js';
import { defineTool } from '../../src/agent/tool.js';
import type { RunplaneEvent } from '../../src/events/event-log.js';
import {
  createRuntime,
  type Runtime,
  type RuntimeOptions,
} from '../../src/runtime/create-runtime.js';

export const owner = 'owner-1';
export const session = 'session-1';

/** Lets pending promise chains run (no wall-clock time decides anything). */
export async function flush(rounds = 10): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** A runtime on a simulated clock that collects reported errors. */
export function setup(options: Omit<RuntimeOptions, 'clock'> = {}) {
  const clock = new SimulatedClock();
  const errors: unknown[] = [];
  const runtime = createRuntime({
    clock,
    unwindTimeoutMs: 1_000,
    reportError: (error) => errors.push(error),
    ...options,
  });
  return { clock, runtime, errors };
}

/** Every logged event of a session. */
export function eventsOf(
  runtime: Runtime,
  sessionId = session,
  ownerId = owner,
): Promise<RunplaneEvent[]> {
  return runtime.eventLog.read({}, { ownerId, sessionId });
}

/** Resolves with the first event of `type` logged from now on. */
export function nextEvent(runtime: Runtime, type: string): Promise<RunplaneEvent> {
  return new Promise((resolve) => {
    const off = runtime.onEvent((event) => {
      if (event.type === type) {
        off();
        resolve(event);
      }
    });
  });
}

export { deferred } from '../helpers.js';

/**
 * Prepares and starts a ReAct run in the tests' session (`owner`, `session`).
 *
 * @returns the started run
 */
export function startReActRun(runtime: Runtime, options: ReActAgentOptions, input: string) {
  const run = runtime.prepare({
    ownerId: owner,
    sessionId: session,
    agent: createReActAgent(options),
    input,
  });
  run.start();
  return run;
}

/** Asserts the history never holds half a tool call: every call has exactly one result, right after. */
export function expectNoHalfToolCalls(history: readonly ChatMessage[]): void {
  for (let i = 0; i < history.length; i++) {
    const message = history[i];
    if (message?.role !== 'assistant' || message.toolCalls === undefined) continue;
    const results = history.slice(i + 1, i + 1 + message.toolCalls.length);
    expect(results.map((m) => (m.role === 'tool' ? m.toolCallId : m.role))).toEqual(
      message.toolCalls.map((call) => call.id),
    );
  }
  const callIds = history.flatMap((m) =>
    m.role === 'assistant' ? (m.toolCalls ?? []).map((c) => c.id) : [],
  );
  const resultIds = history.flatMap((m) => (m.role === 'tool' ? [m.toolCallId] : []));
  expect(resultIds).toEqual(callIds);
}

/** Role-and-content summary of messages, for compact assertions. */
export function summarize(messages: readonly ChatMessage[]): string[] {
  return messages.map((m) => {
    switch (m.role) {
      case 'assistant':
        return `assistant${m.stop ? `(${m.stop})` : ''}: ${m.content}${
          m.toolCalls ? ` [${m.toolCalls.map((c) => c.name).join(', ')}]` : ''
        }`;
      case 'tool':
        return `tool${m.isError ? '(error)' : ''} ${m.name}: ${m.content}`;
      case 'user':
        return `${m.hintId === undefined ? 'user' : 'hint'}: ${m.content}`;
      case 'system':
        return `system: ${m.content}`;
    }
  });
}

/** A `weather` tool (`{ city }` → `sunny in <city>`) that records the cities it ran for in `ran`. */
export function countedWeather() {
  const ran: string[] = [];
  const tool = defineTool({
    name: 'weather',
    description: 'Weather of a city',
    parameters: z.object({ city: z.string() }),
    execute: ({ city }) => {
      ran.push(city);
      return `sunny in ${city}`;
    },
  });
  return { ran, tool };
}
