/**
 * The options of `runplane serve` as a function ({@link ServeOptions}), and what it returns
 * ({@link RunningServer}); `serve.ts` starts it.
 *
 * @module
 */
import type { Clock } from '../clock.js';
import type { LogFormat, LogLevel } from '../observability/logger.js';
import type { Agent } from '../run/agent.js';
import type { Runtime } from '../runtime/create-runtime.js';
import type { CrashedRun } from './recover.js';
import type { TraceparentMode } from './serve-observability.js';
import type { Service } from './service-app.js';

/** An OpenAI-compatible endpoint for the default agent. */
export interface OpenAIEndpoint {
  /** The API root, e.g. `http://127.0.0.1:8000/v1`. */
  readonly baseURL: string;
  /** The bearer key; a local server may accept any non-empty string. */
  readonly apiKey: string;
  /** The model name. */
  readonly model: string;
}

/** Options of {@link startServer}. Every field is optional. */
export interface ServeOptions {
  /** The interface to listen on. @default '127.0.0.1' */
  readonly host?: string;
  /** The TCP port; 0 picks a free one. @default 8787 */
  readonly port?: number;
  /** The SQLite database file (its folder is created). @default './.runplane/runplane.db' */
  readonly dbPath?: string;
  /**
   * Run as one instance of a cluster on this Redis 7 server instead of on the SQLite database
   * (README "Cluster"): every instance serves every session; `dbPath` is not opened.
   * @default undefined (a single instance on SQLite)
   */
  readonly redis?: ClusterServeOptions;
  /**
   * Bearer tokens as `token:owner,token:owner`. Without it, a dev token for owner `dev` is
   * created once per database and printed at start.
   */
  readonly tokens?: string;
  /** How long shutdown lets running runs finish before cancelling them, in ms. @default 10000 */
  readonly graceMs?: number;
  /**
   * How long shutdown keeps idle keep-alive connections open once the drain is over, in ms:
   * a client about to reuse one is answered (with `Connection: close`) instead of reset.
   * @default 1000
   */
  readonly lingerMs?: number;
  /** Interval of SSE heartbeat comments, in ms. @default 15000 */
  readonly heartbeatMs?: number;
  /**
   * How long a request body may take to arrive once its headers are in, in ms; later is 408
   * `request_timeout`. @default 30000
   */
  readonly bodyTimeoutMs?: number;
  /**
   * Unread bytes one session SSE stream may buffer; a reader that leaves it full for a whole
   * heartbeat interval is ended and resumes with `Last-Event-ID`. @default 262144 (256 KiB)
   */
  readonly streamBufferBytes?: number;
  /** Open SSE streams one owner may hold at once (429 beyond). @default 128 */
  readonly maxStreamsPerOwner?: number;
  /**
   * The byte budget of the event log's in-memory tail, for the whole process: caught-up SSE
   * followers are served from it without a query (see `createSqliteEventLog`'s `tail.bytes`).
   * @default 8388608 (8 MiB)
   */
  readonly eventTailBytes?: number;
  /** The demo model's pause before each streamed word, in ms. @default 60 */
  readonly chunkDelayMs?: number;
  /** The demo tools that ask for confirmation first. @default ['clock'] */
  readonly confirmTools?: readonly string[];
  /** Total budget of each run, queue time included, in ms. @default none */
  readonly runTimeoutMs?: number;
  /**
   * Sessions with no activity (no event, no settings change) for this many days, and no
   * unfinished run, are deleted by the background sweep. @default none (kept forever)
   */
  readonly retentionDays?: number;
  /** Sessions one owner may have at once (429 `too_many_sessions` beyond). @default 10000 */
  readonly maxSessionsPerOwner?: number;
  /**
   * Runs of one owner running at once; more wait their turn (owners take turns for freed
   * slots). @default 8
   */
  readonly maxRunningRunsPerOwner?: number;
  /** Runs of one owner not yet ended, running or waiting (429 `too_many_runs` beyond). @default 1000 */
  readonly maxUnfinishedRunsPerOwner?: number;
  /** Runs running at once across all owners; more wait. @default unlimited */
  readonly maxConcurrentRuns?: number;
  /** Requests per second one owner may sustain (429 `rate_limited` beyond); 0 turns the limit off. @default 50 */
  readonly rateLimitPerSecond?: number;
  /** Requests one owner may send at once after a quiet spell. @default 200 */
  readonly rateLimitBurst?: number;
  /**
   * How long a tool call waits for its confirmation before it is denied with reason
   * `timeout`, in ms, for a session that sets no `approval_timeout_ms`. @default 600000
   */
  readonly approvalTimeoutMs?: number;
  /** The default agent's token budget of one model request (older turns are summarized). @default 24000 */
  readonly maxRequestTokens?: number;
  /** The default agent's longest tool result in a request, in tokens (cut with a marker). @default 4000 */
  readonly maxToolResultTokens?: number;
  /** What the default agent does with the older turns that do not fit. @default 'summary' */
  readonly contextOverflow?: 'summary' | 'drop';
  /** How often the default agent's model call retries a 429 or 5xx answer (openai client). @default 2 */
  readonly modelMaxRetries?: number;
  /** Use an OpenAI-compatible model instead of the scripted demo model. */
  readonly openai?: OpenAIEndpoint;
  /** Run this agent instead of the default one (tests, embedding). */
  readonly agent?: Agent<string, unknown>;
  /** The clock of the runtime, the demo model and the heartbeats. @default the system clock */
  readonly clock?: Clock;
  /** Where startup lines go. @default stdout */
  readonly log?: (line: string) => void;
  /** Receives unexpected errors. @default console.error */
  readonly reportError?: (error: unknown) => void;
  /**
   * Serve `GET /metrics` (Prometheus text) on the main port, behind this bearer token (not a
   * user token; 8-256 visible ASCII characters, else `INVALID_ARGUMENT`). @default none:
   * `/metrics` is off unless this or `metricsPort` is given
   */
  readonly metricsToken?: string;
  /** Serve `GET /metrics` on a listener of its own on this port (0: any free one). @default none */
  readonly metricsPort?: number;
  /**
   * The interface of the `metricsPort` listener (not `host`: the main port may face the
   * network while metrics stay local). Beyond loopback with no `metricsToken`, a warning is
   * printed at start. @default '127.0.0.1'
   */
  readonly metricsHost?: string;
  /**
   * One line per request and per run end: `json` (pino JSON lines), `pretty` (for a terminal)
   * or `none`. The startup lines go to `log` either way. @default 'none' (`runplane serve`: 'json')
   */
  readonly logFormat?: LogFormat;
  /** The lowest level logged. @default 'info' */
  readonly logLevel?: LogLevel;
  /** Where request and run lines go. @default stdout */
  readonly logDestination?: { write(line: string): void };
  /**
   * What a request's `traceparent` is to the runs it starts: `parent` (the caller's sampled
   * flag decides whether they record), `link` (root spans this process samples, linked to the
   * caller) or `ignore`. @default 'parent'
   */
  readonly traceparent?: TraceparentMode;
}

