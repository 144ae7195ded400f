/**
 * A fast-check model of multi-instance schedules with runs (docs/architecture.md, "Cluster on
 * Redis", phase 4): three nodes in one process (a ClusterInstance, a real runtime, the service
 * and the cluster's session access each, wired with the failover policy `mark` as `runplane
 * serve --redis` wires it) against one real private Redis, one session, random steps: a
 * `user.message` sent on a node (strategy enqueue), a `user.interrupt {run_id}` of a known run
 * on a node (immediate or at a safe point), a node's agent finishing its run, a node dying (its
 * lease expires in Redis), the holder paused past its lease (it keeps believing it holds) and
 * woken (a renew, or its local deadline). After every step, once the nodes are quiet, Redis and the nodes must show:
 * - one writer: only the holder of the latest fence has the session in its mirror (a paused
 *   node may still believe in an older one, never a newer one), and fences only grow;
 * - at most one run RUNNING in the log's replay;
 * - the log equals the state: each run's `run.status` events are a path of the run machine
 *   (CREATED → QUEUED → RUNNING → one terminal), `seq` is gap-free, a finished record agrees;
 * - a cancel affects only its run; an immediate cancel accepted ends its run CANCELLED, and a
 *   safe-point cancel accepted (pending while the run goes on) never lets it end `owner_lost`;
 * - no event written under a fence lands after a newer fence was granted (the Stream against
 *   the grants' order), and a paused node's writes are refused;
 * - accepted means durable: every run a `user.message` answer accepted is in Redis's log.
 *
 * Leases expire only when a step makes them (a long TTL, then `PEXPIRE` and a poll of Redis);
 * the nodes' clocks are simulated and move only when a paused node wakes (its deadline). A
 * paused node's writes (a message, its agent finishing) reach Redis and are refused there; an
 * interrupt on it lets its overdue deadline fire first, except in the `strict` test below.
 */
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { SessionKey } from '../../src/events/event-log.js';
import type { SessionCommand } from '../../src/server/session-access.js';
import { createScriptedAgent, resolveRaceRuns } from '../../src/testing/index.js';
import { skipRedis } from '../redis/redis-server.js';
import { pollUntil, useCluster, type ClusterScene } from './cluster-helpers.js';
import {
  createCommand,
  messageCommand,
  runIdOf,
  useClusterNodes,
  type ClusterNode,
} from './cluster-nodes.js';

const key: SessionKey = { ownerId: 'alice', sessionId: 's1' };
const names = ['A', 'B', 'C'];
const ttlMs = 60_000; // leases expire only when a step makes them

/** An immediate cancel, or one at the agent's next safe point (pending while the run goes on). */
type CancelMode = 'immediate' | 'any_safe_point';

/** A `user.interrupt` of `runId` in `mode`. */
const interruptCommand = (runId: string, mode: CancelMode) =>
  ({
    type: 'session.apply_events',
    ...key,
    events: [{ type: 'user.interrupt', payload: { run_id: runId, mode } }],
  }) as const;

type Step =
  | { kind: 'send'; node: number }
  | { kind: 'interrupt'; node: number; run: number; mode: CancelMode }
  | { kind: 'finish'; node: number }
  | { kind: 'die'; node: number }
  | { kind: 'pause' }
  | { kind: 'wake'; via: 'renew' | 'deadline' }
  /**
   * The agent of a node executing its session's active run (the holder, or a paused one that
   * still believes it holds) reaches a safe point: recorded in a `resume` session.
   */
  | { kind: 'safepoint' };

/** A step as the counterexample prints it: `send on B`, `interrupt run#2 on C`, … */
const label = (step: Step): string => {
  const on = 'node' in step ? ` on ${names[step.node]}` : '';
  if (step.kind === 'interrupt') return `interrupt run#${step.run} (${step.mode})${on}`;
  if (step.kind === 'wake') return `wake the paused holder (${step.via})`;
  if (step.kind === 'pause') return 'pause the holder past its lease';
  return `${step.kind}${on}`;
};
const named = (step: Step): Step => Object.assign(step, { [fc.toStringMethod]: () => label(step) });

