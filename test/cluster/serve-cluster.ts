/**
 * A cluster of real `runplane serve --redis` processes over one private `redis-server`
 * (docs/architecture.md §9c "Cluster on Redis"), for the cluster process tests, the cluster
 * bench and the chaos script: instances on free ports with a short lease TTL and the slow
 * scripted demo model, signals to kill, pause and resume one, an in-test TCP proxy to cut one off
 * Redis, and reads of a session's lease, fence and event Stream straight from Redis.
 *
 * Every wait here is on a condition (a printed line, an HTTP answer, an SSE event, a Redis
 * value) with a bound; no sleep decides an outcome.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { toSessionKeys, type SessionKeys } from '../../src/cluster/keys.js';
import { startPrivateRedis, type PrivateRedis } from '../redis/redis-server.js';
import { client, spawnServer, type ServerProcess } from '../server/process-helpers.js';
import { pollUntil } from './cluster-helpers.js';
import { followSession, type Follower } from './sse-follower.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

/** How one instance is started. */
export interface ServeNodeOptions {
  /** `--instance-id`; also names its SQLite file. */
  readonly id: string;
  /** Reach Redis through a {@link TcpProxy} (so the test can cut it off). @default false */
  readonly viaProxy?: boolean;
  /** Start in cluster mode (`--redis`); false starts a plain SQLite instance. @default true */
  readonly cluster?: boolean;
  /** `--chunk-delay-ms` of the demo model. @default the cluster's */
  readonly chunkDelayMs?: number;
  /** Pass `--tokens` (the cluster's token for its owner). @default true */
  readonly tokens?: boolean;
  /** More flags. */
  readonly args?: readonly string[];
  /** Environment variables of the process (`RUNPLANE_TRACE_COMMANDS`, say). */
  readonly env?: Readonly<Record<string, string>>;
}

/** One running `runplane serve` process of a cluster. */
export interface ServeNode {
  readonly id: string;
  readonly url: string;
  readonly process: ServerProcess;
  /** The proxy between this instance and Redis, when started `viaProxy`. */
  readonly proxy: TcpProxy | undefined;
  /** JSON requests with the cluster's token: `{ status, body }`. */
  readonly api: ReturnType<typeof client>;
  /** Opens the SSE stream of `sessionId` on this instance. */
  follow(sessionId: string, options?: { after?: number; lastEventId?: string }): Promise<Follower>;
  /** `kill -9`, resolved once the process has exited. */
  kill(): Promise<void>;
  /** `SIGTERM` (a drain: its sessions are handed on), resolved once the process has exited. */
  drain(): Promise<void>;
  /** `SIGSTOP`: the process stays, frozen (its sockets open, its timers still). */
  pause(): void;
  /** `SIGCONT`. */
  resume(): void;
  /**
   * The process's state letter from `/proc/<pid>/stat` (Linux): `T` while stopped, `R`/`S`
   * while it runs; undefined once it has exited.
   */
  state(): string | undefined;
}

/** A session's lease as Redis holds it: `<instanceId>:<fence>` with its remaining TTL. */
export interface LeaseView {
  readonly instanceId: string;
  readonly fence: number;
  readonly ttlMs: number;
}

/** An entry of a session's event Stream, read with `XRANGE`. */
export interface StoredEvent {
  readonly streamId: string;
  readonly seq: number;
  /** The event's id (what a client reads as `id` in its JSON). */
  readonly id: string;
  readonly type: string;
  readonly runId: string | undefined;
  readonly payload: Record<string, unknown>;
}

/** Options of {@link createServeCluster}. */
export interface ServeClusterOptions {
  /** The bearer token every instance accepts (`--tokens <token>:<owner>`). */
  readonly token?: string;
  readonly ownerId?: string;
  /** `--lease-ttl-ms` of every instance. @default 1000 */
  readonly leaseTtlMs?: number;
  /** `--chunk-delay-ms` of every instance (the demo model's pause per word). @default 40 */
  readonly chunkDelayMs?: number;
  /** `--key-prefix`. @default 'rp:' */
  readonly keyPrefix?: string;
}

