/**
 * The failover policy `resume` of a cluster (README "Cluster", docs/architecture.md §9c "Moving
 * a lease"): what the holder records while a run of a `resume` session runs, and what a drain
 * does to such a run. The takeover itself (a new holder resuming the run) is
 * `session-handoff.ts`'s `rebuildSession`.
 *
 * - **Recording**: the service's agent is wrapped ({@link createSafePointRecorder}); each
 *   `ctx.safePoint(kind, state)` of a top-level run of a `resume` session writes
 *   `resumeState: {kind, state, at, seq}` on the run's record (`run.merge`) through the session's
 *   fenced write-behind, so it reaches Redis in order with the run's events. A state whose JSON
 *   is over {@link maxResumeStateBytes} is not recorded: the run's recorded state is cleared
 *   (it falls back to `mark`) and the serve log says so once per run. Before the run saves its
 *   turn to the session history, the state is cleared too: a next holder then marks the run
 *   rather than redo a turn the history already holds.
 * - **Drain** ({@link SafePointRecorder.cut}): the run is cut at its next safe point: the state
 *   is recorded, the run detached (its later writes refused, its history not saved) and
 *   cancelled here, so its record and log leave it RUNNING for the next holder to resume.
 *
 * @module
 * @internal
 */
import type { SessionKey } from '../events/event-log.js';
import type { Agent, RunContext } from '../run/agent.js';
import type { SessionRecords } from '../stores/session-records.js';
import type { SessionHistory } from '../stores/session-store.js';
import type { ClusterInstance } from './cluster-instance.js';

/** The run record field of the last recorded safe point (JSON `{kind, state, at}`, or `null`). */
export const resumeStateField = 'resumeState';

/** The run record field of the run's attempt number (absent: the first attempt, 1). */
export const attemptField = 'attempt';

/**
 * The largest safe-point state recorded, in bytes of its JSON (256 KiB): a larger one is not
 * recorded and the run falls back to `mark` (README "Cluster").
 */
export const maxResumeStateBytes = 256 * 1024;

/** The default of `--failover-max-attempts`: how many attempts a run gets in all. */
export const defaultFailoverMaxAttempts = 3;

/**
 * A recorded safe point: its kind, the agent's state, when (clock ms), and the session's last
 * `seq` then (the run's events up to it are what the state holds; absent in a state recorded
 * before it was kept).
 */
export interface RecordedSafePoint {
  readonly kind: string;
  readonly state: unknown;
  readonly at: number;
  readonly seq?: number | undefined;
}

/** What the recorder needs. */
export interface SafePointRecorderDeps {
  readonly cluster: Pick<ClusterInstance, 'write' | 'eventLog'>;
  /** The holder's session records (the session's failover policy is read at each safe point). */
  readonly sessions: Pick<SessionRecords, 'get'>;
  /** Where "not recorded" is said, once per run. */
  readonly log: (line: string) => void;
  /** Detaches and cancels a run cut by a drain (its writes refused from then on). */
  readonly cutRun: (key: SessionKey, runId: string) => void;
}

/** @internal The wrapper of the service's agent, and the drain's cut. */
export interface SafePointRecorder {
  /** The agent whose runs record their safe points (see the module's remarks). */
  wrap<TInput, TOutput>(agent: Agent<TInput, TOutput>): Agent<TInput, TOutput>;
  /**
   * Cuts the run at its next safe point (a drain): resolves `true` once its state is recorded
   * and the run detached and cancelled, `false` when `signal` aborts first (the cut is then
   * withdrawn) or the run ends first.
   */
  cut(
    key: SessionKey,
    runId: string,
    ended: Promise<unknown>,
    signal: AbortSignal,
  ): Promise<boolean>;
}

/**
 * @internal Creates the recorder of a cluster instance (see the module's remarks).
 */
