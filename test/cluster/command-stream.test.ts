/**
 * Commands for a session held elsewhere (docs/architecture.md, "Cluster on Redis"): instances
 * in one process, each with its own runtime, against one private real Redis. A command sent on
 * B for a session A holds is appended to the session's command Stream, applied on A through
 * A's local access, and answered on B from Redis; order is the Stream's; a lost nudge is made
 * good by the holder's renew beat; a holder that dies or is fenced leaves the command to the
 * next holder, which applies it once.
 */
import { connect } from 'node:net';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { CommandTimeoutError } from '../../src/errors.js';
import type { SessionKey } from '../../src/events/event-log.js';
import { HttpError, toHttpError } from '../../src/server/http-error.js';
import { skipRedis } from '../redis/redis-server.js';
import { pollUntil, useCluster, type ClusterScene } from './cluster-helpers.js';
import {
  cancelCommand,
  clusterNodeToken,
  createCommand,
  messageCommand,
  runIdOf,
  useClusterNodes,
  type ClusterNode,
} from './cluster-nodes.js';
import { startTcpProxy } from './tcp-proxy.js';

const key: SessionKey = { ownerId: 'alice', sessionId: 's1' };

/** The texts of the `user.message` events Redis holds for the session, in log order. */
async function loggedMessages(node: ClusterNode): Promise<string[]> {
  const events = await node.cluster.eventLog.read({}, key, { types: ['user.message'] });
  return events.map((event) => String(event.payload.text));
}

/** What a promise rejected with (fails the test when it resolves). */
const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => {
      throw new Error('expected a refusal');
    },
    (error: unknown) => error,
  );

/** Waits until the session's command Stream holds `length` entries (read from Redis). */
const streamLength = (scene: ClusterScene, length: number) =>
  pollUntil(
    async () => (await scene.admin.xlen(scene.keys.commands)) === length,
    `${length} command entries`,
  );

/**
 * Records the commands clients send to Redis (`MONITOR` on a plain socket; a script's own calls
 * are left out) until `stop()`, which returns each as its lower-cased name and first argument.
 */
async function monitorClients(port: number) {
  const socket = connect(port, '127.0.0.1');
  let text = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (text += chunk));
  socket.write('MONITOR\r\n');
  await pollUntil(async () => text.startsWith('+OK\r\n'), 'MONITOR on');
  return {
    async stop() {
      // A PING of the monitor's own connection is not monitored: mark the end with an ECHO.
      const end = `end-${Math.random()}`;
      const admin = connect(port, '127.0.0.1');
      admin.write(`ECHO ${end}\r\n`);
      await pollUntil(async () => text.includes(end), 'the end mark monitored');
      admin.destroy();
      socket.destroy();
      const lines = text.split('\r\n').filter((line) => !line.includes('[0 lua]'));
      return lines.flatMap((line) => {
        const match = /^\+[\d.]+ \[\d+ [^\]]+\] "(\w+)"(?: "([^"]*)")?/.exec(line);
        return match === null || match[1] === 'ECHO'
          ? []
          : [[match[1]!.toLowerCase(), match[2] ?? '']];
      });
    },
  };
}