const node = fc.nat({ max: names.length - 1 });
const stepsOf = (failover: Failover): fc.Arbitrary<Step> =>
  fc
    .oneof(
      { weight: 6, arbitrary: fc.record({ kind: fc.constant('send' as const), node }) },
      {
        weight: 3,
        arbitrary: fc.record({
          kind: fc.constant('interrupt' as const),
          node,
          run: fc.nat({ max: 15 }),
          mode: fc.constantFrom('immediate' as const, 'any_safe_point' as const),
        }),
      },
      { weight: 4, arbitrary: fc.record({ kind: fc.constant('finish' as const), node }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('die' as const), node }) },
      { weight: 2, arbitrary: fc.record({ kind: fc.constant('pause' as const) }) },
      {
        weight: 2,
        arbitrary: fc.record({
          kind: fc.constant('wake' as const),
          via: fc.constantFrom('renew' as const, 'deadline' as const),
        }),
      },
      // Only a `resume` session records safe points: the `mark` model's steps are as before.
      {
        weight: failover === 'resume' ? 4 : 0,
        arbitrary: fc.record({ kind: fc.constant('safepoint' as const) }),
      },
    )
    .map(named);

/** The failover policy of the model's session (and of its nodes' wiring). */
type Failover = 'mark' | 'resume';
/** The attempts a run gets in the `resume` model (a low bound, so schedules reach it). */
const maxAttempts = 3;

/** A Stream entry as the model reads it. */
interface Logged {
  readonly seq: number;
  readonly type: string;
  readonly runId: string | undefined;
  readonly payload: Record<string, unknown>;
  /** The event's JSON with sorted keys: matches the append that wrote it. */
  readonly content: string;
}

const canonical = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)))
      : v,
  );
const contentOf = (event: {
  type: string;
  runId?: string | undefined;
  payload?: unknown;
  at?: unknown;
}) =>
  canonical({ type: event.type, runId: event.runId, payload: event.payload ?? {}, at: event.at });

const rank: Record<string, number> = {
  CREATED: 0,
  QUEUED: 1,
  RUNNING: 2,
  COMPLETED: 3,
  FAILED: 3,
  CANCELLED: 3,
};

/** Breaks the invariant named `name` with what was seen. */
const broken = (name: string, detail: unknown): never => {
  throw new Error(`[${name}] ${canonical(detail)}`);
};

/**
 * Schedules that once broke the wiring, run first every time. A node that lost the session
 * (its runs detached) and took it back could neither mark nor requeue those runs: the handoff
 * filter refused their writes for good, so the rebuild failed and the lease went back.
 */
const regressions: Step[][] = [
  [
    { kind: 'send', node: 0 },
    { kind: 'pause' },
    { kind: 'send', node: 0 },
    { kind: 'interrupt', node: 0, run: 0, mode: 'immediate' },
  ],
].map((schedule) => schedule.map((s) => named(s as Step)));

/**
 * `resume` schedules run first every time: a run resumed until its attempts run out (two deaths
 * and two pauses of its holders, the last taking it over marking it), and a paused holder whose
 * attempt finishes after the next holder resumed the run (its writes refused).
 */
const resumeExamples: Step[][] = [
  [
    { kind: 'send', node: 0 },
    { kind: 'safepoint' },
    { kind: 'die', node: 0 },
    { kind: 'send', node: 1 },
    { kind: 'safepoint' },
    { kind: 'pause' },
    { kind: 'send', node: 2 },
    { kind: 'safepoint' },
    { kind: 'wake', via: 'renew' },
    { kind: 'pause' },
    { kind: 'send', node: 1 },
    { kind: 'finish', node: 1 },
  ],
  [
    { kind: 'send', node: 0 },
    { kind: 'safepoint' },
    { kind: 'pause' },
    { kind: 'send', node: 1 },
    { kind: 'finish', node: 0 },
    { kind: 'wake', via: 'deadline' },
    { kind: 'safepoint' },
    { kind: 'finish', node: 1 },
  ],
].map((schedule) => schedule.map((s) => named(s as Step)));