export function createSafePointRecorder(deps: SafePointRecorderDeps): SafePointRecorder {
  /** Runs whose state went over the cap: nothing more is recorded for them here. */
  const tooLarge = new Set<string>();
  /** Runs a drain waits to cut at their next safe point → its resolver. */
  const cutting = new Map<string, (cut: boolean) => void>();
  /** Runs cut here: their history is not saved. */
  const cut = new Set<string>();

  const write = (key: SessionKey, runId: string, value: RecordedSafePoint | null) => {
    try {
      deps.cluster.write(key, { op: 'run.merge', runId, fields: { [resumeStateField]: value } });
      return true;
    } catch {
      // The session is no longer held here: the run is being abandoned, its writes refused.
      return false;
    }
  };

  const lastSeq = (key: SessionKey) => {
    try {
      return deps.cluster.eventLog.lastSeq({}, key);
    } catch {
      return undefined; // the session is no longer held here: the write below is refused too
    }
  };

  const record = (ctx: RunContext, kind: string, state: unknown) => {
    const key = { ownerId: ctx.ownerId, sessionId: ctx.sessionId };
    if (cut.has(ctx.runId) || tooLarge.has(ctx.runId)) return;
    if (deps.sessions.get(key.ownerId, key.sessionId)?.failover !== 'resume') return;
    const value: RecordedSafePoint = { kind, state, at: ctx.clock.now(), seq: lastSeq(key) };
    const bytes = Buffer.byteLength(JSON.stringify(value));
    if (bytes > maxResumeStateBytes) {
      tooLarge.add(ctx.runId);
      write(key, ctx.runId, null);
      deps.log(
        `runplane serve: run ${ctx.runId}: its safe-point state is ${bytes} bytes, over the ${maxResumeStateBytes}-byte cap: not recorded, so it is marked (failover mark), not resumed, if its holder is lost`,
      );
      return;
    }
    write(key, ctx.runId, value);
    const resolve = cutting.get(ctx.runId);
    if (resolve === undefined) return;
    cutting.delete(ctx.runId);
    cut.add(ctx.runId);
    // Detached and cancelled before the run's own safe point is reported, which then throws
    // the cancel into the agent: nothing the run does after its recorded state is kept here
    // (not a drained hint, not a history save).
    deps.cutRun(key, ctx.runId);
    resolve(true);
  };

  const historyOf = (ctx: RunContext, history: SessionHistory): SessionHistory => ({
    load: () => history.load(),
    append(messages) {
      // Cut by a drain: the next holder resumes the turn, carrying it.
      if (cut.has(ctx.runId)) return Promise.resolve();
      // Saved: a next holder must not redo this turn, so it marks the run instead.
      if (deps.sessions.get(ctx.ownerId, ctx.sessionId)?.failover === 'resume') {
        write({ ownerId: ctx.ownerId, sessionId: ctx.sessionId }, ctx.runId, null);
      }
      return history.append(messages);
    },
  });

  return {
    wrap<TInput, TOutput>(agent: Agent<TInput, TOutput>): Agent<TInput, TOutput> {
      return {
        execute(input, ctx) {
          if (ctx.parentRunId !== undefined) return agent.execute(input, ctx);
          // A copy of the context's own properties (its live accessors read the run through
          // `this`, by a symbol the copy keeps), so an agent may still spread or destructure it.
          const recording = Object.defineProperties(
            {},
            {
              ...Object.getOwnPropertyDescriptors(ctx),
              safePoint: {
                value: (kind: Parameters<RunContext['safePoint']>[0], state?: unknown) => {
                  record(ctx, kind, state);
                  ctx.safePoint(kind, state);
                },
                enumerable: true,
              },
              history: {
                get: () => historyOf(ctx, ctx.history),
                enumerable: true,
                configurable: true,
              },
            },
          ) as RunContext;
          const done = agent.execute(input, recording);
          const forget = () => {
            tooLarge.delete(ctx.runId);
            cut.delete(ctx.runId);
          };
          done.then(forget, forget);
          return done;
        },
      };
    },

    cut(key, runId, ended, signal) {
      if (deps.sessions.get(key.ownerId, key.sessionId)?.failover !== 'resume') {
        return Promise.resolve(false);
      }
      return new Promise<boolean>((resolve) => {
        const settle = (value: boolean) => {
          cutting.delete(runId);
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        };
        const onAbort = () => settle(false);
        if (signal.aborted) return settle(false);
        cutting.set(runId, settle);
        signal.addEventListener('abort', onAbort, { once: true });
        void ended.then(
          () => settle(false),
          () => settle(false),
        );
      });
    },
  };
}

/** @internal Reads a recorded safe point from its run record field (`null`, absent or bad: none). */
export function parseRecordedSafePoint(json: string | null): RecordedSafePoint | undefined {
  if (json === null) return undefined;
  try {
    const value = JSON.parse(json) as Partial<RecordedSafePoint> | null;
    if (value === null || typeof value !== 'object' || typeof value.kind !== 'string') {
      return undefined;
    }
    const seq = Number.isInteger(value.seq) ? value.seq : undefined;
    return { kind: value.kind, state: value.state, at: Number(value.at), seq };
  } catch {
    return undefined;
  }
}

/** @internal Reads a run's attempt number (absent or bad: 1). */
export function parseAttempt(json: string | null): number {
  const value = json === null ? NaN : Number(json);
  return Number.isInteger(value) && value >= 1 ? value : 1;
}
