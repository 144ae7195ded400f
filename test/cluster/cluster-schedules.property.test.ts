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
 * The same model runs with the failover policy `resume` (a session created with it, the nodes'
 * agents wrapped to record safe points, a step where the node executing the active run reaches
 * a safe point), adding: `run.resumed` attempts count 2, 3, … to `maxAttempts`, each while the
 * run is RUNNING (the run-status path stays one path), an `owner_lost` after them names its
 * attempts, and no attempt runs on two instances at once (only the holder executes a run). The
 * invariants are in `cluster-schedule-invariants.ts`.
 *
 * Leases expire only when a step makes them (a long TTL, then `PEXPIRE` and a poll of Redis);
 * the nodes' clocks are simulated and move only when a paused node wakes (its deadline). A
 * paused node's writes (a message, its agent finishing) reach Redis and are refused there; an
 * interrupt on it lets its overdue deadline fire first, except in the `strict` test below.
 */
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { SessionCommand } from '../../src/server/session-access.js';
import { createScriptedAgent, resolveRaceRuns } from '../../src/testing/index.js';
import { skipRedis } from '../redis/redis-server.js';
import { useCluster } from './cluster-helpers.js';
import {
  broken,
  check,
  checkAttempts,
  expireLease,
  key,
  maxAttempts,
  names,
  rank,
  readLog,
  settle,
} from './cluster-schedule-invariants.js';
import {
  createCommand,
  messageCommand,
  runIdOf,
  useClusterNodes,
  type ClusterNode,
} from './cluster-nodes.js';

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