/** Instances over one Redis, and what a test reads from Redis about a session. */
export interface ServeCluster {
  readonly redis: PrivateRedis;
  /** A plain connection for the test's own reads. */
  readonly admin: Redis;
  readonly token: string;
  readonly ownerId: string;
  readonly keyPrefix: string;
  readonly leaseTtlMs: number;
  /** Every instance started, alive or not, in start order. */
  readonly nodes: readonly ServeNode[];
  /** Starts one instance; resolves once it prints that it listens. */
  start(options: ServeNodeOptions): Promise<ServeNode>;
  /** Starts instances named `ids` side by side. */
  startMany(ids: readonly string[], options?: Omit<ServeNodeOptions, 'id'>): Promise<ServeNode[]>;
  /**
   * `count` working instances, oldest first: those alive are resumed and their proxies healed
   * (what a test froze or cut is whole again), and the missing ones are started, each reaching
   * Redis through a proxy of its own (named `n1`, `n2`, …).
   */
  ready(count: number): Promise<ServeNode[]>;
  keys(sessionId: string): SessionKeys;
  /** The session's lease, or undefined while nobody holds it. */
  lease(sessionId: string): Promise<LeaseView | undefined>;
  /** The session's last granted fence (0 before the first). */
  fence(sessionId: string): Promise<number>;
  /** The session's event Stream, whole, in order. */
  storedEvents(sessionId: string): Promise<StoredEvent[]>;
  /** The session's event Stream and its `seq` key, read in one transaction. */
  storedLog(sessionId: string): Promise<{ events: StoredEvent[]; seqKey: number }>;
  /** Kills every instance (resuming a paused one first), closes proxies and the admin connection. */
  close(): Promise<void>;
}

let scratchCount = 0;

/**
 * Instances of `runplane serve` over `redis`, each with its SQLite file in a scratch folder,
 * `--port 0`, the lease TTL and the demo model's pace of `options`, and no rate limit (one token
 * stands for many clients here).
 */
