/**
 * `npm run chaos [-- --events 60 --sessions 9 --seed 1]` (issue 20; never part of `npm test`):
 * three `runplane serve --redis` processes over one private `redis-server`, each behind a TCP
 * proxy, under load (a client per session sending messages and cancels to random instances, an
 * SSE follower per session that resumes on another instance with `Last-Event-ID` whenever its
 * stream ends), while chaos events hit the instances: `kill -9` (a fresh instance replaces it),
 * `SIGSTOP` until Redis shows another holder's newer fence for a session it held (then
 * `SIGCONT`), a partition (the proxy forwards nothing) and a reset (the proxy drops its
 * connections), each lifted the same way, and a drain (`SIGTERM`: the instance hands its sessions
 * on and exits; a fresh one replaces it). Then everything is counted and printed as JSON:
 *
 * - events lost that a client saw: an event a follower read whose `seq` the final Stream holds
 *   with another id, or not at all (must be 0);
 * - duplicate or gapped `seq`: in a Stream (entry ids `<seq>-0`, 1..n, the `seq` key n) and in
 *   what each follower read across its reconnections (must be 0);
 * - stale writes accepted: an event of a run logged after that run's terminal event (the old
 *   holder's late words after the new holder marked the run) (must be 0);
 * - accepted but not durable: a `user.message` answered 200 whose run is not in the log (must
 *   be 0); runs left without an end once the cluster is quiet (must be 0).
 *
 * Exit code 0 when every count is 0. Waits are on conditions with bounds (no sleep decides).
 */
import { parseArgs } from 'node:util';
import { startPrivateRedis } from '../test/redis/redis-server.js';
import {
  checkStream,
  createServeCluster,
  createSession,
  waitFor,
  type ServeCluster,
  type ServeNode,
} from '../test/cluster/serve-cluster.js';
import { followSession, type Follower, type StreamEvent } from '../test/cluster/sse-follower.js';

const { values } = parseArgs({
  options: {
    events: { type: 'string', default: '60' },
    sessions: { type: 'string', default: '9' },
    seed: { type: 'string', default: '1' },
  },
});
const chaosEvents = Number(values.events);
const sessionCount = Number(values.sessions);
for (const [name, value] of Object.entries({ events: chaosEvents, sessions: sessionCount })) {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new Error(`expected --${name} to be a positive integer, got ${String(value)}`);
  }
}

// A small seeded generator (mulberry32), so a run's schedule can be replayed.
let state = Number(values.seed) >>> 0;
const random = () => {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
};
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;

const redis = await startPrivateRedis();
const world: ServeCluster = createServeCluster(redis, { leaseTtlMs: 1_000, chunkDelayMs: 10 });
let stopping = false;
const counts = {
  chaos: { kill: 0, pause: 0, partition: 0, reset: 0, drain: 0 },
  messagesAccepted: 0,
  messagesUnknown: 0,
  cancelsAccepted: 0,
  followerReconnects: 0,
};
const accepted = new Map<string, Set<string>>(); // session → run ids answered 200
const seen = new Map<string, StreamEvent[]>(); // session → what its follower read, in order

/** The instances a client may talk to now (alive; a paused or cut one still counts). */
const alive = () =>
  world.nodes.filter(
    ({ process: { child } }) => child.exitCode === null && child.signalCode === null,
  );

