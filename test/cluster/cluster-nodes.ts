/**
 * Cluster nodes in one process: each is a ClusterInstance on the scene's private Redis with a
 * real local runtime (its event log the instance's Redis log, its session and run records the
 * Redis stores, its history and inbox in its own SQLite file), the service's local session
 * access, and the cluster session access around it. The agent is the test's (the LLM is the
 * only mock).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { SimulatedClock } from 'xstate';
import type { ClusterSessionAccessOptions } from '../../src/cluster/cluster-access-options.js';
import type { ClusterInstance } from '../../src/cluster/cluster-instance.js';
import type { ClusterInstanceOptions } from '../../src/cluster/cluster-options.js';
import {
  createClusterSessionAccess,
  type ClusterSessionAccess,
} from '../../src/cluster/cluster-session-access.js';
import { createSafePointRecorder } from '../../src/cluster/failover-resume.js';
import { createRedisRunRecords } from '../../src/cluster/redis-run-records.js';
import { createRedisSessionRecords } from '../../src/cluster/redis-session-records.js';
import {
  abandonSession,
  createHandoffFilter,
  rebuildSession,
  toHandoffAccess,
  type HandoffDeps,
} from '../../src/cluster/session-handoff.js';
import type { EventLog, RunplaneEvent, SessionKey } from '../../src/events/event-log.js';
import type { Agent } from '../../src/run/agent.js';
import { createRuntime } from '../../src/runtime/create-runtime.js';
import type { Runtime } from '../../src/runtime/runtime-types.js';
import { createTokenAuthenticator } from '../../src/server/auth.js';
import { createServiceApp, type Service } from '../../src/server/service-app.js';
import { openSqliteDatabase } from '../../src/stores/sqlite/database.js';
import { createSqliteIdempotencyKeys } from '../../src/stores/sqlite/idempotency-keys.js';
import { createSqliteInbox } from '../../src/stores/sqlite/inbox.js';
import { createSqliteSessionStore } from '../../src/stores/sqlite/session-store.js';
import type { ClusterScene } from './cluster-helpers.js';

/** One instance of the cluster with its runtime. */
export interface ClusterNode {
  readonly cluster: ClusterInstance;
  readonly access: ClusterSessionAccess;
  readonly runtime: Runtime;
  /** The instance's (simulated) clock: leases, renews, answer polls, command timeouts. */
  readonly clock: SimulatedClock;
  /** The inputs the agent started with on this node, in order. */
  readonly started: string[];
  /** Every event this node's runtime appended (Redis may have refused it), with the fence held then. */
  readonly appended: Array<{ readonly fence: number | undefined; readonly event: RunplaneEvent }>;
  /** Each time this node took a session (with `failover`): its fence and the `seq` Redis held then. */
  readonly grants: Array<{
    readonly key: SessionKey;
    readonly fence: number;
    readonly seq: number;
  }>;
  /** The node's HTTP service (`app.request`), which takes {@link clusterNodeToken} as alice's. */
  readonly app: Service['app'];
  /** Stops the access and the instance without releasing leases (they expire in Redis). */
  die(): Promise<void>;
}

/** The bearer token of owner `alice` on every node's {@link ClusterNode.app}. */
export const clusterNodeToken = 'cluster-node-token';

export interface NodeOptions {
  readonly instance?: Omit<ClusterInstanceOptions, 'redis' | 'instanceId' | 'clock'> & {
    /** The instance's connection. @default a fresh one to the private Redis */
    readonly redis?: ClusterInstanceOptions['redis'];
  };
  readonly access?: Omit<ClusterSessionAccessOptions, 'cluster' | 'local' | 'runtime'>;
  /** The agent of every run. @default one that runs until cancelled, recording its inputs */
  readonly agent?: Agent<string, unknown>;
  /** The runtime's global slot bound (`maxConcurrentRuns`). @default unlimited */
  readonly maxConcurrentRuns?: number;
  /**
   * Wires the session handoff as `runplane serve --redis` does (`serve-cluster.ts`): taking a
   * session rebuilds it (`rebuildSession`, the failover policy `mark`), losing one abandons it
   * (`abandonSession`), the runtime writes through the handoff filter and accepted cancels are
   * recorded on their runs. @default undefined (no rebuild: the session records load as they are)
   */
  readonly failover?: 'mark' | 'resume';
  /**
   * With `failover: 'resume'`: the agent is wrapped to record its runs' safe points as
   * `runplane serve --redis` does (`failover-resume.ts`), the sessions are created with
   * `failover: 'resume'` by {@link createCommand}'s caller, and a run gets this many attempts.
   * @default 3
   */
  readonly failoverMaxAttempts?: number;
  /** Where the failover recorder's lines go (a state over the cap). @default dropped */
  readonly log?: (line: string) => void;
}

/** The event log `log`, recording each append that it took with the fence held at the time. */
function recordingLog(
  log: EventLog,
  fenceOf: (key: SessionKey) => number | undefined,
  appended: ClusterNode['appended'],
): EventLog {
  const recording: EventLog = Object.create(log) as EventLog;
  recording.append = (ctx, key, event) => {
    const fence = fenceOf(key);
    const logged = log.append(ctx, key, event);
    appended.push({ fence, event: logged });
    return logged;
  };
  return recording;
}

/**
 * An agent that runs until its run is cancelled (an LLM call that never ends), recording each
 * input it starts with; an input `ask:<tool use id>` first asks to approve a `clock` call.
 */