describe.skipIf(skipRedis)('multi-instance schedules with runs (fast-check, real Redis)', () => {
  const cluster = useCluster();
  const makeNode = useClusterNodes();

  let connections: Redis[] | undefined;

  /**
   * Runs one schedule on three fresh nodes and checks every invariant after each step.
   * `strict`: a paused node takes an interrupt before its overdue deadline timer fires (the test
   * below); otherwise its deadline fires first, as the timers phase usually runs first.
   */
  const runSchedule = async (
    schedule: Step[],
    counted: () => void,
    strict: boolean,
    failover: Failover = 'mark',
  ) => {
    connections ??= names.map(() => cluster.connect());
    try {
      await scheduleOn(connections, schedule, counted, strict, failover);
    } finally {
      await makeNode.closeAll();
    }
  };

  it('keeps one writer, growing fences, one running run, a log equal to the state, fenced cancels, refused stale writes and durable answers', async () => {
    const numRuns = resolveRaceRuns(undefined, 25);
    let schedules = 0;
    let steps = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(stepsOf('mark'), { minLength: 1, maxLength: 24, size: 'max' }),
        async (schedule) => {
          schedules++;
          await runSchedule(schedule, () => steps++, false);
        },
      ),
      { numRuns, examples: regressions.map((schedule) => [schedule]) },
    );
    console.info(`cluster schedules: ${schedules} schedules, ${steps} steps checked`);
  }, 120_000);

  it('with failover resume: the same invariants, a log whose attempts follow the state (run.resumed 2…maxAttempts while RUNNING, then owner_lost with its attempts), and no attempt on two instances at once', async () => {
    const numRuns = resolveRaceRuns(undefined, 25);
    let schedules = 0;
    let steps = 0;
    let resumed = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(stepsOf('resume'), { minLength: 1, maxLength: 24, size: 'max' }),
        async (schedule) => {
          schedules++;
          await runSchedule(schedule, () => steps++, false, 'resume');
          resumed += lastResumed;
        },
      ),
      { numRuns, examples: resumeExamples.map((schedule) => [schedule]) },
    );
    // The examples alone resume four attempts: a model that never resumes fails here.
    expect(resumed).toBeGreaterThanOrEqual(4);
    console.info(
      `cluster schedules (resume): ${schedules} schedules, ${steps} steps checked, ${resumed} attempts resumed`,
    );
  }, 120_000);

  /**
   * Was a gap: a command whose effect writes nothing (a cancel of a run not live on the node)
   * was answered from the node's memory while it still believed it held the session, so a
   * paused holder woken by the request before its deadline timer answered `not_found` for a
   * run RUNNING on B. Now every command applied on its holder carries a fenced empty write
   * (cluster-session-access.ts, `applyHere`): Redis refuses it, and the node answers
   * `session_moved` and gives the session up.
   */
  it('a paused holder woken by a cancel that writes nothing does not answer from stale state', async () => {
    const schedule: Step[] = [
      { kind: 'pause' },
      { kind: 'send', node: 1 },
      { kind: 'interrupt', node: 0, run: 0, mode: 'immediate' },
    ];
    await runSchedule(schedule.map(named), () => undefined, true);
  });

  /** How many `run.resumed` the last schedule logged (a count for the report). */
  let lastResumed = 0;

  async function scheduleOn(
    connections: Redis[],
    schedule: Step[],
    counted: () => void,
    strict: boolean,
    failover: Failover,
  ) {
    const scene = cluster.scene(key);
    const agents = names.map(() => createScriptedAgent<string>());
    const nodes: ClusterNode[] = names.map((name, i) =>
      makeNode(scene, name, {
        failover,
        failoverMaxAttempts: maxAttempts,
        agent: agents[i]!,
        instance: { redis: connections[i]!, leaseTtlMs: ttlMs },
      }),
    );
    let safePoints = 0;
    lastResumed = 0;
    const state: Array<'alive' | 'dead' | 'paused'> = names.map(() => 'alive');
    const known: string[] = [];
    const namedRuns = new Set<string>(); // runs some interrupt step named
    const cancelAccepted = new Set<string>(); // immediate: the run ends CANCELLED
    const cancelPending = new Set<string>(); // at a safe point: never FAILED (owner_lost)
    let lastFence = 0;
    await Promise.all(nodes.map((n) => n.access.ready));
    await nodes[0]!.access.execute(createCommand(key, failover));

    /** A command on a paused node: refused, since the node no longer holds the session. */
    const pausedAnswer = (via: ClusterNode, command: SessionCommand, step: string) =>
      via.access.execute(command).then(
        (answer) => broken('paused-holder-answered', { step, answer }),
        (error: unknown) => {
          const code = (error as { code?: unknown }).code;
          if (code !== 'STALE_FENCE' && code !== 'session_moved') throw error;
        },
      );

    for (const st of schedule) {
      const n = 'node' in st ? nodes[st.node]! : undefined;
      const i = 'node' in st ? st.node : -1;
      if (n !== undefined && state[i] === 'dead') continue; // a dead node takes no requests
      const before = await readLog(scene);
      switch (st.kind) {
        case 'send': {
          const text = `m${known.length}`;
          if (state[i] === 'paused') {
            await pausedAnswer(n!, messageCommand(key, text), label(st));
            state[i] = 'alive'; // it learnt it lost the session
            break;
          }
          const answer = await n!.access.execute(messageCommand(key, text));
          expect(answer.results[0]).toMatchObject({ result: 'accepted' });
          known.push(runIdOf(answer));
          break;
        }
        case 'interrupt': {
          if (known.length === 0) continue;
          const runId = known[st.run % known.length]!;
          namedRuns.add(runId);
          if (state[i] === 'paused' && !strict) {
            n!.clock.increment(ttlMs); // woken: its overdue deadline timer fires first
            await n!.cluster.renew();
            state[i] = 'alive';
          }
          if (state[i] === 'paused') {
            await pausedAnswer(n!, interruptCommand(runId, st.mode), label(st));
            state[i] = 'alive';
            break;
          }
          const answer = await n!.access.execute(interruptCommand(runId, st.mode));
          const result = answer.results[0]?.result;
          const was = before.last.get(runId);
          if (result === 'accepted') {
            if (was !== undefined && rank[was] === 3)
              broken('cancel-of-ended-accepted', { runId, was });
            (st.mode === 'immediate' ? cancelAccepted : cancelPending).add(runId);
          } else if (result !== 'ended') {
            broken('cancel-of-known-run', { runId, result });
          }
          break;
        }
        case 'finish': {
          const runId = n!.runtime.session(key.ownerId, key.sessionId).activeRunId;
          if (runId === undefined || !agents[i]!.isExecuting(runId)) continue;
          agents[i]!.complete(runId, 'done');
          break;
        }
        case 'die': {
          if (state.filter((s) => s !== 'dead').length <= 1) continue;
          const holds = (await scene.admin.get(scene.keys.lease))?.startsWith(`${names[i]}:`);
          await n!.die();
          state[i] = 'dead';
          if (holds === true) await expireLease(scene);
          break;
        }
        case 'pause': {
          const lease = await scene.admin.get(scene.keys.lease);
          const holder = names.findIndex((name) => lease?.startsWith(`${name}:`));
          if (holder < 0 || state[holder] !== 'alive') continue;
          await expireLease(scene); // its clock is still: it keeps believing it holds
          state[holder] = 'paused';
          break;
        }
        case 'safepoint': {
          const at = nodes.findIndex((candidate, c) => {
            const runId = candidate.runtime.session(key.ownerId, key.sessionId).activeRunId;
            return state[c] !== 'dead' && runId !== undefined && agents[c]!.isExecuting(runId);
          });
          if (at < 0) continue;
          const runId = nodes[at]!.runtime.session(key.ownerId, key.sessionId).activeRunId!;
          agents[at]!.safePoint(runId, 'afterChatModel', { step: ++safePoints });
          break;
        }
        case 'wake': {
          const paused = state.indexOf('paused');
          if (paused < 0) continue;
          const woken = nodes[paused]!;
          if (st.via === 'deadline') woken.clock.increment(ttlMs);
          await woken.cluster.renew();
          state[paused] = 'alive';
          if (woken.cluster.fenceOf(key) !== undefined) {
            broken('woken-still-holds', { node: names[paused] });
          }
          break;
        }
      }
      await settle(scene, nodes, state);
      // A paused node that wrote (its agent finished) learnt from the refusal that it lost.
      for (const [p, n] of nodes.entries()) {
        if (state[p] === 'paused' && n.cluster.fenceOf(key) === undefined) state[p] = 'alive';
      }
      counted();
      lastFence = await check(scene, nodes, state, lastFence, {
        known,
        named: namedRuns,
        cancelAccepted,
        cancelPending,
      });
      if (failover === 'resume') lastResumed = await checkAttempts(scene, nodes, agents, state);
    }
  }
});

