/**
 * The embedded default holds bounded memory (issue 14, defect 8): the in-memory event log drops
 * events past its retention and keeps small tombstones: a session's last `seq`, and for a while
 * the ids of runs whose events were dropped.
 */
import { describe, expect, it } from 'vitest';
import {
  createMemoryEventLog,
  createRuntime,
  type Agent,
  type RunplaneEvent,
} from '../../src/index.js';
import { createTestRuntime, tick } from '../helpers.js';

const agent: Agent<string, string> = { execute: async (input) => `done ${input}` };

describe('the in-memory event log’s retention', () => {
  it('with default options, createRuntime() keeps at most 100,000 events and every last seq', async () => {
    const runtime = createRuntime();
    const log = runtime.eventLog;
    for (let session = 0; session < 1_500; session++) {
      for (let i = 0; i < 100; i++) {
        log.append({}, { ownerId: 'alice', sessionId: `s${session}` }, { type: 'note', at: i });
      }
    }
    let kept = 0;
    for (let session = 0; session < 1_500; session++) {
      kept += (await log.read({}, { ownerId: 'alice', sessionId: `s${session}` })).length;
    }
    expect(kept).toBeLessThanOrEqual(100_000);
    expect(kept).toBeGreaterThan(90_000);
    // The least recently written sessions went first; their seq goes on where it was.
    const oldest = { ownerId: 'alice', sessionId: 's0' };
    expect(await log.read({}, oldest)).toEqual([]);
    expect(log.lastSeq({}, oldest)).toBe(100);
    expect(log.append({}, oldest, { type: 'note', at: 0 }).seq).toBe(101);
    expect((await log.read({}, { ownerId: 'alice', sessionId: 's1499' })).length).toBe(100);
    await runtime.shutdown({ graceMs: 0 });
  });

  it('with default options, one session keeps about its last 1,000 events', async () => {
    const log = createMemoryEventLog();
    const key = { ownerId: 'alice', sessionId: 'long' };
    for (let i = 0; i < 5_000; i++) log.append({}, key, { type: 'note', at: i });
    const kept = await log.read({}, key);
    expect(kept.length).toBeGreaterThanOrEqual(1_000);
    expect(kept.length).toBeLessThanOrEqual(1_250);
    expect(kept.at(-1)?.seq).toBe(5_000);
  });

  it('a stale cancel of a run whose events were dropped answers ended, then not_found after runIdRetentionMs', async () => {
    const eventLog = createMemoryEventLog({ maxEvents: 40, runIdRetentionMs: 60_000 });
    const { runtime, clock } = createTestRuntime({ stores: { eventLog } });
    const first = runtime.prepare({ ownerId: 'alice', sessionId: 'a', agent, input: 'one' });
    first.start();
    await first.termination;
    const lastSeqOfA = eventLog.lastSeq({}, { ownerId: 'alice', sessionId: 'a' });
    expect(lastSeqOfA).toBeGreaterThan(0);
    // Other sessions write until session a's events are dropped.
    for (let i = 0; i < 10; i++) {
      const run = runtime.prepare({ ownerId: 'alice', sessionId: `b${i}`, agent, input: 'x' });
      run.start();
      await run.termination;
    }
    const a = { ownerId: 'alice', sessionId: 'a' };
    expect(await eventLog.read({}, a)).toEqual([]);
    expect(eventLog.lastSeq({}, a)).toBe(lastSeqOfA);
    expect(runtime.runs.cancel('alice', 'a', first.id)).toBe('ended');
    expect(runtime.runs.cancel('bob', 'a', first.id)).toBe('not_found');
    // Its id is not taken again while it is remembered.
    expect(() =>
      runtime.prepare({ ownerId: 'alice', sessionId: 'a', agent, input: 'again', runId: first.id }),
    ).toThrow(/expected `runId` to be unused/);

    // Past the retention (event time moves with the next events logged), it is forgotten.
    clock.increment(60_000);
    const later = runtime.prepare({ ownerId: 'alice', sessionId: 'c', agent, input: 'later' });
    later.start();
    await later.termination;
    expect(runtime.runs.cancel('alice', 'a', first.id)).toBe('not_found');
    // And session a's seq goes on where it was.
    const next = runtime.prepare({ ownerId: 'alice', sessionId: 'a', agent, input: 'next' });
    next.start();
    await next.termination;
    const events = await eventLog.read({}, a);
    expect(events[0]?.seq).toBe(lastSeqOfA + 1);
    await runtime.shutdown({ graceMs: 0 });
  });

  it('keeps at most maxRunIds ids of dropped runs, the earliest dropped forgotten first', () => {
    const log = createMemoryEventLog({ maxEventsPerSession: 1, maxRunIds: 2 });
    const key = { ownerId: 'alice', sessionId: 's' };
    for (const runId of ['r1', 'r2', 'r3', 'r4']) log.append({}, key, { runId, type: 'x', at: 0 });
    // r4's event is kept, r1..r3 were dropped and only the last two ids are remembered.
    expect(['r1', 'r2', 'r3', 'r4'].map((id) => log.hasRun({}, key, id))).toEqual([
      false,
      true,
      true,
      true,
    ]);
  });

  it('skips a session someone follows, and a follower of a dropped session resumes on its seq', async () => {
    const log = createMemoryEventLog({ maxEvents: 10 });
    const followed = { ownerId: 'alice', sessionId: 'followed' };
    for (let i = 0; i < 5; i++) log.append({}, followed, { type: 'note', at: i });
    const stop = new AbortController();
    const seen: number[] = [];
    const following = (async () => {
      for await (const event of log.follow({ signal: stop.signal }, followed, { after: 5 })) {
        seen.push(event.seq);
        if (event.seq === 6) stop.abort();
      }
    })();
    for (let i = 0; i < 20; i++) {
      log.append({}, { ownerId: 'alice', sessionId: `other${i}` }, { type: 'note', at: i });
    }
    expect((await log.read({}, followed)).length).toBe(5);
    log.append({}, followed, { type: 'note', at: 20 });
    await following;
    expect(seen).toEqual([6]);
  });

  it('a follower whose session was dropped while it held an event still wakes on the next one', async () => {
    const log = createMemoryEventLog({ maxEvents: 5 });
    const x = { ownerId: 'alice', sessionId: 'x' };
    log.append({}, x, { type: 'note', at: 0 });
    const stop = new AbortController();
    const followed: AsyncIterable<RunplaneEvent> = log.follow({ signal: stop.signal }, x);
    const iterator = followed[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first.done !== true && first.value.seq).toBe(1);
    // While the follower holds seq 1 (it waits on nothing), session x is dropped.
    for (let i = 0; i < 10; i++) {
      log.append({}, { ownerId: 'alice', sessionId: `other${i}` }, { type: 'note', at: i });
    }
    expect(await log.read({}, x)).toEqual([]);
    let seq: number | undefined;
    const next = iterator.next().then((result) => {
      if (result.done !== true) seq = result.value.seq;
    });
    await tick();
    log.append({}, x, { type: 'note', at: 10 });
    for (let i = 0; i < 5 && seq === undefined; i++) await tick();
    expect(seq).toBe(2);
    stop.abort();
    await next;
  });

  it('refuses bad retention options with INVALID_ARGUMENT', () => {
    expect(() => createMemoryEventLog({ maxEvents: 0 })).toThrow(
      /expected `maxEvents` to be an integer of at least 1 or Infinity, got 0/,
    );
    expect(() => createMemoryEventLog({ maxRunIds: 1.5 })).toThrow(/`maxRunIds`/);
    expect(() => createMemoryEventLog({ runIdRetentionMs: -1 })).toThrow(/`runIdRetentionMs`/);
    expect(() => createMemoryEventLog({ maxEventsPerSession: Infinity })).not.toThrow();
  });
});
