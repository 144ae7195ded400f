/**
 * The cluster's event log on a real private Redis, read from instances that do not hold the
 * session: a follower from any cursor gets exactly the suffix, nothing Redis does not hold is
 * visible, followers share one subscriber connection, and a lost nudge is healed by the poll.
 */
import { describe, expect, it } from 'vitest';
import { SimulatedClock } from 'xstate';
import { toSessionKeys } from '../../src/cluster/keys.js';
import type { RunplaneEvent, SessionKey } from '../../src/events/event-log.js';
import { skipRedis } from '../redis/redis-server.js';
import { pollUntil, useCluster } from './cluster-helpers.js';

const key: SessionKey = { ownerId: 'alice', sessionId: 's1' };
const other: SessionKey = { ownerId: 'bob', sessionId: 's2' };
const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Follows until `last` was seen (or `signal` aborts); resolves with the seqs seen. */
async function collect(
  iterable: AsyncIterable<RunplaneEvent>,
  last: number,
  stop: AbortController,
): Promise<number[]> {
  const seen: number[] = [];
  for await (const event of iterable) {
    seen.push(event.seq);
    if (event.seq >= last) stop.abort();
  }
  return seen;
}

describe.skipIf(skipRedis)('the cluster event log', () => {
  const cluster = useCluster();

  it('gives a follower on any instance, from any cursor, exactly the suffix: no gap, no duplicate', async () => {
    const keyPrefix = cluster.freshPrefix();
    const writer = cluster.instance({ instanceId: 'A', keyPrefix, maxBatch: { entries: 7 } });
    const reader = cluster.instance({ instanceId: 'C', keyPrefix, readBatchSize: 5 });
    await writer.acquire(key);
    const total = 300;
    const cursors = [0, 1, 13, 150, 299];
    const followers: Array<Promise<number[]>> = [];
    const start = (cursor: number, on = reader) => {
      const stop = new AbortController();
      followers.push(
        collect(on.eventLog.follow({ signal: stop.signal }, key, { after: cursor }), total, stop),
      );
    };
    for (const cursor of cursors) start(cursor);
    start(42, writer); // the holder itself reads the Stream too
    for (let seq = 1; seq <= total; seq++) {
      writer.eventLog.append({}, key, { type: 't', at: seq, runId: `r${seq % 3}` });
      if (seq % 40 === 0) {
        await writer.flushed(key);
        start(seq - 20); // followers that join mid-stream, behind the tail
        start(seq); // and exactly at it
      }
    }
    const cursorsStarted = [...cursors, 42, ...range(1, 7).flatMap((i) => [i * 40 - 20, i * 40])];
    const results = await Promise.all(followers);
    results.forEach((seen, i) => expect(seen).toEqual(range(cursorsStarted[i]! + 1, total)));
    expect((await reader.eventLog.read({}, key, { after: 290 })).map((e) => e.seq)).toEqual(
      range(291, 300),
    );
  });

  it('shows no event before Redis holds it, on any instance', async () => {
    const keyPrefix = cluster.freshPrefix();
    const admin = cluster.admin();
    const writer = cluster.instance({ instanceId: 'A', keyPrefix });
    const reader = cluster.instance({ instanceId: 'C', keyPrefix });
    await writer.acquire(key);
    writer.eventLog.append({}, key, { type: 'shipped', at: 1 });
    await writer.flushed(key);
    await admin.call('CLIENT', 'PAUSE', '10000', 'WRITE'); // reads go on, writes wait
    try {
      const appended = writer.eventLog.append({}, key, { type: 'waiting', at: 2 });
      expect(appended.seq).toBe(2);
      expect(writer.eventLog.lastSeq({}, key)).toBe(2); // the mirror numbered it …
      expect((await reader.eventLog.read({}, key)).map((e) => e.type)).toEqual(['shipped']); // … nobody sees it
    } finally {
      await admin.call('CLIENT', 'UNPAUSE');
    }
    await writer.flushed(key);
    expect((await reader.eventLog.read({}, key)).map((e) => e.type)).toEqual([
      'shipped',
      'waiting',
    ]);
  });

  it('serves all followers of an instance from one subscriber connection, subscribed while followed', async () => {
    const keyPrefix = cluster.freshPrefix();
    const admin = cluster.admin();
    const writer = cluster.instance({ instanceId: 'A', keyPrefix });
    const reader = cluster.instance({ instanceId: 'C', keyPrefix });
    await writer.acquire(key);
    await writer.acquire(other);
    const stops = [new AbortController(), new AbortController(), new AbortController()];
    const followed = [
      collect(reader.eventLog.follow({ signal: stops[0]!.signal }, key), 2, stops[0]!),
      collect(reader.eventLog.follow({ signal: stops[1]!.signal }, key), 2, stops[1]!),
      collect(reader.eventLog.follow({ signal: stops[2]!.signal }, other), 2, stops[2]!),
    ];
    const channel = (k: SessionKey) => toSessionKeys(k, keyPrefix).tailChannel;
    const subscribers = async () =>
      (await admin.pubsub('NUMSUB', channel(key), channel(other))) as Array<string | number>;
    await pollUntil(
      async () => (await subscribers()).join() === [channel(key), 1, channel(other), 1].join(),
      'subscriptions',
    );
    const pubsubClients = (await admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string;
    expect(pubsubClients.trim().split('\n')).toHaveLength(1);
    for (const k of [key, other]) {
      writer.eventLog.append({}, k, { type: 'a', at: 1 });
      writer.eventLog.append({}, k, { type: 'b', at: 2 });
    }
    expect(await Promise.all(followed)).toEqual([
      [1, 2],
      [1, 2],
      [1, 2],
    ]);
    await pollUntil(
      async () => (await subscribers()).join() === [channel(key), 0, channel(other), 0].join(),
      'unsubscriptions',
    );
  });

  it('heals a lost nudge with the poll of the followed sessions', async () => {
    const keyPrefix = cluster.freshPrefix();
    const keys = toSessionKeys(key, keyPrefix);
    const admin = cluster.admin();
    const clock = new SimulatedClock();
    const reader = cluster.instance({ instanceId: 'C', keyPrefix, clock, followPollMs: 1_000 });
    // A writer that stores events as the batch script does; the first is nudged, the second not.
    const store = async (seq: number, nudge: boolean) => {
      const event = {
        seq,
        id: `e${seq}`,
        sessionId: key.sessionId,
        type: 'raw',
        payload: {},
        at: seq,
      };
      await admin
        .multi()
        .xadd(keys.events, `${seq}-0`, 'e', JSON.stringify(event))
        .set(keys.seq, seq)
        .exec();
      if (nudge) await admin.publish(keys.tailChannel, String(seq));
    };
    const stop = new AbortController();
    const iterator = reader.eventLog.follow({ signal: stop.signal }, key)[Symbol.asyncIterator]();
    const first = iterator.next();
    await pollUntil(
      async () => (await admin.pubsub('NUMSUB', keys.tailChannel))[1] === 1,
      'the subscription',
    );
    await store(1, true);
    expect((await first).value).toMatchObject({ seq: 1 });
    await admin.config('RESETSTAT');
    const second = iterator.next();
    // The follower read the Stream (empty past 1) and sleeps: wait until Redis served that read.
    await pollUntil(
      async () => /cmdstat_xrange:calls=1,/.test(await admin.info('commandstats')),
      'its read',
    );
    let delivered = false;
    void second.then(() => (delivered = true));
    await store(2, false); // the nudge is lost
    await admin.ping();
    expect(delivered).toBe(false);
    clock.increment(1_000); // the poll finds seq 2 and wakes the follower
    expect((await second).value).toMatchObject({ seq: 2 });
    stop.abort();
    expect(await iterator.next()).toEqual({ done: true, value: undefined });
  });
});