describe.skipIf(skipRedis)('commands for a session held elsewhere', () => {
  const cluster = useCluster();
  const node = useClusterNodes();

  it('applies a command sent on B on the holder A and answers on B, refusals and cancels included', async () => {
    const scene = cluster.scene(key);
    const a = node(scene, 'A');
    const b = node(scene, 'B');
    const created = await a.access.execute(createCommand(key));
    expect(created.session_id).toBe('s1');
    expect(a.cluster.fenceOf(key)).toBe(1);

    const first = await b.access.execute(messageCommand(key, 'first'));
    expect(first.results[0]).toMatchObject({ type: 'user.message', result: 'accepted' });
    const firstRun = runIdOf(first);
    // Applied on A (its runtime runs it), not on B; B holds nothing.
    expect(a.runtime.runs.find('alice', 's1', firstRun)).toBeDefined();
    expect(b.runtime.runs.find('alice', 's1', firstRun)).toBeUndefined();
    expect(b.cluster.fenceOf(key)).toBeUndefined();
    // Durable before B was answered: the log, the cursor, a trimmed Stream, the answer consumed.
    expect(await loggedMessages(b)).toEqual(['first']);
    const cursor = await scene.admin.get(scene.keys.commandsApplied);
    expect(cursor).toMatch(/^\d+-\d+$/);
    expect(await scene.admin.xrange(scene.keys.commands, '-', '+')).toEqual([
      [cursor, expect.any(Array)],
    ]);
    expect(await scene.admin.keys(scene.keys.answer('*'))).toEqual([]);

    // A second message queues behind the first (strategy enqueue).
    const second = runIdOf(await b.access.execute(messageCommand(key, 'second')));
    expect(a.runtime.session('alice', 's1').queuedRunIds).toEqual([second]);

    // A refusal crosses as the same HttpError.
    const refused = await refusal(
      b.access.execute({ type: 'session.update', ...key, settings: { mode: 'loop' } }),
    );
    expect(refused).toBeInstanceOf(HttpError);
    expect((refused as HttpError).toData()).toMatchObject({
      code: 'invalid_body',
      message: expect.stringContaining('`mode` to be absent') as unknown,
    });

    // Cancel from B, fenced by run_id: accepted for the active run only, never widened.
    const running = a.runtime.runs.find('alice', 's1', firstRun)!;
    const cancelled = await b.access.execute(cancelCommand(key, firstRun));
    expect(cancelled.results[0]).toMatchObject({ result: 'accepted', run_id: firstRun });
    expect((await running.termination).status).toBe('CANCELLED');
    expect(a.runtime.runs.find('alice', 's1', second)?.status).not.toBe('CANCELLED');
    const again = await b.access.execute(cancelCommand(key, firstRun));
    expect(again.results[0]).toMatchObject({ result: 'ended', run_id: firstRun });
    const unknown = await b.access.execute(cancelCommand(key, 'run-that-never-was'));
    expect(unknown.results[0]).toMatchObject({ result: 'not_found' });
    expect(a.started).toEqual(['first', 'second']);

    // A delete from B answers once the session's runs have settled on A.
    expect(await b.access.execute({ type: 'session.delete', ...key })).toBeNull();
    expect(a.runtime.session('alice', 's1').activeRunId).toBeUndefined();
    const gone = await refusal(b.access.execute(messageCommand(key, 'too late')));
    expect((gone as HttpError).toData()).toMatchObject({ code: 'not_found' });
  });

  it('applies a command from its nudge without reading the Stream, unless the nudge does not follow the cursor', async () => {
    const scene = cluster.scene(key);
    const a = node(scene, 'A');
    const b = node(scene, 'B');
    const silent = node(scene, 'C', { access: { nudgeHolders: false } });
    await a.access.execute(createCommand(key));
    const first = runIdOf(await b.access.execute(messageCommand(key, 'first')));

    // The nudge carries the entry, and the entry before it is A's cursor: no XRANGE, and no
    // PUBLISH or lease script of B's own (the append script nudged A).
    const monitor = await monitorClients(cluster.server().port);
    const cancelled = await b.access.execute(cancelCommand(key, first));
    expect(cancelled.results[0]).toMatchObject({ result: 'accepted', run_id: first });
    const sent = await monitor.stop();
    // B's append script and A's batch: no lease script, no PUBLISH, no XRANGE, no GETDEL (the
    // answer rode in its nudge; B deletes the stored copy without waiting: the DEL).
    const names = sent.map(([name]) => name);
    expect(names.filter((name) => name !== 'del')).toEqual(['evalsha', 'evalsha']);
    expect(sent.filter(([name, on]) => name === 'xrange' && on === scene.keys.commands)).toEqual(
      [],
    );
    expect(sent.filter(([name]) => name === 'publish')).toEqual([]);
    const cursor = await scene.admin.get(scene.keys.commandsApplied);
    expect(cursor).toBe((await scene.admin.xrange(scene.keys.commands, '-', '+'))[0]?.[0]);

    // C appends without a nudge; B's next entry then does not follow A's cursor: A reads the
    // Stream and applies both, in Stream order.
    const unnudged = silent.access.execute(messageCommand(key, 'second'));
    await streamLength(scene, 2);
    const reading = await monitorClients(cluster.server().port);
    const nudged = b.access.execute(messageCommand(key, 'third'));
    const [second, third] = (await Promise.all([unnudged, nudged])).map(runIdOf);
    const read = await reading.stop();
    expect(
      read.filter(([name, on]) => name === 'xrange' && on === scene.keys.commands),
    ).not.toEqual([]);
    expect(await loggedMessages(a)).toEqual(['first', 'second', 'third']);
    expect(a.runtime.session('alice', 's1').activeRunId).toBe(second);
    expect(a.runtime.session('alice', 's1').queuedRunIds).toEqual([third]);
  });

  it('reads an entry by its field names, whatever its values: a sender named "c", "r" or "i"', async () => {
    const scene = cluster.scene(key);
    const a = node(scene, 'A');
    await a.access.execute(createCommand(key));
    // Found by `runplane serve --redis --instance-id c`: the entry's fields are
    // [r, <id>, i, c, c, <json>], and a search for the name "c" found the value first.
    for (const name of ['c', 'r', 'i']) {
      const sender = node(scene, name);
      const sent = await sender.access.execute(messageCommand(key, `from ${name}`));
      expect(sent.results[0]).toMatchObject({ type: 'user.message', result: 'accepted' });
    }
    expect(await loggedMessages(a)).toEqual(['from c', 'from r', 'from i']);
  });

  it('answers a command on its holder once its effect is in Redis', async () => {
    const scene = cluster.scene(key);
    const a = node(scene, 'A');
    await a.access.execute(createCommand(key));
    // Writes wait in Redis for a while: an answer sent before its batch landed would come first.
    await scene.admin.call('CLIENT', 'PAUSE', '300', 'WRITE');
    const answer = await a.access.execute(messageCommand(key, 'here'));
    // Read straight from Redis (reads are not paused): the batch was acknowledged first.
    const entries = (await scene.admin.xrange(scene.keys.events, '-', '+')) as Array<
      [string, string[]]
    >;
    const events = entries.map(([, fields]) => JSON.parse(fields[1]!) as Record<string, unknown>);
    expect(events.filter((event) => event.type === 'user.message')).toEqual([
      expect.objectContaining({
        payload: { text: 'here', run_id: runIdOf(answer), strategy: 'enqueue' },
      }),
    ]);
  });

  it('applies commands from several instances in Stream order; with nudges lost, the renew beat delivers them', async () => {
    const scene = cluster.scene(key);
    const a = node(scene, 'A');
    const silent = { access: { nudgeHolders: false } };
    const b = node(scene, 'B', silent);
    const c = node(scene, 'C', silent);
    await a.access.execute(createCommand(key));
    // Sent one after another without waiting for answers: the Stream fixes the order.
    const answers = [];
    for (const [i, sender] of [b, c, b, c].entries()) {
      answers.push(sender.access.execute(messageCommand(key, `m${i + 1}`)));
      await streamLength(scene, i + 1);
    }
    // No nudge reached A: nothing is applied yet.
    expect(await scene.admin.get(scene.keys.commandsApplied)).toBeNull();
    expect(await loggedMessages(a)).toEqual([]);
    await a.cluster.renew(); // the renew beat re-reads the Stream past the cursor
    const runIds = (await Promise.all(answers)).map(runIdOf);
    expect(await loggedMessages(c)).toEqual(['m1', 'm2', 'm3', 'm4']);
    expect([
      a.runtime.session('alice', 's1').activeRunId,
      ...a.runtime.session('alice', 's1').queuedRunIds,
    ]).toEqual(runIds);
    expect(await scene.admin.xlen(scene.keys.commands)).toBe(1); // the applied ones trimmed
  });

  it("finds an answer whose nudge was lost on the sender's next poll", async () => {
    const scene = cluster.scene(key);
    const proxy = await startTcpProxy(cluster.server().port);
    const viaProxy = new Redis({ port: proxy.port, host: '127.0.0.1' });
    viaProxy.on('error', () => undefined); // cut below on purpose
    try {
      const a = node(scene, 'A');
      const b = node(scene, 'B', {
        instance: { redis: viaProxy }, // its subscriber too: a duplicate of this connection
        access: { nudgeHolders: false, answerPollMs: 100 },
      });
      await a.access.execute(createCommand(key));
      const answer = b.access.execute(messageCommand(key, 'nudge lost'));
      await streamLength(scene, 1);
      proxy.reset(); // B's connections dropped: the answer's nudge cannot reach it
      await a.cluster.renew();
      const answerKey = async () => (await scene.admin.keys(scene.keys.answer('*')))[0];
      await pollUntil(async () => (await answerKey()) !== undefined, 'the answer in Redis');
      proxy.heal();
      expect(await answerKey()).toBeDefined(); // nobody read it: the nudge was lost
      b.clock.increment(100); // B's poll reads it (once its connection is back)
      expect((await answer).results[0]).toMatchObject({ result: 'accepted' });
      expect(await answerKey()).toBeUndefined(); // read and deleted
    } finally {
      viaProxy.disconnect();
      await proxy.close();
    }
  });

  it('lets the next holder apply, once, a command whose holder died before answering', async () => {
    const scene = cluster.scene(key);
    const a = node(scene, 'A', { instance: { leaseTtlMs: 1_000 } }); // its clock is still: no renew
    const b = node(scene, 'B', {
      access: {
        answerPollMs: 100,
        // No rebuild (another module's): B's session records load the record from Redis.
      },
    });
    await a.access.execute(createCommand(key));
    await a.die(); // no release: its lease expires in Redis
    const answer = b.access.execute(messageCommand(key, 'after the crash'));
    await streamLength(scene, 1);
    await pollUntil(async () => (await scene.admin.exists(scene.keys.lease)) === 0, 'A to expire');
    b.clock.increment(100); // B's answer poll: no answer, nobody holds the lease → B takes it
    const applied = await answer;
    expect(applied.results[0]).toMatchObject({ result: 'accepted' });
    expect(b.cluster.fenceOf(key)).toBe(2);
    expect(b.runtime.runs.find('alice', 's1', runIdOf(applied))).toBeDefined();
    expect(await loggedMessages(b)).toEqual(['after the crash']);
    expect(b.started).toEqual(['after the crash']);
  });

  it('does not count an application by a fenced-off holder: the next holder applies the command, once', async () => {
    const scene = cluster.scene(key);
    const a = node(scene, 'A', { instance: { leaseTtlMs: 1_000 } });
    const b = node(scene, 'B', {
      access: {
        answerPollMs: 100,
        nudgeHolders: false,
      },
    });
    await a.access.execute(createCommand(key));
    const answer = b.access.execute(messageCommand(key, 'once'));
    await streamLength(scene, 1);
    await pollUntil(async () => (await scene.admin.exists(scene.keys.lease)) === 0, 'A to expire');
    // A, paused past its lease, wakes to a nudge: it applies in memory; Redis refuses its batch.
    await scene.admin.publish(
      a.cluster.channelOf(),
      JSON.stringify({ t: 'c', o: 'alice', s: 's1' }),
    );
    await pollUntil(async () => scene.lost.length > 0, "A's batch to be refused");
    expect(scene.lost.map((error) => error.code)).toEqual(['STALE_FENCE']);
    expect(a.started).toEqual(['once']); // it did run in A's memory
    expect(await scene.admin.get(scene.keys.commandsApplied)).toBeNull();
    b.clock.increment(100);
    const applied = await answer;
    expect(b.runtime.runs.find('alice', 's1', runIdOf(applied))).toBeDefined();
    expect(await loggedMessages(b)).toEqual(['once']);
    expect(b.cluster.fenceOf(key)).toBe(2);
  });

  it('bounds what a client can make large: command size, the Stream, the wait', async () => {
    const scene = cluster.scene(key);
    const a = node(scene, 'A');
    const b = node(scene, 'B', {
      access: {
        nudgeHolders: false,
        maxCommandBytes: 2_000,
        maxPendingCommands: 2,
        commandTimeoutMs: 5_000,
        answerTtlMs: 30_000,
      },
    });
    await a.access.execute(createCommand(key));
    const big = await refusal(b.access.execute(messageCommand(key, 'x'.repeat(2_000))));
    expect((big as HttpError).toData()).toMatchObject({ code: 'payload_too_large' });
    expect(await scene.admin.xlen(scene.keys.commands)).toBe(0);

    const waiting = [
      b.access.execute(messageCommand(key, 'p1')),
      b.access.execute(messageCommand(key, 'p2')),
    ].map(refusal);
    await streamLength(scene, 2);
    const full = await refusal(b.access.execute(messageCommand(key, 'p3')));
    expect((full as HttpError).toData()).toMatchObject({ code: 'session_queue_full' });
    expect(await scene.admin.xlen(scene.keys.commands)).toBe(2);

    b.clock.increment(5_000);
    for (const error of await Promise.all(waiting)) {
      expect(error).toBeInstanceOf(CommandTimeoutError);
      expect((error as CommandTimeoutError).code).toBe('COMMAND_TIMEOUT');
      expect(toHttpError(error).toBody()).toMatchObject({ error: { code: 'command_timeout' } });
      expect(toHttpError(error).status).toBe(504);
    }
    // Still in the Stream: applied later, its answers kept with a TTL for nobody.
    await a.cluster.renew();
    await pollUntil(
      async () => (await scene.admin.keys(scene.keys.answer('*'))).length === 2,
      'answers',
    );
    const [answerKey] = await scene.admin.keys(scene.keys.answer('*'));
    expect(await scene.admin.pttl(answerKey!)).toBeGreaterThan(20_000);
    expect(await loggedMessages(a)).toEqual(['p1', 'p2']);
  });

  it('a command timeout is 504 command_timeout over HTTP, a JSON body with Retry-After', async () => {
    const scene = cluster.scene(key);
    const a = node(scene, 'A');
    const b = node(scene, 'B', { access: { nudgeHolders: false, commandTimeoutMs: 5_000 } });
    await a.access.execute(createCommand(key));
    // A holds the session; unnudged and with its clock still (no renew beat), it never applies.
    const answer = b.app.request(`/api/sessions/${key.sessionId}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${clusterNodeToken}` },
    });
    await streamLength(scene, 1);
    b.clock.increment(5_000);
    const response = await answer;
    // Before: 504 without Retry-After, unlike the cluster's other 5xx answers.
    expect(response.status).toBe(504);
    expect(response.headers.get('retry-after')).toBe('2');
    expect(await response.json()).toMatchObject({
      error: {
        code: 'command_timeout',
        message: expect.stringContaining('COMMAND_TIMEOUT') as unknown,
      },
    });
  });
});