/** Expires the session's lease in Redis now and waits until Redis dropped it. */
async function expireLease(scene: ClusterScene) {
  await scene.admin.pexpire(scene.keys.lease, 1);
  await pollUntil(
    async () => (await scene.admin.exists(scene.keys.lease)) === 0,
    'the lease to expire',
  );
}

/** The session's Stream, with each run's last `run.status`. */
async function readLog(scene: ClusterScene) {
  const entries = (await scene.admin.xrange(scene.keys.events, '-', '+')) as Array<
    [string, string[]]
  >;
  const events = entries.map(([id, fields]): Logged & { id: string } => {
    const event = JSON.parse(fields[1]!) as {
      seq: number;
      type: string;
      runId?: string;
      payload?: Record<string, unknown>;
    };
    return {
      id,
      seq: event.seq,
      type: event.type,
      runId: event.runId,
      payload: event.payload ?? {},
      content: contentOf(event),
    };
  });
  const last = new Map<string, string>();
  for (const event of events) {
    if (event.type === 'run.status' && event.runId !== undefined) {
      last.set(event.runId, String(event.payload.to));
    }
  }
  return { events, last };
}

/**
 * Waits until the nodes are quiet: every batch of a held session shipped, and nothing new
 * appended or lost over two rounds of the event loop (a bound, not a duration, decides).
 */
