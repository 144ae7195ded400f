/**
 * The cluster's session store on a real private Redis, beyond the contract suite
 * (`test/stores/session-store.test.ts`): a stale holder's history writes are refused, an
 * append reaches Redis after the events logged before it (seen with MONITOR), text
 * round-trips byte for byte (never re-encoded), a corrupt element is `STORE_FAILED`, and the
 * byte bounds hold across a change of holder.
 */
import { describe, expect, it } from 'vitest';
import type { ChatMessage } from '../../src/agent/messages.js';
import { createRedisSessionStore } from '../../src/cluster/redis-session-store.js';
import type { RunplaneError } from '../../src/errors.js';
import type { SessionKey } from '../../src/events/event-log.js';
import { skipRedis } from '../redis/redis-server.js';
import { turn } from '../stores/session-store.contract.js';
import { pollUntil, useCluster } from './cluster-helpers.js';

const key: SessionKey = { ownerId: 'alice', sessionId: 's1' };

const failureOf = async (promise: Promise<unknown>) => {
  const error = (await promise.then(
    () => undefined,
    (e: unknown) => e,
  )) as (RunplaneError & { reason?: string; limit?: string }) | undefined;
  return [error?.code, error?.reason ?? error?.limit];
};

describe.skipIf(skipRedis)('the cluster session store', () => {
  const cluster = useCluster();

  it("refuses a stale holder's append and clear once another instance took the lease", async () => {
    const scene = cluster.scene(key);
    // A's clock is still: it never renews, so once its lease expires in Redis A still believes
    // it holds the session.
    const a = scene.instance('A');
    const b = scene.instance('B');
    const [atA, atB] = [createRedisSessionStore(a), createRedisSessionStore(b)];
    await a.acquire(key);
    await atA.append({}, key, turn.slice(0, 2));
    // The lease expires now (Redis's own expiry), not after a TTL the test would race.
    await scene.admin.pexpire(scene.keys.lease, 1);
    await pollUntil(
      async () => (await scene.admin.exists(scene.keys.lease)) === 0,
      'the lease to expire',
    );
    expect(await b.acquire(key)).toEqual({ acquired: true, fence: 2 });

    // A wakes up: Redis refuses its batch, and it forgets the session.
    expect(await failureOf(atA.append({}, key, turn.slice(2)))).toEqual([
      'STALE_FENCE',
      'write_refused',
    ]);
    expect(await failureOf(atA.clear({}, key))).toEqual(['STALE_FENCE', 'not_held']);
    expect(await atB.load({}, key)).toEqual(turn.slice(0, 2));
    // The stale instance still reads, and B's writes land after what A wrote under fence 1.
    await atB.append({}, key, turn.slice(2));
    expect(await atA.load({}, key)).toEqual(turn);
    const c = createRedisSessionStore(scene.instance('C'));
    expect(await failureOf(c.append({}, key, turn))).toEqual(['STALE_FENCE', 'not_held']);
    expect(await scene.admin.llen(scene.keys.history)).toBe(turn.length);
  });

  it('ships a history append in order with the events: after those logged before it', async () => {
    const scene = cluster.scene(key);
    // One write per batch, so each reaches Redis in a script call of its own.
    const a = scene.instance('A', { maxBatch: { entries: 1 } });
    const store = createRedisSessionStore(a);
    await a.acquire(key);
    const monitor = await cluster.connect().monitor();
    const calls: string[] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      // A connection's first call of a script is EVALSHA, then EVAL once Redis lacks it.
      if (/^eval/i.test(args[0] ?? '')) calls.push(args.join(' '));
    });
    a.eventLog.append({}, key, { type: 'before', at: 1 });
    const saving = store.append({}, key, [{ role: 'user', content: 'saved' }]);
    a.eventLog.append({}, key, { type: 'after', at: 2 });
    await saving;
    await a.flushed(key);
    const indexOf = (text: string) => calls.findIndex((call) => call.includes(text));
    await pollUntil(() => Promise.resolve(indexOf('"type":"after"') >= 0), 'the last batch');
    monitor.disconnect();
    expect(indexOf('"type":"before"')).toBeGreaterThanOrEqual(0);
    expect(indexOf('"type":"before"')).toBeLessThan(indexOf('"content":"saved"'));
    expect(indexOf('"content":"saved"')).toBeLessThan(indexOf('"type":"after"'));
  });

  it('stores each message as its JSON, exactly, and reads large and many messages back', async () => {
    const scene = cluster.scene(key);
    const a = scene.instance('A');
    const atA = createRedisSessionStore(a, { maxAppendBytes: 8 * 1024 ** 2 });
    await a.acquire(key);
    // Over the batch's 512 KiB alone; astral, combining and lone-surrogate text; JSON look-alikes.
    const large: ChatMessage = {
      role: 'user',
      content: `${'é🌍\u0301'.repeat(200_000)} \ud800 {"x":[]} 1.0000000000000002`,
    };
    // More than Lua's stack takes in one `unpack`: pushed in slices by the script.
    const many: ChatMessage[] = Array.from({ length: 10_000 }, (_, i) => ({
      role: 'user',
      content: `m${i}`,
    }));
    await atA.append({}, key, [large]);
    await atA.append({}, key, many);
    const raw = await scene.admin.lrange(scene.keys.history, 0, 1);
    expect(raw[0]).toBe(JSON.stringify(large));
    expect(raw[1]).toBe('{"role":"user","content":"m0"}');
    const loaded = await createRedisSessionStore(scene.instance('R')).load({}, key);
    expect(loaded).toHaveLength(10_001);
    expect(loaded[0]).toEqual(large);
    expect(loaded.slice(1)).toEqual(many);
    expect(await atA.load({}, key)).toEqual(loaded);
  });

  it('answers STORE_FAILED for an element that is not a chat message', async () => {
    const scene = cluster.scene(key);
    const store = createRedisSessionStore(scene.instance('R'));
    await scene.admin.rpush(scene.keys.history, '{"role":"user","content":"ok"}', '{not json');
    await expect(store.load({}, key)).rejects.toThrow(/STORE_FAILED.*message 2 is not JSON/);
    await scene.admin.lset(scene.keys.history, 1, '{"role":"robot"}');
    await expect(store.load({}, key)).rejects.toThrow(/message 2 is not a chat message/);
  });

  it('bounds one append and a history in bytes, across a change of holder; clear frees it', async () => {
    const scene = cluster.scene(key);
    const bounds = { maxAppendBytes: 100, maxHistoryBytes: 250 };
    const a = scene.instance('A');
    const atA = createRedisSessionStore(a, bounds);
    await a.acquire(key);
    const message = (text: string): ChatMessage => ({ role: 'user', content: text });
    const eighty = message('x'.repeat(80 - JSON.stringify(message('')).length));
    expect(JSON.stringify(eighty)).toHaveLength(80);

    expect(await failureOf(atA.append({}, key, [eighty, eighty]))).toEqual([
      'HISTORY_TOO_LARGE',
      'append',
    ]);
    expect(await scene.admin.llen(scene.keys.history)).toBe(0);
    for (let i = 0; i < 3; i++) await atA.append({}, key, [eighty]);
    expect(await failureOf(atA.append({}, key, [message('y')]))).toEqual([
      'HISTORY_TOO_LARGE',
      'history',
    ]);
    expect(a.fenceOf(key)).toBe(1); // a refusal leaves the session held
    expect(await scene.admin.hget(scene.keys.meta, 'history:bytes')).toBe('240');

    await a.release(key);
    const b = scene.instance('B');
    const atB = createRedisSessionStore(b, bounds);
    await b.acquire(key);
    expect(await failureOf(atB.append({}, key, [eighty]))).toEqual([
      'HISTORY_TOO_LARGE',
      'history',
    ]);
    await atB.clear({}, key);
    expect(await scene.admin.hget(scene.keys.meta, 'history:bytes')).toBeNull();
    await atB.append({}, key, [eighty]);
    expect(await atB.load({}, key)).toEqual([eighty]);
    expect(await scene.admin.hget(scene.keys.meta, 'history:bytes')).toBe('80');
  });

  it('rejects bad options and bad messages with INVALID_ARGUMENT', async () => {
    const scene = cluster.scene(key);
    const a = scene.instance('A');
    expect(() => createRedisSessionStore(a, { maxHistoryBytes: 0 })).toThrow(
      /expected `maxHistoryBytes` to be/,
    );
    const store = createRedisSessionStore(a);
    await a.acquire(key);
    const cyclic: Record<string, unknown> = { role: 'user' };
    cyclic.content = cyclic;
    await expect(store.append({}, key, [cyclic as unknown as ChatMessage])).rejects.toThrow(
      /INVALID_ARGUMENT: expected message 0 to be JSON/,
    );
    expect(a.fenceOf(key)).toBe(1);
  });
});