export function createServeCluster(
  redis: PrivateRedis,
  options: ServeClusterOptions = {},
): ServeCluster {
  const token = options.token ?? 'cluster-token-1';
  const ownerId = options.ownerId ?? 'alice';
  const leaseTtlMs = options.leaseTtlMs ?? 1_000;
  const keyPrefix = options.keyPrefix ?? 'rp:';
  const dir = mkdtempSync(join(tmpdir(), `runplane-cluster-${++scratchCount}-`));
  const admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  const nodes: ServeNode[] = [];
  const proxies: TcpProxy[] = [];

  async function start(node: ServeNodeOptions): Promise<ServeNode> {
    let proxy: TcpProxy | undefined;
    if (node.viaProxy === true) {
      proxy = await startTcpProxy(redis.port);
      proxies.push(proxy);
    }
    const redisUrl = proxy === undefined ? redis.url : `redis://127.0.0.1:${proxy.port}/0`;
    const args = [
      '--db',
      join(dir, `${node.id}.db`),
      ...(node.tokens === false ? [] : ['--tokens', `${token}:${ownerId}`]),
      ...(node.cluster === false
        ? []
        : [
            '--redis',
            redisUrl,
            '--instance-id',
            node.id,
            '--lease-ttl-ms',
            String(leaseTtlMs),
            '--key-prefix',
            keyPrefix,
          ]),
      '--chunk-delay-ms',
      String(node.chunkDelayMs ?? options.chunkDelayMs ?? 40),
      '--rate-limit',
      '0',
      '--log-format',
      'none',
      '--grace-ms',
      '500',
      ...(node.args ?? []),
    ];
    const process = await spawnServer(args, { env: node.env ?? {} });
    const signal = (name: NodeJS.Signals) => {
      if (process.child.exitCode === null && process.child.signalCode === null) {
        process.child.kill(name);
      }
    };
    const started: ServeNode = {
      id: node.id,
      url: process.url,
      process,
      proxy,
      api: client(process.url, token),
      follow: (sessionId, at) => followSession(process.url, token, sessionId, at),
      async kill() {
        signal('SIGKILL');
        await process.exited;
      },
      async drain() {
        signal('SIGTERM');
        await process.exited;
      },
      pause: () => signal('SIGSTOP'),
      resume: () => signal('SIGCONT'),
      state: () => processState(process.child.pid),
    };
    nodes.push(started);
    return started;
  }

  const keys = (sessionId: string) => toSessionKeys({ ownerId, sessionId }, keyPrefix);
  const startMany = (ids: readonly string[], common: Omit<ServeNodeOptions, 'id'> = {}) =>
    Promise.all(ids.map((id) => start({ ...common, id })));
  let named = 0;

  return {
    redis,
    admin,
    token,
    ownerId,
    keyPrefix,
    leaseTtlMs,
    nodes,
    start,
    startMany,
    async ready(count) {
      const alive = nodes
        .filter(({ process: { child } }) => child.exitCode === null && child.signalCode === null)
        .slice(0, count);
      for (const node of alive) {
        node.resume();
        node.proxy?.heal();
      }
      const ids = Array.from({ length: count - alive.length }, () => `n${++named}`);
      return [...alive, ...(await startMany(ids, { viaProxy: true }))];
    },
    keys,
    async lease(sessionId) {
      const key = keys(sessionId).lease;
      const [value, ttlMs] = await admin.multi().get(key).pttl(key).exec().then(toPair);
      if (typeof value !== 'string') return undefined;
      const cut = value.lastIndexOf(':');
      return {
        instanceId: value.slice(0, cut),
        fence: Number(value.slice(cut + 1)),
        ttlMs: Number(ttlMs),
      };
    },
    async fence(sessionId) {
      return Number((await admin.get(keys(sessionId).fence)) ?? 0);
    },
    async storedEvents(sessionId) {
      return (await this.storedLog(sessionId)).events;
    },
    async storedLog(sessionId) {
      const { events, seq } = keys(sessionId);
      // One transaction: the Stream and the seq key as of the same moment.
      const [entries, seqText] = await admin
        .multi()
        .xrange(events, '-', '+')
        .get(seq)
        .exec()
        .then(toPair);
      return {
        seqKey: Number(seqText ?? 0),
        events: (entries as Array<[string, string[]]>).map(([streamId, fields]) => {
          const event = JSON.parse(fields[1] ?? 'null') as {
            seq: number;
            id: string;
            type: string;
            runId?: string;
            payload: Record<string, unknown>;
          };
          return {
            streamId,
            seq: event.seq,
            id: event.id,
            type: event.type,
            runId: event.runId,
            payload: event.payload,
          };
        }),
      };
    },
    async close() {
      for (const node of nodes) {
        node.resume();
        await node.kill();
      }
      await Promise.all(proxies.map((proxy) => proxy.close()));
      admin.disconnect();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function processState(pid: number | undefined): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // `pid (comm) S ...`: comm may hold spaces and parentheses, the state follows the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return undefined;
  }
}

const toPair = (replies: Array<[Error | null, unknown]> | null): [unknown, unknown] => {
  const [first, second] = replies ?? [];
  const error = first?.[0] ?? second?.[0];
  if (error) throw error;
  return [first?.[1], second?.[1]];
};

/**
 * One private Redis for the calling test file (started before its tests) and a cluster on it.
 * By default each test gets a fresh cluster on a key prefix of its own, whose processes are
 * killed after the test; with `perFile` the file's tests share one cluster (killed after the
 * file), each taking the instances it needs from {@link ServeCluster.ready}, which replaces the
 * ones a test killed: starting processes is most of such a file's time on a loaded host. After
 * a failed test the tail of every instance's output is printed. Call it at the top of a
 * `describe.skipIf(skipRedis)` block.
 *
 * @returns `cluster()`: the test's (or the file's) cluster, created on first use
 */
export function useServeCluster(
  options: Omit<ServeClusterOptions, 'keyPrefix'> & { readonly perFile?: boolean } = {},
) {
  let redis: PrivateRedis | undefined;
  let current: ServeCluster | undefined;
  let prefixes = 0;
  beforeAll(async () => {
    redis = await startPrivateRedis();
  });
  afterEach(async (context) => {
    if (context.task.result?.state === 'fail') {
      for (const node of current?.nodes ?? []) {
        const tail = (text: string) => text.slice(-4_000);
        console.error(
          `--- instance ${node.id} stdout:\n${tail(node.process.output())}\n--- stderr:\n${tail(node.process.errors())}`,
        );
      }
    }
    if (options.perFile === true) return;
    await current?.close();
    current = undefined;
  });
  afterAll(async () => {
    await current?.close();
    await redis?.stop();
  });
  return {
    cluster: (): ServeCluster => {
      if (redis === undefined) throw new Error('the private redis-server is not started yet');
      current ??= createServeCluster(redis, { ...options, keyPrefix: `sc${++prefixes}:` });
      return current;
    },
  };
}

/**
 * Polls `probe` until it returns a value (not undefined); each poll is one real query (HTTP or
 * Redis), so this waits on the system's state, never on a guessed duration.
 *
 * @throws Error naming `what` after `timeoutMs`
 */
export async function waitFor<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 20_000,
): Promise<T> {
  let value: T | undefined;
  await pollUntil(async () => (value = await probe()) !== undefined, what, timeoutMs);
  return value as T;
}