/** A request that gives up after 10 s (an instance cut off Redis waits on its commands). */
async function post(node: ServeNode, sessionId: string, events: unknown[]) {
  const response = await fetch(`${node.url}/api/sessions/${sessionId}/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${world.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ events }),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const open = new Map<string, Follower>(); // session → its follower's stream now open

/** What the session's follower has read so far, across its reconnections, in order. */
const seenSoFar = (sessionId: string): StreamEvent[] => [
  ...(seen.get(sessionId) ?? []),
  ...(open.get(sessionId)?.events ?? []),
];

/** Follows a session from seq 1, resuming on another instance whenever the stream ends. */
async function followForever(sessionId: string) {
  const events: StreamEvent[] = [];
  seen.set(sessionId, events);
  while (!stopping) {
    const lastEventId = events.length === 0 ? undefined : String(events.at(-1)!.seq);
    try {
      const follower = await followSession(pick(alive()).url, world.token, sessionId, {
        ...(lastEventId === undefined ? { after: 0 } : { lastEventId }),
      });
      open.set(sessionId, follower);
      // Until the stream ends (its instance died) or the chaos is over (closed below).
      await follower.until(() => false, 'the end of its stream', 3_600_000).catch(() => undefined);
      open.delete(sessionId);
      events.push(...follower.events);
    } catch {
      // The instance died between the pick and the connect: pick again.
    }
    if (!stopping) counts.followerReconnects++;
  }
}

/** Sends messages (and now and then a cancel of the last run) to random instances. */
async function load(sessionId: string) {
  const runs = new Set<string>();
  accepted.set(sessionId, runs);
  let last: string | undefined;
  while (!stopping) {
    const node = pick(alive());
    try {
      const text = random() < 0.3 ? 'tell me about runplane' : `what is ${runs.size} + 1?`;
      const answer = await post(node, sessionId, [{ type: 'user.message', payload: { text } }]);
      const results = answer.body.results as Array<{ run_id: string }> | undefined;
      if (answer.status === 200 && results?.[0] !== undefined) {
        last = results[0].run_id;
        runs.add(last);
        counts.messagesAccepted++;
        if (random() < 0.25) {
          // An exact cancel of the run just accepted, from another random instance.
          const cancel = await post(pick(alive()), sessionId, [
            { type: 'user.interrupt', payload: { run_id: last } },
          ]);
          const results = cancel.body.results as Array<{ result: string }> | undefined;
          if (results?.[0]?.result === 'accepted') counts.cancelsAccepted++;
        }
        // Paced by the log: the next message once this run has ended (or after a bound).
        await waitFor(
          () =>
            Promise.resolve(
              seenSoFar(sessionId).some((e) => e.run_id === last && isTerminal(e)) || stopping
                ? true
                : undefined,
            ),
          `run ${last} to end`,
          15_000,
        ).catch(() => undefined);
      } else {
        counts.messagesUnknown++;
      }
    } catch {
      counts.messagesUnknown++; // refused connection, timeout: the outcome is unknown
    }
  }
}

const isTerminal = (e: { type: string }) =>
  e.type === 'run.completed' || e.type === 'run.failed' || e.type === 'run.cancelled';

/** Sessions whose lease `node` holds now, with their fences. */
async function heldBy(node: ServeNode, sessions: readonly string[]) {
  const held: Array<{ sessionId: string; fence: number }> = [];
  for (const sessionId of sessions) {
    const lease = await world.lease(sessionId);
    if (lease?.instanceId === node.id) held.push({ sessionId, fence: lease.fence });
  }
  return held;
}

/**
 * Until another instance holds one of `held`'s sessions with a newer fence (or, when the victim
 * held none, until another instance answers).
 */
async function untilTakenOver(
  held: Array<{ sessionId: string; fence: number }>,
  others: ServeNode[],
) {
  if (held.length === 0) {
    await pick(others).api('GET', '/healthz');
    return;
  }
  await waitFor(
    async () => {
      for (const { sessionId, fence } of held) {
        if (((await world.lease(sessionId))?.fence ?? 0) > fence) return true;
      }
      return undefined;
    },
    `a newer fence on one of ${held.map((h) => h.sessionId).join(', ')}`,
    30_000,
  );
}

const t0 = performance.now();
try {
  let nodes = await world.ready(3);
  const sessions: string[] = [];
  for (let i = 0; i < sessionCount; i++) sessions.push(await createSession(nodes[i % 3]!));
  const workers = sessions.flatMap((id) => [followForever(id), load(id)]);

  for (let i = 0; i < chaosEvents; i++) {
    nodes = await world.ready(3);
    const victim = pick(nodes);
    const others = nodes.filter((n) => n !== victim);
    const held = await heldBy(victim, sessions);
    const kind = pick(['kill', 'pause', 'partition', 'reset', 'drain'] as const);
    counts.chaos[kind]++;
    process.stderr.write(
      `chaos ${i + 1}/${chaosEvents}: ${kind} ${victim.id} (holds ${held.length})\n`,
    );
    if (kind === 'kill') {
      await victim.kill();
      await untilTakenOver(held, others);
    } else if (kind === 'drain') {
      // SIGTERM: the instance hands its sessions on and exits; a fresh one replaces it.
      await victim.drain();
      await untilTakenOver(held, others);
    } else if (kind === 'pause') {
      victim.pause();
      await untilTakenOver(held, others);
      victim.resume();
    } else {
      if (kind === 'partition') victim.proxy?.blackhole();
      else victim.proxy?.reset();
      await untilTakenOver(held, others);
      victim.proxy?.heal();
    }
  }

  process.stderr.write(`${Math.round((performance.now() - t0) / 1_000)}s quiet\n`);
  // Quiet: no more chaos; let the load stop and every session come to rest.
  nodes = await world.ready(3);
  stopping = true;
  const reader = nodes[0]!;
  const notAtRest: string[] = [];
  for (const sessionId of sessions) {
    await waitFor(
      async () =>
        (await reader.api('GET', `/api/sessions/${sessionId}`)).body.status === 'idle' || undefined,
      `session ${sessionId} at rest`,
      60_000,
    ).catch(async () => {
      const view = await reader.api('GET', `/api/sessions/${sessionId}`);
      const lease = await world.lease(sessionId);
      notAtRest.push(
        `${sessionId}: not at rest 60 s after the chaos (${JSON.stringify(view.body)}; lease ${JSON.stringify(lease)})`,
      );
    });
    // Its follower has read the whole log before it is closed.
    const last = (await world.storedEvents(sessionId)).length;
    await waitFor(
      () => Promise.resolve((seenSoFar(sessionId).at(-1)?.seq ?? 0) >= last || undefined),
      `the follower of ${sessionId} at seq ${last}`,
      30_000,
    ).catch(() => undefined);
    open.get(sessionId)?.close();
  }
  await Promise.all(workers);

  const problems: string[] = [...notAtRest];
  let lostSeen = 0;
  let clientGaps = 0;
  let staleWrites = 0;
  let notDurable = 0;
  let unended = 0;
  let stillWriting = 0;
  let streamProblems = 0;
  let storedEvents = 0;
  for (const sessionId of sessions) {
    const stored = await world.storedEvents(sessionId);
    storedEvents += stored.length;
    const inStream = await checkStream(world, sessionId);
    streamProblems += inStream.length;
    problems.push(...inStream.map((p) => `${sessionId}: ${p}`));
    // From the Stream itself: an HTTP page holds at most 1,000 events.
    const ids = new Map(stored.map((e) => [e.seq, e.id]));
    const events = seen.get(sessionId) ?? [];
    events.forEach((event, i) => {
      if (ids.get(event.seq) !== event.id) {
        lostSeen++;
        problems.push(
          `${sessionId}: a client saw seq ${event.seq} (${event.id}), the log does not hold it`,
        );
      }
      if (event.seq !== i + 1) clientGaps++;
    });
    const byRun = new Map<string, typeof stored>();
    for (const event of stored) {
      if (event.runId !== undefined)
        byRun.set(event.runId, [...(byRun.get(event.runId) ?? []), event]);
    }
    for (const [runId, own] of byRun) {
      const end = own.findIndex(isTerminal);
      if (end < 0) {
        unended++;
        const record = await reader.api('GET', `/api/runs/${runId}`);
        problems.push(
          `${sessionId}: run ${runId} has no end in the log (record ${String(record.body.status)}; last ${own
            .slice(-3)
            .map((e) => e.type)
            .join(', ')})`,
        );
      } else if (end < own.length - 1) {
        staleWrites += own.length - 1 - end;
        problems.push(
          `${sessionId}: run ${runId} logged ${own
            .slice(end + 1)
            .map((e) => e.type)
            .join(', ')} after its end`,
        );
      }
    }
    // At rest nothing writes: a seq that still moves is a run nobody shows (or a late writer).
    const later = await world.storedLog(sessionId);
    if (later.seqKey !== stored.length) {
      stillWriting++;
      problems.push(
        `${sessionId}: at rest, its seq still moved from ${stored.length} to ${later.seqKey}`,
      );
    }
    for (const runId of accepted.get(sessionId) ?? []) {
      if (!stored.some((e) => e.type === 'user.message' && e.runId === runId)) notDurable++;
    }
  }
  const report = {
    seconds: Math.round((performance.now() - t0) / 1_000),
    seed: Number(values.seed),
    instancesStarted: world.nodes.length,
    sessions: sessionCount,
    storedEvents,
    ...counts,
    eventsLostThatAClientSaw: lostSeen,
    duplicateOrGappedSeq: streamProblems + clientGaps,
    staleWritesAccepted: staleWrites,
    acceptedNotDurable: notDurable,
    runsWithoutEnd: unended,
    sessionsStillWritingAtRest: stillWriting,
    sessionsNotAtRest: notAtRest.length,
    problems: problems.slice(0, 20),
  };
  console.log(JSON.stringify(report, null, 2));
  process.exitCode =
    lostSeen +
      streamProblems +
      clientGaps +
      staleWrites +
      notDurable +
      unended +
      stillWriting +
      notAtRest.length ===
    0
      ? 0
      : 1;
} finally {
  stopping = true;
  await world.close();
  await redis.stop();
}
