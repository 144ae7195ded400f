/**
 * The invariants of the multi-instance schedule model (`cluster-schedules.property.test.ts`,
 * docs/architecture.md §9c): how the model reads a session's Stream from Redis, waits until the
 * nodes are quiet, and checks one writer, growing fences, one running run, a log equal to the
 * state (attempts included), fenced cancels, refused stale writes, durable answers, and no
 * attempt on two instances at once.
 */
import type { SessionKey } from '../../src/events/event-log.js';
import { pollUntil, type ClusterScene } from './cluster-helpers.js';
import type { ClusterNode } from './cluster-nodes.js';

/** The model's session. */
export const key: SessionKey = { ownerId: 'alice', sessionId: 's1' };
/** The model's nodes. */
export const names = ['A', 'B', 'C'];
/** The attempts a run gets in the `resume` model (a low bound, so schedules reach it). */
export const maxAttempts = 3;

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

export const rank: Record<string, number> = {
  CREATED: 0,
  QUEUED: 1,
  RUNNING: 2,
  COMPLETED: 3,
  FAILED: 3,
  CANCELLED: 3,
};

/** Breaks the invariant named `name` with what was seen. */
export const broken = (name: string, detail: unknown): never => {
  throw new Error(`[${name}] ${canonical(detail)}`);
};

/** Expires the session's lease in Redis now and waits until Redis dropped it. */
export async function expireLease(scene: ClusterScene) {
  await scene.admin.pexpire(scene.keys.lease, 1);
  await pollUntil(
    async () => (await scene.admin.exists(scene.keys.lease)) === 0,
    'the lease to expire',
  );
}

/** The session's Stream, with each run's last `run.status`. */
export async function readLog(scene: ClusterScene) {
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
export async function settle(scene: ClusterScene, nodes: ClusterNode[], state: string[]) {
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
export async function check(
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
export async function checkAttempts(
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