/** Waits until `node` has printed a line matching `pattern` on stdout; returns the match. */
export function waitForLine(
  node: ServeNode,
  pattern: RegExp,
  timeoutMs = 20_000,
): Promise<RegExpExecArray> {
  return waitFor(
    async () => pattern.exec(node.process.output()) ?? undefined,
    `${node.id} to print ${String(pattern)}`,
    timeoutMs,
  );
}

/** The run statuses a run ends in. */
const terminalStatuses: ReadonlySet<string> = new Set(['COMPLETED', 'FAILED', 'CANCELLED']);

/** The run's record once it has ended (polled on `node`). */
export function waitForRunEnd(
  node: ServeNode,
  runId: string,
  timeoutMs = 20_000,
): Promise<{ status: string; outcome: Record<string, unknown> | null }> {
  return waitFor(
    async () => {
      const { status, body } = await node.api('GET', `/api/runs/${runId}`);
      if (status !== 200) throw new Error(`GET /api/runs/${runId} on ${node.id}: ${status}`);
      return terminalStatuses.has(body.status as string)
        ? (body as { status: string; outcome: Record<string, unknown> | null })
        : undefined;
    },
    `run ${runId} to end (read on ${node.id})`,
    timeoutMs,
  );
}

/** Creates a session on `node`; returns its id. */
export async function createSession(node: ServeNode, body: unknown = {}): Promise<string> {
  const { status, body: answer } = await node.api('POST', '/api/sessions', body);
  if (status !== 201)
    throw new Error(`POST /api/sessions on ${node.id}: ${status} ${JSON.stringify(answer)}`);
  return answer.session_id as string;
}

/** Posts `user.message` events on `node`; returns each result (`run_id`, `status`). */
export async function sendMessages(
  node: ServeNode,
  sessionId: string,
  texts: readonly string[],
): Promise<Array<{ run_id: string; status: string; result: string }>> {
  const { status, body } = await node.api('POST', `/api/sessions/${sessionId}/events`, {
    events: texts.map((text) => ({ type: 'user.message', payload: { text } })),
  });
  if (status !== 200) {
    throw new Error(`user.message on ${node.id}: ${status} ${JSON.stringify(body)}`);
  }
  return body.results as Array<{ run_id: string; status: string; result: string }>;
}

/** Posts `user.interrupt {run_id}` on `node`; returns the HTTP status and the event's result. */
export async function interruptRun(
  node: ServeNode,
  sessionId: string,
  runId: string,
): Promise<{ status: number; result: unknown; body: Record<string, unknown> }> {
  const { status, body } = await node.api('POST', `/api/sessions/${sessionId}/events`, {
    events: [{ type: 'user.interrupt', payload: { run_id: runId } }],
  });
  const results = body.results as Array<{ result: string }> | undefined;
  return { status, result: results?.[0]?.result, body };
}

/**
 * Checks a session's Stream as Redis holds it: entry ids `<seq>-0`, `seq` 1..n without a gap or
 * a repeat, and the `seq` key equal to the last. Returns the problems found (empty: whole).
 */
export async function checkStream(cluster: ServeCluster, sessionId: string): Promise<string[]> {
  const { events, seqKey } = await cluster.storedLog(sessionId);
  const problems: string[] = [];
  events.forEach((event, i) => {
    if (event.seq !== i + 1) problems.push(`entry ${i} has seq ${event.seq}, expected ${i + 1}`);
    if (event.streamId !== `${event.seq}-0`) {
      problems.push(`seq ${event.seq} is stored at Stream id ${event.streamId}`);
    }
  });
  if (seqKey !== events.length) {
    problems.push(`the seq key says ${seqKey}, the Stream holds ${events.length}`);
  }
  return problems;
}
