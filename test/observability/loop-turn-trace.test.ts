/**
 * A loop session's turns over a real socket, with the in-memory span exporter (README
 * "Observability"): each turn's span is a child of the request that pushed its first item,
 * linked to the other items' requests, and a root span when that first request carried no
 * `traceparent`. The loop is created by the first request, whose context no later turn may
 * inherit.
 */
import { describe, expect, it } from 'vitest';
import type { Agent } from '../../src/run/agent.js';
import { useObservedServers } from './observed-servers.js';

const TOKEN = 'loop-trace-token';
const { recorder, start } = useObservedServers();

/** An agent whose n-th call the test finishes (no time involved). */
function createGatedAgent() {
  const finishers: Array<() => void> = [];
  const waiters: Array<() => void> = [];
  const agent: Agent<string, { reply: string }> = {
    execute: (input) =>
      new Promise((resolve) => {
        finishers.push(() => resolve({ reply: `answered ${input}` }));
        for (const wake of waiters.splice(0)) wake();
      }),
  };
  const called = async (n: number) => {
    while (finishers.length <= n) await new Promise<void>((wake) => waiters.push(wake));
    return finishers[n] as () => void;
  };
  return { agent, called };
}

const traceparent = (traceId: string, spanId: string) => `00-${traceId}-${spanId}-01`;
const T1 = { traceId: '11111111111111111111111111111111', spanId: '1111111111111111' };
const T3 = { traceId: '33333333333333333333333333333333', spanId: '3333333333333333' };
const T4 = { traceId: '44444444444444444444444444444444', spanId: '4444444444444444' };

describe('loop session turn spans', () => {
  it("a turn's parent is the request of its first item, never the loop's first request", async () => {
    const gated = createGatedAgent();
    const s = await start({ tokens: `${TOKEN}:alice`, log: () => undefined, agent: gated.agent });
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const created = await fetch(`${s.url}/api/sessions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ mode: 'loop' }),
    });
    const { session_id: id } = (await created.json()) as { session_id: string };
    const say = async (text: string, parent?: { traceId: string; spanId: string }) => {
      const answer = await fetch(`${s.url}/api/sessions/${id}/events`, {
        method: 'POST',
        headers: {
          ...headers,
          ...(parent === undefined
            ? {}
            : { traceparent: traceparent(parent.traceId, parent.spanId) }),
        },
        body: JSON.stringify({ events: [{ type: 'user.message', payload: { text } }] }),
      });
      expect(answer.status).toBe(200);
    };

    await say('first', T1); // creates the loop, in T1's context
    const finish1 = await gated.called(0);
    await say('second'); // no traceparent
    await say('third', T3);
    finish1();
    const finish2 = await gated.called(1); // turn 2 takes second and third
    finish2();
    await say('fourth', T4);
    (await gated.called(2))();
    await s.shutdown({ graceMs: 0 });

    const turns = recorder
      .spans()
      .filter((span) => span.name === 'runplane.turn')
      .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
    expect(turns).toHaveLength(3);
    const [turn1, turn2, turn3] = turns;
    expect(turn1?.spanContext().traceId).toBe(T1.traceId);
    expect(turn1?.parentSpanContext?.spanId).toBe(T1.spanId);
    // Its first item came with no traceparent: a root span of a trace of its own, linked to
    // the request of its other item.
    expect(turn2?.parentSpanContext).toBeUndefined();
    expect([T1.traceId, T3.traceId, T4.traceId]).not.toContain(turn2?.spanContext().traceId);
    expect(turn2?.links.map((link) => link.context.spanId)).toEqual([T3.spanId]);
    expect(turn3?.spanContext().traceId).toBe(T4.traceId);
    expect(turn3?.parentSpanContext?.spanId).toBe(T4.spanId);
    expect(turn3?.links).toEqual([]);
    // Each turn's run is inside its turn.
    for (const turn of turns) {
      const run = recorder
        .spans()
        .find(
          (span) =>
            span.attributes['runplane.run.id'] === turn.attributes['runplane.run.id'] &&
            span.name === 'runplane.run',
        );
      expect(run?.parentSpanContext?.spanId).toBe(turn.spanContext().spanId);
    }
  });
});