async function settle(scene: ClusterScene, nodes: ClusterNode[], state: string[]) {
  let quiet = 0;
  let last = '';
  for (let round = 0; round < 500; round++) {
    await Promise.all(
      nodes.map((n, i) =>
        state[i] === 'dead' ? Promise.resolve() : n.cluster.flushed(key).catch(() => undefined),
      ),
    );
    await new Promise((resolve) => setImmediate(resolve));
    const seen = `${nodes.map((n) => n.appended.length).join()}|${scene.lost.length}|${await scene.admin.get(scene.keys.seq)}`;
    quiet = seen === last ? quiet + 1 : 0;
    last = seen;
    if (quiet >= 2) return;
  }
  throw new Error('the nodes did not settle within 500 rounds');
}

/** Checks every invariant against Redis and the nodes; returns the fence Redis holds. */
async function check(
  scene: ClusterScene,
  nodes: ClusterNode[],
  state: string[],
  lastFence: number,
  seen: {
    known: string[];
    named: Set<string>;
    cancelAccepted: Set<string>;
    cancelPending: Set<string>;
  },
): Promise<number> {
  const [fenceText, lease, seqText] = await scene.admin.mget(
    scene.keys.fence,
    scene.keys.lease,
    scene.keys.seq,
  );
  const fence = Number(fenceText ?? 0);
  const redisFence = fence;
  if (fence < lastFence) broken('fences-only-grow', { fence, lastFence });

  // One writer: a node that is not paused holds the session only under the latest fence, named
  // by the lease; a paused node may believe in an older fence, never a newer one.
  const believers = nodes.flatMap((n, i) => {
    const held = state[i] === 'dead' ? undefined : n.cluster.fenceOf(key);
    if (held === undefined) return [];
    if (held > fence) broken('belief-newer-than-redis', { node: names[i], held, fence });
    if (state[i] === 'alive' && (held !== fence || lease !== `${names[i]}:${held}`)) {
      broken('one-writer', { node: names[i], held, fence, lease });
    }
    return held === fence && lease !== null ? [names[i]] : [];
  });
  if (believers.length > 1) broken('one-writer', { believers, fence, lease });

  const { events, last } = await readLog(scene);
  // seq gap-free: entry ids 1-0…n-0, each event's seq its id, the stored seq the last.
  events.forEach((event, index) => {
    if (event.id !== `${index + 1}-0` || event.seq !== index + 1) {
      broken('seq-gap-free', { index, id: event.id, seq: event.seq });
    }
  });
  if (Number(seqText ?? 0) !== events.length) {
    broken('seq-gap-free', { stored: seqText, entries: events.length });
  }

  // The log equals the state: each run's statuses form a path of the run machine.
  const paths = new Map<string, string[]>();
  for (const event of events) {
    if (event.runId === undefined) continue;
    if (event.type === 'run.status') {
      const path = paths.get(event.runId) ?? ['CREATED'];
      const from = String(event.payload.from);
      const to = String(event.payload.to);
      const at = path[path.length - 1]!;
      if (from !== at || !(rank[to]! > rank[at]!)) {
        broken('run-status-path', { runId: event.runId, path, from, to });
      }
      paths.set(event.runId, [...path, to]);
    }
    if (event.type === 'run.cancelled' && event.payload.cause === 'cancel') {
      if (!seen.named.has(event.runId)) broken('cancel-only-its-run', { runId: event.runId });
    }
  }
  const running = [...last].filter(([, status]) => status === 'RUNNING');
  if (running.length > 1) broken('one-running-run', { running });
  for (const runId of seen.cancelAccepted) {
    if (last.get(runId) !== 'CANCELLED') {
      broken('accepted-cancel-ends-cancelled', { runId, status: last.get(runId) });
    }
  }
  // A safe-point cancel pending when its holder was lost ends the run CANCELLED, not owner_lost.
  for (const runId of seen.cancelPending) {
    if (last.get(runId) === 'FAILED') broken('pending-cancel-not-lost', { runId });
  }

  // A finished record agrees with the log.
  for (const runId of seen.known) {
    const status = await scene.admin.hget(scene.keys.run(runId), 'status');
    const recorded = status === null ? undefined : (JSON.parse(status) as string);
    if (recorded !== undefined && rank[recorded] === 3 && last.get(runId) !== recorded) {
      broken('record-equals-log', { runId, recorded, logged: last.get(runId) });
    }
  }

  // Accepted means durable: every accepted run's `user.message` is in Redis's log.
  const messaged = new Set(
    events.filter((event) => event.type === 'user.message').map((event) => event.runId),
  );
  for (const runId of seen.known) {
    if (!messaged.has(runId)) broken('accepted-means-durable', { runId });
  }

  // No event written under a fence lands after a newer fence was granted.
  const grants = nodes.flatMap((n) => n.grants);
  let previous = 0;
  for (const event of events) {
    const writers = nodes.flatMap((n, i) =>
      n.appended
        .filter((a) => a.event.seq === event.seq && contentOf(a.event) === event.content)
        .map((a) => ({ node: names[i], fence: a.fence ?? 0 })),
    );
    if (writers.length === 0) broken('written-by-nobody', { seq: event.seq, type: event.type });
    // The same event may have been appended under two fences (a paused node's refused copy):
    // the entry is the earliest fence that keeps the Stream's order and the grants'.
    const stale = (fence: number) => grants.some((g) => g.fence > fence && event.seq > g.seq);
    const fences = [...new Set(writers.map((w) => w.fence))].sort((x, y) => x - y);
    const fence = fences.find((f) => f >= previous && !stale(f));
    if (fence === undefined) {
      broken('stale-write-landed', { seq: event.seq, type: event.type, writers, previous, grants });
    }
    previous = fence!;
  }
  return redisFence;
}