/** A running server. */
export interface RunningServer {
  /** The base URL, e.g. `http://127.0.0.1:8787`. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  /** The dev token, when no tokens were configured. */
  readonly devToken: string | undefined;
  /** Where `GET /metrics` answers, when it is on (`metricsToken` or `metricsPort`). */
  readonly metricsUrl: string | undefined;
  /** Runs the previous process left unfinished, now FAILED with cause `crashed`. */
  readonly recovered: readonly CrashedRun[];
  readonly runtime: Runtime;
  readonly service: Service;
  /**
   * Shuts down gracefully (idempotent). At once: the listener stops accepting connections, and
   * on the connections still open new work (a new session, a `user.message`) gets 503
   * `shutting_down` with `Retry-After` and `Connection: close`, while reads, streams and
   * `user.interrupt` keep working; queued runs are cancelled, running ones interrupted. After
   * `graceMs` what is left is cancelled; then SSE streams send their tail and end, answers in
   * progress complete (at most 10 s more), idle keep-alive connections are kept `lingerMs`
   * more (a request on one is answered, with `Connection: close`), and the database is
   * closed. No accepted request is reset.
   *
   * In a cluster, a shutdown that Redis holds up (a frozen Redis) stops waiting `graceMs` plus
   * 5 s (and a 1 s `PING`) after it began, once Redis fails that `PING`: the sessions it held
   * are left to failover (their leases expire, another instance takes them) and its writes
   * not yet in Redis are dropped, as after `kill -9` (README "Cluster"); it says so in the log.
   *
   * @returns `{ drained }`: whether every running run finished within the grace period;
   *   `abandoned: true` when the cluster shutdown stopped waiting for Redis (its Redis
   *   connections may still hold pending commands: end the process)
   */
  shutdown(options?: { graceMs?: number }): Promise<{ drained: boolean; abandoned?: boolean }>;
}

/** Options of a cluster instance under `runplane serve` (README "Cluster"). */
export interface ClusterServeOptions {
  /** The Redis 7 server, e.g. `redis://127.0.0.1:6379/0`. */
  readonly url: string;
  /** This instance's id, unique among live instances. @default `<hostname>-<pid>` */
  readonly instanceId?: string | undefined;
  /** How long a session lease lives without a renew, in ms (renewed every third). @default 10000 */
  readonly leaseTtlMs?: number | undefined;
  /** The prefix of every key. @default 'rp:' */
  readonly keyPrefix?: string | undefined;
  /**
   * How many attempts a run of a session with failover policy `resume` gets in all (the first
   * included), an integer from 1 to 100; past it the run is marked FAILED `owner_lost`.
   * @default 3
   */
  readonly failoverMaxAttempts?: number | undefined;
}
