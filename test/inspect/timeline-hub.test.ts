import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import {
  createRuntime,
  createTimelineHub,
  type TimelineEntry,
  type TimelineHubOptions,
} from '../../src/index.js';
import { tick } from '../helpers.js';
import { steppingAgent } from './timeline-helpers.js';

/** A runtime on a simulated clock whose inspection stream feeds a hub. */
function createHubRuntime(options: Omit<TimelineHubOptions, 'clock'> = {}) {
  const clock = new SimulatedClock();
  const hub = createTimelineHub({ clock, ...options });
  const runtime = createRuntime({ clock, inspect: hub.inspect, reportError: () => undefined });
  const advance = async (ms: number) => {
    for (let left = ms; left > 0; left -= 10) {
      await tick();
      clock.increment(Math.min(10, left));
      await tick();
    }
  };
  const runFor = async (ownerId: string, runId: string) => {
    const run = runtime.prepare({
      ownerId,
      sessionId: 'chat',
      agent: steppingAgent(1, 10),
      input: runId,
      runId,
    });
    run.start();
    await advance(10);
    await run.termination;
  };
  return { clock, hub, runtime, advance, runFor };
}

const decoder = new TextDecoder();

/** Reads frames until `predicate(text so far)` holds; fails if the stream ends first. */
async function readUntil(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  predicate: (text: string) => boolean,
  text = '',
): Promise<string> {
  while (!predicate(text)) {
    const { done, value } = await reader.read();
    if (done) throw new Error(`stream ended after: ${text}`);
    text += decoder.decode(value);
  }
  return text;
}

describe('createTimelineHub', () => {
  it("delivers an owner's transitions to that owner only, live and replayed", async () => {
    const { hub, runFor } = createHubRuntime();
    const alice: TimelineEntry[] = [];
    const bob: TimelineEntry[] = [];
    hub.subscribe('alice', (entry) => alice.push(entry));
    const stopBob = hub.subscribe('bob', (entry) => bob.push(entry));
    await runFor('alice', 'a1');
    await runFor('bob', 'b1');

    expect(new Set(alice.map((e) => e.transition.id))).toEqual(new Set(['a1', 'alice/chat']));
    expect(new Set(bob.map((e) => e.transition.id))).toEqual(new Set(['b1', 'bob/chat']));
    expect(alice.find((e) => e.transition.id === 'a1')?.transition).toMatchObject({
      actor: 'run',
      parentId: 'alice/chat',
      from: null,
      to: 'CREATED',
    });
    const seqs = alice.map((e) => e.seq);
    expect(seqs).toEqual([...seqs].sort((x, y) => x - y));

    // A late subscriber gets the kept history after its cursor, then live entries.
    stopBob();
    const replay: TimelineEntry[] = [];
    const cursor = alice[1]!.seq;
    hub.subscribe('alice', (entry) => replay.push(entry), { after: cursor });
    expect(replay).toEqual(alice.slice(2));
    expect(hub.history('alice', { after: cursor })).toEqual(alice.slice(2));
    await runFor('bob', 'b2');
    expect(bob.some((e) => e.transition.id === 'b2')).toBe(false); // unsubscribed
    expect(replay.some((e) => e.transition.id === 'b2')).toBe(false);
  });

  it('keeps at most historyLimit entries, oldest dropped first', async () => {
    const { hub, runFor } = createHubRuntime({ historyLimit: 3 });
    await runFor('alice', 'a1');
    const kept = hub.history('alice');
    expect(kept).toHaveLength(3);
    expect(kept.at(-1)?.transition).toMatchObject({ id: 'a1', to: 'COMPLETED' });
    expect(createTimelineHub({ historyLimit: 0 }).history('alice')).toEqual([]);
  });

  it('isolates a throwing listener and validates its arguments', async () => {
    const reported: unknown[] = [];
    const { hub, runFor } = createHubRuntime({ onError: (error) => reported.push(error) });
    const seen: string[] = [];
    hub.subscribe('alice', () => {
      throw new Error('listener bug');
    });
    hub.subscribe('alice', (entry) => seen.push(entry.transition.to));
    await runFor('alice', 'a1');
    expect(seen).toContain('COMPLETED');
    expect(reported.length).toBe(seen.length);
    expect(() => hub.subscribe('', () => undefined)).toThrow(
      /^INVALID_ARGUMENT: expected `ownerId` to be a non-empty string, got ""/,
    );
    expect(() => hub.stream('alice', { after: -1 })).toThrow(
      /^INVALID_ARGUMENT: expected `after` to be a non-negative integer, got -1/,
    );
    expect(() => createTimelineHub({ historyLimit: 1.5 })).toThrow(/`historyLimit`/);
  });

  it('stream(): exact SSE frames, replay after a cursor, heartbeats on the clock, ends on abort', async () => {
    const { hub, clock, runFor } = createHubRuntime();
    await runFor('alice', 'a1');
    const [, second] = hub.history('alice');
    const abort = new AbortController();
    const reader = hub
      .stream('alice', { after: second!.seq, signal: abort.signal, heartbeatMs: 1_000 })
      .getReader();
    const expected = `: runplane timeline\n\n${hub
      .history('alice', { after: second!.seq })
      .map(
        (entry) =>
          `id: ${entry.seq}\nevent: transition\ndata: ${JSON.stringify(entry.transition)}\n\n`,
      )
      .join('')}`;
    expect(expected).toContain('"parentId":"alice/chat"'); // every field, on every frame
    expect(await readUntil(reader, (text) => text.length >= expected.length)).toBe(expected);

    clock.increment(1_000);
    expect(await readUntil(reader, (text) => text.length > 0)).toBe(': ping\n\n');

    await runFor('alice', 'a2'); // live
    const live = await readUntil(reader, (text) => text.includes('"to":"COMPLETED"'));
    expect(live).toMatch(/^id: \d+\nevent: transition\ndata: \{"t":\d+,"actor":"run","id":"a2"/);

    expect(hub.subscriberCount('alice')).toBe(1);
    abort.abort();
    expect(await reader.read()).toEqual({ done: true, value: undefined });
    expect(hub.subscriberCount('alice')).toBe(0);
    clock.increment(5_000); // the heartbeat was cleared: nothing is enqueued on a closed stream
    await runFor('alice', 'a3'); // and the listener is gone
  });

  it('stream(): a reader that cancels (client disconnect) unsubscribes', async () => {
    const { hub, runFor } = createHubRuntime();
    const delivered: string[] = [];
    hub.subscribe('alice', (entry) => delivered.push(entry.transition.id));
    const stream = hub.stream('alice', { heartbeatMs: 0 });
    const reader = stream.getReader();
    await runFor('alice', 'a1');
    await readUntil(reader, (text) => text.includes('"to":"COMPLETED"'));
    expect(hub.subscriberCount('alice')).toBe(2);
    await reader.cancel();
    expect(hub.subscriberCount('alice')).toBe(1);
    await runFor('alice', 'a2'); // must not throw into the runtime (enqueue after cancel)
    expect(delivered).toContain('a2');
    const already = new AbortController();
    already.abort();
    const closed = hub.stream('alice', { signal: already.signal }).getReader();
    expect(await closed.read()).toEqual({ done: true, value: undefined });
  });
});