/**
 * The `resume` model's invariants: each run's `run.resumed` attempts count 2, 3, … up to
 * `maxAttempts`, each logged while the run is RUNNING in the log (no second start: the
 * run-status path above stays one path); a run marked `owner_lost` after a resume names its
 * attempts; and no attempt runs on two instances at once: of the nodes that are neither dead
 * nor paused, at most one executes a run, and only the holder of the latest fence. Returns how
 * many attempts were resumed.
 */
async function checkAttempts(
  scene: ClusterScene,
  nodes: ClusterNode[],
  agents: ReadonlyArray<{ isExecuting(runId: string): boolean }>,
  state: string[],
): Promise<number> {
  const { events } = await readLog(scene);
  const status = new Map<string, string>();
  const attempts = new Map<string, number>();
  let resumed = 0;
  for (const event of events) {
    if (event.runId === undefined) continue;
    if (event.type === 'run.status') status.set(event.runId, String(event.payload.to));
    if (event.type === 'run.resumed') {
      resumed++;
      const attempt = Number(event.payload.attempt);
      const expected = (attempts.get(event.runId) ?? 1) + 1;
      if (attempt !== expected || attempt > maxAttempts) {
        broken('attempts-count-up', { runId: event.runId, attempt, expected });
      }
      if (status.get(event.runId) !== 'RUNNING') {
        broken('resumed-while-running', { runId: event.runId, status: status.get(event.runId) });
      }
      attempts.set(event.runId, attempt);
    }
    if (event.type === 'run.failed' && event.payload.cause === 'owner_lost') {
      const attempt = attempts.get(event.runId);
      if (attempt !== undefined && event.payload.attempts !== attempt) {
        broken('owner-lost-names-attempts', {
          runId: event.runId,
          attempt,
          payload: event.payload,
        });
      }
    }
  }
  const fence = Number((await scene.admin.get(scene.keys.fence)) ?? 0);
  for (const runId of status.keys()) {
    const executing = nodes.flatMap((n, i) =>
      state[i] === 'alive' && agents[i]!.isExecuting(runId) ? [i] : [],
    );
    if (executing.length > 1) {
      broken('one-attempt-at-a-time', { runId, nodes: executing.map((i) => names[i]) });
    }
    const [only] = executing;
    if (only !== undefined && nodes[only]!.cluster.fenceOf(key) !== fence) {
      broken('attempt-on-holder', { runId, node: names[only], fence });
    }
  }
  return resumed;
}