const blockingAgent = (started: string[]): Agent<string, unknown> => ({
  execute: (input: string | { resume: { step: number; text: string } }, ctx) =>
    new Promise((_resolve, reject) => {
      if (typeof input !== 'string') {
        // A failover resume: the state of the last attempt's safe point.
        started.push(`resume:${input.resume.text}:${input.resume.step}`);
        ctx.safePoint('afterChatModel', { step: input.resume.step + 1, text: input.resume.text });
      } else {
        started.push(input);
        // A safe point at once, so a `resume` session's run has a recorded state.
        ctx.safePoint('afterChatModel', { step: 1, text: input });
      }
      if (typeof input === 'string' && input.startsWith('ask:')) {
        const request = { toolUseId: input.slice(4), name: 'clock', args: { tz: 'UTC' } };
        ctx.requestApproval(request).catch(() => undefined); // withdrawn by the cancel
      }
      const stop = () => reject(new Error(`cancelled: ${String(ctx.signal.reason)}`));
      ctx.signal.addEventListener('abort', stop, { once: true });
    }),
});

/** Call inside a `describe`: nodes are closed after each test and their files removed. */
export function useClusterNodes() {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(() => closeAll());

  /** Closes the nodes made so far now (as after the test): a property closes each schedule's. */
  const closeAll = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  };
  const node = (
    scene: ClusterScene,
    instanceId: string,
    options: NodeOptions = {},
  ): ClusterNode => {
    const dir = mkdtempSync(join(tmpdir(), `runplane-cluster-${instanceId}-`));
    const database = openSqliteDatabase({ path: join(dir, 'runplane.db') });
    const clock = new SimulatedClock();
    let handoff: HandoffDeps | undefined;
    const cluster = scene.instance(instanceId, {
      ...options.instance,
      clock,
      onLost: (key, error) => {
        scene.lost.push(error);
        options.instance?.onLost?.(key, error);
        if (handoff !== undefined) void abandonSession(handoff, key).catch(() => undefined);
      },
    });
    const started: string[] = [];
    const appended: ClusterNode['appended'] = [];
    const grants: ClusterNode['grants'] = [];
    const runs = createRedisRunRecords(cluster);
    const filter =
      options.failover === undefined ? undefined : createHandoffFilter(cluster.eventLog, runs);
    const runtime = createRuntime({
      unwindTimeoutMs: 1_000,
      maxConcurrentRuns: options.maxConcurrentRuns,
      stores: {
        eventLog: recordingLog(
          filter?.eventLog ?? cluster.eventLog,
          (k) => cluster.fenceOf(k),
          appended,
        ),
        sessionStore: createSqliteSessionStore({ database }),
        inbox: createSqliteInbox({ database }),
      },
      reportError: () => undefined,
    });
    const sessions = createRedisSessionRecords(cluster);
    if (filter !== undefined) {
      const service = () => built;
      handoff = {
        cluster,
        runtime,
        service,
        runs,
        sessions,
        filter,
        failoverMaxAttempts: options.failoverMaxAttempts ?? 3,
      };
    }
    const agent = options.agent ?? blockingAgent(started);
    const recorder =
      options.failover === 'resume'
        ? createSafePointRecorder({
            cluster,
            sessions,
            log: options.log ?? (() => undefined),
            cutRun: () => undefined,
          })
        : undefined;
    const deps = handoff;
    const onAcquired =
      deps === undefined
        ? undefined
        : async (key: SessionKey) => {
            const fence = cluster.fenceOf(key)!;
            grants.push({ key, fence, seq: cluster.eventLog.lastSeq({}, key) });
            await rebuildSession(deps, key);
          };
    let access: ClusterSessionAccess | undefined;
    const built = createServiceApp({
      runtime,
      agent: recorder === undefined ? agent : recorder.wrap(agent),
      sessions,
      runs: filter?.runs ?? runs,
      authenticate: createTokenAuthenticator(new Map([[clusterNodeToken, 'alice']])),
      idempotencyKeys: createSqliteIdempotencyKeys({ database }),
      reportError: () => undefined,
      sessionAccess: (local) =>
        (access = createClusterSessionAccess({
          cluster,
          local:
            filter === undefined ? local : toHandoffAccess(local, cluster, runs, runtime.clock),
          runtime,
          ...options.access,
          ...(onAcquired === undefined ? {} : { onAcquired }),
        })),
    });
    let dead = false;
    const die = async () => {
      if (dead) return;
      dead = true;
      await access!.close();
      await cluster.close();
    };
    cleanups.push(async () => {
      built.close();
      await runtime.shutdown({ graceMs: 0 }).catch(() => undefined);
      await die();
      database.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return {
      cluster,
      access: access!,
      runtime,
      clock,
      started,
      appended,
      grants,
      app: built.app,
      die,
    };
  };
  return Object.assign(node, { closeAll });
}

/** The `session.create` command of `key` with the default settings. */
export const createCommand = (key: SessionKey, failover?: 'mark' | 'resume') =>
  ({
    type: 'session.create',
    ...key,
    settings: failover === undefined ? {} : { failover },
  }) as const;

/** A `session.apply_events` command of one `user.message`. */
export const messageCommand = (key: SessionKey, text: string) =>
  ({
    type: 'session.apply_events',
    ...key,
    events: [{ type: 'user.message', payload: { text } }],
  }) as const;

/** A `session.apply_events` command of one `user.interrupt` of `runId` (immediate). */
export const cancelCommand = (key: SessionKey, runId: string) =>
  ({
    type: 'session.apply_events',
    ...key,
    events: [{ type: 'user.interrupt', payload: { run_id: runId } }],
  }) as const;

/** The `run_id` a one-message command's answer gives. */
export const runIdOf = (answer: { results: ReadonlyArray<Record<string, unknown>> }) =>
  String(answer.results[0]?.run_id);
